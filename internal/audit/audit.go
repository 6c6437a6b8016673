// Package audit checks a fleet's bundles against a transparency log
// (tracectl audit; spec/anchoring.md, "Audit"). It reads the log, or a
// mirror of its static tlog-tiles files, checks the checkpoint under the
// log key and every entry against it, keeps the entries signed by trusted
// keys, groups them by session (tool_transcript.transcript_uri) and
// compares each session with its bundle: a session anchored with no bundle
// is missing; a bundle that lacks a statement the log holds for it was
// rewritten (or truncated, when the log's statement covers more calls);
// statements of one session must not go backward. It remembers the last
// checkpoint it saw per log and requires the new one to be consistent
// with it, so a log that forks between audits is caught.
package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// Finding codes (spec/anchoring.md, "Audit").
const (
	Missing       = "missing"        // the log holds statements of a session with no bundle
	Rewritten     = "rewritten"      // the log holds a statement of a session its bundle does not
	Truncated     = "truncated"      // ... and that statement covers more calls than the bundle's record
	NonIncreasing = "non_increasing" // a session's statements go backward in log order
	LogForked     = "log_forked"     // the checkpoint is not consistent with the one seen last, or the entries do not make its root
	Unlogged      = "unlogged"       // a bundle with receipts whose session the log does not hold
)

// MaxEntries bounds the entries one audit reads (a few hundred bytes of
// memory each).
const MaxEntries = 1 << 24

// Fetcher reads a log's tlog-tiles resources (Tessera's HTTPFetcher or
// FileFetcher).
type Fetcher interface {
	ReadCheckpoint(ctx context.Context) ([]byte, error)
	ReadTile(ctx context.Context, l, i uint64, p uint8) ([]byte, error)
	ReadEntryBundle(ctx context.Context, i uint64, p uint8) ([]byte, error)
}

// Finding is one problem.
type Finding struct {
	Code    string `json:"code"`
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
}

// State is what an audit remembers of a log: its last checkpoint.
type State struct {
	Size uint64 `json:"size"`
	Root string `json:"root"` // sha256:<hex>
}

// Options configure Run.
type Options struct {
	Log     Fetcher
	Keys    anchor.Keys
	Trusted []crypto.PublicKey
	Bundles []string // bundle directories
	Last    *State   // the checkpoint seen last (nil: first audit of this log)
}

// Result is an audit's outcome.
type Result struct {
	Size, Sessions, Entries, Foreign int
	Bundles                          int
	Findings                         []Finding
	State                            *State // the checkpoint to remember (nil when the log was not consistent)
}

type entry struct {
	index uint64
	leaf  [32]byte
	iat   int64
	calls int64
}

type session struct {
	key, uri string
	entries  []entry
}

type bundle struct {
	dir    string
	leaves map[[32]byte]bool
	calls  int64 // record.json's call_count (-1: none)
	anchor bool  // has receipts
}

// Run audits.
func Run(ctx context.Context, o Options) (*Result, error) {
	raw, err := o.Log.ReadCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	cp, _, err := anchor.OpenCheckpoint(raw, o.Keys)
	if err != nil {
		return nil, err
	}
	res := &Result{Size: int(cp.Size)}
	if cp.Size > MaxEntries {
		return nil, fmt.Errorf("the log has %d entries, more than %d", cp.Size, MaxEntries)
	}
	add := func(code, subject, detail string) {
		res.Findings = append(res.Findings, Finding{code, subject, detail})
	}
	if o.Last != nil {
		if err := consistent(ctx, o.Log, o.Last, cp.Size, cp.Hash); err != nil {
			add(LogForked, "checkpoint", err.Error())
			return res, nil
		}
	}
	trusted := map[string]bool{}
	for _, k := range o.Trusted {
		tp, err := sign.Thumbprint(k)
		if err != nil {
			return nil, err
		}
		trusted[tp] = true
	}
	sessions := map[string]*session{}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	rng := rf.NewEmptyRange(0)
	for b := uint64(0); b*layout.EntryBundleWidth < cp.Size; b++ {
		eb, err := client.GetEntryBundle(ctx, o.Log.ReadEntryBundle, b, cp.Size)
		if err != nil {
			return nil, fmt.Errorf("read entry bundle %d: %w", b, err)
		}
		for j, e := range eb.Entries {
			idx := b*layout.EntryBundleWidth + uint64(j)
			if idx >= cp.Size {
				break
			}
			lh := rfc6962.DefaultHasher.HashLeaf(e)
			if err := rng.Append(lh, nil); err != nil {
				return nil, err
			}
			s, en, ok := statement(e, trusted)
			if !ok {
				res.Foreign++
				continue
			}
			en.index = idx
			res.Entries++
			id := s.key + " " + s.uri
			if sessions[id] == nil {
				sessions[id] = s
			}
			sessions[id].entries = append(sessions[id].entries, en)
		}
	}
	root, err := rng.GetRootHash(nil)
	if err != nil || rng.End() != cp.Size || !bytes.Equal(root, cp.Hash) {
		add(LogForked, "entries", fmt.Sprintf("the %d entries read do not make the checkpoint's root", rng.End()))
		return res, nil
	}
	res.State = &State{Size: cp.Size, Root: anchor.EncodeHash(cp.Hash)}
	bundles := map[string]*bundle{}
	for _, dir := range o.Bundles {
		uri, b, err := readBundle(dir)
		if err != nil {
			return nil, err
		}
		res.Bundles++
		bundles[uri] = b
	}
	res.Sessions = len(sessions)
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range sessions {
			if !yield(id) {
				return
			}
		}
	})
	seen := map[string]bool{}
	for _, id := range ids {
		s := sessions[id]
		seen[s.uri] = true
		b := bundles[s.uri]
		subject := s.uri
		if b == nil {
			add(Missing, subject, fmt.Sprintf("%d statements in the log (entries %s), signed by %s: no bundle", len(s.entries), indexes(s.entries), s.key))
			continue
		}
		subject = b.dir
		var last *entry
		for i := range s.entries {
			e := &s.entries[i]
			if !b.leaves[e.leaf] {
				if b.calls >= 0 && e.calls > b.calls {
					add(Truncated, subject, fmt.Sprintf("log entry %d signs %d calls; the bundle's record %d", e.index, e.calls, b.calls))
				} else {
					add(Rewritten, subject, fmt.Sprintf("log entry %d is a statement of this session the bundle does not hold", e.index))
				}
			}
			if last != nil && (e.calls < last.calls || e.iat < last.iat) {
				add(NonIncreasing, subject, fmt.Sprintf("log entry %d (%d calls, iat %d) after entry %d (%d calls, iat %d)", e.index, e.calls, e.iat, last.index, last.calls, last.iat))
			}
			last = e
		}
	}
	for uri, b := range bundles {
		if b.anchor && !seen[uri] {
			add(Unlogged, b.dir, "the bundle has receipts, but the log holds no statement of its session "+uri)
		}
	}
	sort.SliceStable(res.Findings, func(i, j int) bool { return res.Findings[i].Subject < res.Findings[j].Subject })
	return res, nil
}

