package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/internal/anchor/rekorsubmit"
	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
)

// anchorOptions are --anchor and --anchor-key (spec/anchoring.md).
type anchorOptions struct {
	url, key string
	// sealTimeout bounds how long sealing waits for the record's receipt
	// (0: anchorSealTimeout).
	sealTimeout time.Duration
}

// anchorSealTimeout bounds the seal's wait for the log: a log that is down
// leaves the record unanchored (reported), never the bundle unsealed.
const anchorSealTimeout = 15 * time.Second

func (a *anchorOptions) flags(c *cobra.Command) {
	c.Flags().StringVar(&a.url, "anchor", "", "anchor the first checkpoint, every checkpoint and the sealed record in the transparency log at URL (tracectl log serve; needs --key or --signer, and --anchor-key); rekor:URL anchors the sealed record in the Rekor v2 log at URL (needs --key or --signer)")
	c.Flags().StringVar(&a.key, "anchor-key", "", "the log's signed-note verifier key file (log.pub of tracectl log serve)")
}

func (a *anchorOptions) set() bool { return a.url != "" }

// rekorURL is the Rekor v2 log's URL of --anchor rekor:URL ("" otherwise).
func (a *anchorOptions) rekorURL() string {
	u, _ := strings.CutPrefix(a.url, rekor.Scheme)
	if u == a.url {
		return ""
	}
	return u
}

// checkSigner refuses, before anything is recorded, a key that cannot
// sign what --anchor rekor:URL submits: a digest (Ed25519ph or ECDSA). A
// key file signs it; a signer process (--signer unix:PATH) signs the
// digest of a record its key signed (kind rekor); a KMS key is not given
// the digest.
func (a *anchorOptions) checkSigner(s sign.Signer) error {
	if a.rekorURL() == "" || s == nil {
		return nil
	}
	switch s.(type) {
	case rekor.DigestSigner, rekor.RecordDigestSigner:
		return nil
	}
	return usageErr(errors.New("--anchor rekor:URL needs --key FILE or --signer unix:PATH: a Rekor hashedrekord entry is a signature over the record's digest (Ed25519ph), which a KMS key is not asked to make"), "anchor in a tracectl log (--anchor URL --anchor-key FILE), whose entries are the signed records themselves")
}

func (a *anchorOptions) validate(signs bool) error {
	switch {
	case a.url == "" && a.key != "":
		return usageErr(errors.New("--anchor-key without --anchor"), "")
	case a.url == "":
		return nil
	case a.rekorURL() != "":
		if a.key != "" {
			return usageErr(errors.New("--anchor-key with --anchor rekor:URL: a Rekor entry is checked against a sigstore trusted root, by verify --rekor-root"), "")
		}
		if _, err := rekorsubmit.New(a.rekorURL(), ""); err != nil {
			return usageErr(fmt.Errorf("--anchor: %w", err), "")
		}
		if !signs {
			return usageErr(errors.New("--anchor needs --key or --signer: what is anchored is signed"), "")
		}
		return nil
	case a.key == "":
		return usageErr(errors.New("--anchor needs --anchor-key: receipts are checked against the log's key"), "tracectl log serve writes it to DIR/log.pub")
	case !signs:
		return usageErr(errors.New("--anchor needs --key or --signer: what is anchored is signed"), "")
	}
	return nil
}

// client loads the log key and returns the client of the log (nil for
// a Rekor log: newSessionAnchor makes its client).
func (a *anchorOptions) client() (*submit.Client, error) {
	if a.rekorURL() != "" {
		return nil, nil
	}
	b, err := readBounded(a.key, 4<<10)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--anchor-key: %w", err), "")
	}
	k, err := anchor.ParseKeys(string(b), nil, 0)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--anchor-key %s: %w", a.key, err), "")
	}
	return &submit.Client{URL: a.url, Keys: k}, nil
}

// executableDigest is selfDigest computed once per process: a proxy
// anchors many sessions, and the running executable does not change.
var executableDigest = sync.OnceValues(selfDigest)

// sessionAnchor anchors one recording's statements: a queue that never
// blocks the recording, and the record signer that anchors at seal.
type sessionAnchor struct {
	q      *submit.Queue
	c      *submit.Client
	rk     *rekorsubmit.Client // --anchor rekor:URL: only the sealed record is anchored, q and c are nil
	signer sign.Signer
	inner  trustRecordSigner
	stderr io.Writer
	dir    string
	wait   time.Duration
}