func indexes(es []entry) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == 8 {
			b.WriteString("...")
			break
		}
		b.WriteString(strconv.FormatUint(e.index, 10))
	}
	return b.String()
}

// consistent checks the log's new tree against the one seen last.
func consistent(ctx context.Context, f Fetcher, last *State, size uint64, root []byte) error {
	old, err := canon.ParseDigest(last.Root)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	switch {
	case size < last.Size:
		return fmt.Errorf("the log shrank from %d to %d entries since the last audit", last.Size, size)
	case size == last.Size:
		if !bytes.Equal(old[:], root) {
			return fmt.Errorf("two roots for size %d: the log forked since the last audit", size)
		}
		return nil
	}
	pb, err := client.NewProofBuilder(ctx, size, f.ReadTile)
	if err != nil {
		return err
	}
	p, err := pb.ConsistencyProof(ctx, last.Size, size)
	if err != nil {
		return fmt.Errorf("consistency proof from %d to %d: %w", last.Size, size, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, last.Size, size, p, old[:], root); err != nil {
		return fmt.Errorf("the tree of %d entries is not an extension of the %d seen last: the log forked: %v", size, last.Size, err)
	}
	return nil
}

// statement reads a log entry as a Trust Record signed by a trusted key:
// its canonical bytes are re-derived from the anchor leaf, and its
// signature checked.
func statement(leaf []byte, trusted map[string]bool) (*session, entry, bool) {
	d, err := canon.Parse(leaf, canon.ParseOptions{})
	if err != nil {
		return nil, entry{}, false
	}
	jcs, err := d.Root().Canonical(canon.PolicyV02)
	if err != nil {
		return nil, entry{}, false
	}
	rec, err := sign.ParseRecord(jcs)
	if err != nil || rec.ToolTranscript == nil || sign.VerifySignature(jcs, rec) != nil {
		return nil, entry{}, false
	}
	tp, err := rec.Cnf.JWK.Thumbprint()
	if err != nil || !trusted[tp] {
		return nil, entry{}, false
	}
	uri := rec.ToolTranscript.TranscriptURI
	if uri == "" {
		uri = "(no transcript_uri)"
	}
	var calls int64
	if rec.ToolTranscript.CallCount != nil {
		calls = *rec.ToolTranscript.CallCount
	}
	return &session{key: tp, uri: uri}, entry{leaf: sha256.Sum256(leaf), iat: rec.IAT, calls: calls}, true
}

// readBundle reads what an audit compares: the session the header names,
// the anchor leaves of every signed statement, record.json's call count.
func readBundle(dir string) (string, *bundle, error) {
	f, err := os.Open(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		return "", nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	line, err := bufio.NewReaderSize(io.LimitReader(f, transcript.MaxLineBytes+1), transcript.MaxLineBytes+1).ReadSlice('\n')
	f.Close()
	if err != nil {
		return "", nil, fmt.Errorf("bundle %s: header: %w", dir, err)
	}
	var h struct {
		Scope string `json:"execution_scope"`
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Scope == "" {
		return "", nil, fmt.Errorf("bundle %s: header names no execution scope", dir)
	}
	b := &bundle{dir: dir, leaves: map[[32]byte]bool{}, calls: -1}
	files, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "*.json"))
	files = append(files, filepath.Join(dir, filepath.FromSlash(anchor.RecordFile)), filepath.Join(dir, transcript.RecordFile))
	for _, p := range files {
		if strings.HasPrefix(filepath.Base(p), ".") {
			continue
		}
		data, err := readBounded(p, sign.MaxRecordBytes)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		if leaf, err := anchor.Leaf(data); err == nil {
			b.leaves[sha256.Sum256(leaf)] = true
		}
		if filepath.Base(p) == transcript.RecordFile && filepath.Dir(p) == dir {
			if rec, err := sign.ParseRecord(data); err == nil && rec.ToolTranscript != nil && rec.ToolTranscript.CallCount != nil {
				b.calls = *rec.ToolTranscript.CallCount
			}
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, anchor.Dir)); err == nil && len(ents) > 0 {
		b.anchor = true
	}
	return "urn:uuid:" + h.Scope, b, nil
}

func readBounded(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes", p, max)
	}
	return b, nil
}