// startAnchoring begins anchoring rec's statements: checkpoints are
// started if --checkpoint-every did not start them, and the first one,
// over the header alone, is signed now and queued, so a session deleted
// later still left a trace in the log.
func startAnchoring(ctx context.Context, rec *producer.Recorder, a anchorOptions, c *submit.Client, signer sign.Signer, id recordIdentity, ck checkpointEvery, stderr io.Writer) (*sessionAnchor, error) {
	sa, err := newSessionAnchor(rec, a, c, signer, id, time.Now, stderr)
	if err != nil {
		return nil, err
	}
	if sa.rk != nil {
		// Rekor holds the sealed record only: checkpoints are signed
		// (--checkpoint-every), not anchored.
		if err := startCheckpoints(rec, ck, signer, id, stderr); err != nil {
			return nil, err
		}
		return sa, nil
	}
	ckpt := sa.inner
	ckpt.signer = checkpointSigner(ckpt.signer)
	if err := startCheckpointsWith(rec, ck, ckpt, stderr, sa.submit); err != nil {
		sa.q.Close()
		return nil, err
	}
	cp, err := rec.Checkpoint(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "tracectl: checkpoint failed: "+escapeTerminal(err.Error()))
	} else if cp != nil {
		sa.submit(cp)
	}
	return sa, nil
}

// newSessionAnchor returns rec's anchoring queue and record signer, with
// no checkpoint started: seal --anchor anchors only the record.
func newSessionAnchor(rec *producer.Recorder, a anchorOptions, c *submit.Client, signer sign.Signer, id recordIdentity, now func() time.Time, stderr io.Writer) (*sessionAnchor, error) {
	digest, err := executableDigest()
	if err != nil {
		return nil, fmt.Errorf("digest of the tracectl executable: %w", err)
	}
	sa := &sessionAnchor{c: c, signer: signer, stderr: stderr, dir: rec.Dir(), wait: a.sealTimeout,
		inner: trustRecordSigner{signer: signer, identity: id, now: now, transcriptURI: "urn:uuid:" + rec.Scope(), digest: digest}}
	if sa.wait == 0 {
		sa.wait = anchorSealTimeout
	}
	if u := a.rekorURL(); u != "" {
		if err := a.checkSigner(signer); err != nil {
			return nil, err
		}
		if sa.rk, err = rekorsubmit.New(u, "tracectl/"+version()); err != nil {
			return nil, usageErr(fmt.Errorf("--anchor: %w", err), "")
		}
		return sa, nil
	}
	sa.q = submit.NewQueue(c, rec.Dir(), submit.QueueOptions{Retries: 3, Report: sa.report})
	return sa, nil
}

func (sa *sessionAnchor) submit(cp *producer.Checkpoint) {
	if err := sa.q.Submit(cp.File); err != nil {
		fmt.Fprintln(sa.stderr, "tracectl: anchor failed: "+escapeTerminal(err.Error()))
	}
}

func (sa *sessionAnchor) report(path string, r *anchor.Receipt, err error) {
	if err != nil {
		fmt.Fprintf(sa.stderr, "tracectl: anchor failed: %s: %s\n", path, escapeTerminal(err.Error()))
		return
	}
	fmt.Fprintf(sa.stderr, "tracectl: anchored %s: log entry %d of %d\n", path, r.LeafIndex, r.LeafCount)
}

// close finishes what is queued.
func (sa *sessionAnchor) close() {
	if sa != nil && sa.q != nil {
		sa.q.Close()
	}
}

// SignTranscript signs the sealed record, adds it to the log (kept as
// anchors/record.json), and returns record.json: the anchored record with
// transparency naming its log entry, signed again (trace-spec's order).
// The seal waits for the entry's index, not for its receipt, which the
// queue writes before close returns. A log that cannot be reached leaves
// the signed record unanchored, reported like a failed checkpoint: the
// seal never waits longer than sa.wait.
func (sa *sessionAnchor) SignTranscript(ctx context.Context, root string, calls int64) ([]byte, error) {
	b, err := sa.inner.SignTranscript(ctx, root, calls)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(sa.dir, anchor.Dir), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		fmt.Fprintln(sa.stderr, "tracectl: anchor failed: record: "+escapeTerminal(err.Error()))
		return b, nil
	}
	if err := submit.WriteFile(filepath.Join(sa.dir, filepath.FromSlash(anchor.RecordFile)), b); err != nil {
		fmt.Fprintln(sa.stderr, "tracectl: anchor failed: record: "+escapeTerminal(err.Error()))
		return b, nil
	}
	if sa.rk != nil {
		return sa.anchorRekor(ctx, b)
	}
	actx, cancel := context.WithTimeout(ctx, sa.wait)
	defer cancel()
	// The entry's index is known once the log has sequenced it: the
	// receipt (a published checkpoint and its proof) follows on the queue
	// and is written before the session's anchoring closes.
	idx, err := sa.q.Add(actx, anchor.RecordFile, b)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintln(sa.stderr, "tracectl: anchor failed: record: no log entry within "+sa.wait.String())
		}
		return b, nil
	}
	rec, err := sign.ParseRecord(b)
	if err != nil {
		return nil, err
	}
	rec.Transparency = anchor.EntryURI(sa.c.URL, idx)
	return sign.Sign(rec, sa.signer)
}

// anchorRekor submits the signed record b (already kept as
// anchors/record.json) to the Rekor v2 log, keeps the entry the log returns
// as anchors/rekor/record.json, and returns record.json: b with
// transparency naming the entry, signed again. The log answers once the
// entry is in a published checkpoint; the seal waits for that at most
// sa.wait, and a log that fails or does not answer leaves b, the signed
// record, unanchored, reported on stderr.
func (sa *sessionAnchor) anchorRekor(ctx context.Context, b []byte) ([]byte, error) {
	failed := func(err error) ([]byte, error) {
		fmt.Fprintln(sa.stderr, "tracectl: anchor failed: record: "+escapeTerminal(err.Error()))
		return b, nil
	}
	actx, cancel := context.WithTimeout(ctx, sa.wait)
	defer cancel()
	e, err := sa.rk.Add(actx, b, sa.signer.Public(), sa.signer)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("rekor %s: no entry within %s", sa.rk.URL, sa.wait)
		}
		return failed(err)
	}
	data, err := rekor.MarshalEntry(e)
	if err != nil {
		return failed(err)
	}
	if err := os.Mkdir(filepath.Join(sa.dir, filepath.FromSlash(rekor.Dir)), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return failed(err)
	}
	if err := submit.WriteFile(filepath.Join(sa.dir, filepath.FromSlash(rekor.EntryFile)), data); err != nil {
		return failed(err)
	}
	fmt.Fprintf(sa.stderr, "tracectl: anchored %s: Rekor entry %d of %d\n", anchor.RecordFile, e.GetLogIndex(), e.GetInclusionProof().GetTreeSize())
	rec, err := sign.ParseRecord(b)
	if err != nil {
		return nil, err
	}
	rec.Transparency = anchor.EntryURI(sa.rk.URL, uint64(e.GetLogIndex()))
	return sign.Sign(rec, sa.signer)
}

// proxyAnchors holds the anchoring of each bundle a proxy records.
type proxyAnchors struct {
	c  *submit.Client
	mu sync.Mutex
	m  map[*producer.Recorder]*sessionAnchor
}

// newProxyAnchors returns nil when --anchor is not set.
func newProxyAnchors(a anchorOptions) (*proxyAnchors, error) {
	if !a.set() {
		return nil, nil
	}
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	return &proxyAnchors{c: c, m: map[*producer.Recorder]*sessionAnchor{}}, nil
}

func (p *proxyAnchors) start(ctx context.Context, rec *producer.Recorder, a anchorOptions, signer sign.Signer, id recordIdentity, ck checkpointEvery, stderr io.Writer) error {
	sa, err := startAnchoring(ctx, rec, a, p.c, signer, id, ck, stderr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.m[rec] = sa
	p.mu.Unlock()
	return nil
}

// take returns and forgets rec's anchoring (nil safe).
func (p *proxyAnchors) take(rec *producer.Recorder) *sessionAnchor {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sa := p.m[rec]
	delete(p.m, rec)
	return sa
}
