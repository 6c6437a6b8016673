package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/internal/launch"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/stdio"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// sessionOptions describe one recorded proxy session (wrap and demo).
type sessionOptions struct {
	bundle, key, durability, retain string
	redaction                       redactOptions // built
	callTimeout, grace, killAfter   time.Duration
	capture                         string // stdio.Config.Capture
	maxFrame                        int64
	serverName                      string
	record                          recordIdentity
	exe                             string
	args                            []string
	clientIn                        io.Reader
	clientOut                       io.Writer
	serverErr                       io.Writer
	signer                          sign.Signer // preloaded (demo); else loaded from key
	keys                            keyOptions
	env                             []string // the server's environment (nil: inherit)
	// dropEmpty removes the bundle of a start that never received a byte
	// from the client (a launcher's probe): it holds no evidence.
	dropEmpty bool
	announce  bool // print the bundle's path on stderr once it is created
	// checkpoint: sign checkpoints as the session goes (checkpoint.go)
	checkpoint checkpointEvery
	anchor     anchorOptions // anchor.go
	live       *liveOTLP     // live spans (live.go), or nil
	policy     policyOptions // loaded
}

// sessionSummary is the one line printed when a session ends.
type sessionSummary struct {
	bundle     string
	sealed     *producer.Sealed
	oversize   int64
	refused    int64
	unreadable int64
	status     string
	signed     bool
	res        *producer.SessionResult
	dropped    bool // nothing arrived from the client: the bundle was removed
}

func (s *sessionSummary) String() string {
	if s.dropped {
		return fmt.Sprintf("no client frame arrived (server %s): nothing recorded; bundle %s removed", s.status, s.bundle)
	}
	if s.sealed == nil {
		return fmt.Sprintf("bundle %s not sealed (server %s); run 'tracectl seal --recover --bundle %s'", s.bundle, s.status, s.bundle)
	}
	c := s.sealed.Seal
	sig := "signed"
	if !s.signed {
		sig = "unsigned (sign later with 'tracectl seal --bundle " + s.bundle + " --key KEY')"
	}
	extra := ""
	if s.refused > 0 {
		extra = fmt.Sprintf(", %d client frames refused by the gate (recorded, not forwarded)", s.refused)
	}
	if s.oversize > 0 {
		extra += fmt.Sprintf(", %d frames over 64 MiB (committed by digest; server frames delivered)", s.oversize)
	}
	if s.unreadable > 0 {
		extra += fmt.Sprintf(", %d tools/list requests not readable (forwarded, in no snapshot)", s.unreadable)
	}
	if c.Denied > 0 {
		extra = fmt.Sprintf(", %d denied by policy (not forwarded)", c.Denied) + extra
	}
	if s.res != nil && s.res.ClientGone {
		extra += ", client gone before the end (later frames recorded, not delivered)"
	}
	return fmt.Sprintf("%d attempts: %d responses, %d transport failures, %d unknown%s; server %s; bundle %s %s",
		c.Attempts, c.Responses, c.TransportFailures, c.Unknown, extra, s.status, s.bundle, sig)
}

// fileDigest is sha256:<hex> of a file's bytes.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// selfDigest is the digest of the running tracectl executable: the
// record's runtime.measurement and build_provenance.digest (spec/signing.md).
func selfDigest() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return fileDigest(exe)
}

// trustRecordSigner builds and signs the Trust Record for a sealed transcript.
type trustRecordSigner struct {
	signer   sign.Signer
	identity recordIdentity
	now      func() time.Time
	// transcriptURI is tool_transcript.transcript_uri (anchoring sets
	// urn:uuid:<execution scope>, so a log entry names its session).
	transcriptURI string
	// digest, when set, is the executable's digest computed once (an
	// anchored session signs more records than the seal's).
	digest string
}

func (t trustRecordSigner) SignTranscript(ctx context.Context, root string, calls int64) ([]byte, error) {
	digest := t.digest
	if digest == "" {
		var err error
		if digest, err = selfDigest(); err != nil {
			return nil, fmt.Errorf("digest of the tracectl executable: %w", err)
		}
	}
	return sign.TranscriptSigner{Key: t.signer, Now: t.now, Record: sign.RecordOptions{
		Digest: digest, TranscriptURI: t.transcriptURI,
		Subject: t.identity.subject, ModelProvider: t.identity.modelProvider, ModelID: t.identity.modelID, DataClass: t.identity.dataClass,
	}}.SignTranscript(ctx, root, calls)
}

func recordSession(ctx context.Context, s streams, o sessionOptions) (*sessionSummary, error) {
	signer := o.signer
	if signer == nil && (o.key != "" || o.keys.signer != "") {
		var err error
		if signer, err = loadSigningKey(ctx, o.key, o.keys); err != nil {
			return nil, err
		}
	}
	var ac *submit.Client // the log key is read before the bundle is created
	if o.anchor.set() {
		if err := o.anchor.checkSigner(signer); err != nil {
			return nil, err
		}
		var err error
		if ac, err = o.anchor.client(); err != nil {
			return nil, err
		}
	}
	server, err := producer.StdioServer(producer.OS, o.exe, o.args, o.serverName)
	if err != nil {
		return nil, usageErr(err, "server arguments must be valid UTF-8; --server-name at most 256 bytes")
	}
	wd, _ := os.Getwd()
	started := launch.Describe(producer.OS, o.exe, o.args, launch.Env{Dir: wd, Getenv: os.Getenv})
	if started != nil && launchRecordable(started) {
		server.Launch = started // committed in the header, bound into every attempt's server digest
	}
	prod := transcript.Producer{Name: "tracectl", Version: version()}
	if signer != nil {
		if prod.KeyThumbprint, err = sign.Thumbprint(signer.Public()); err != nil {
			return nil, usageErr(err, "")
		}
	}
	ropts := producer.Options{
		Clock: time.Now, Entropy: rand.Reader, FS: producer.OS,
		Durability: o.durability, Retention: o.retain, Producer: prod,
		Redact: o.redaction.rules, NoRedaction: o.redaction.off,
		Server:          server,
		Limits:          producer.Limits{MaxFrameBytes: o.maxFrame, CallTimeout: o.callTimeout},
		FramesCommitted: true,
		PolicyFile:      o.policy.policy, LockFile: o.policy.lock, PolicyMode: o.policy.mode, ToolUseMeta: o.policy.correlationMeta,
		ApproveCommand: o.policy.approve.argv, ApproveTimeout: o.policy.approve.timeout, ApproveElicit: o.policy.approve.elicit,
	}
	untap := o.live.tap(&ropts)
	rec, err := producer.Open(o.bundle, ropts)
	if err != nil {
		untap()
		return nil, usageErr(fmt.Errorf("open bundle: %w", err), "")
	}
	defer untap() // after the seal or close below: the follower sends the session's span
	var sa *sessionAnchor
	if o.anchor.set() {
		if sa, err = startAnchoring(ctx, rec, o.anchor, ac, signer, o.record, o.checkpoint, s.err); err != nil {
			rec.Close()
			return nil, err
		}
		defer sa.close()
	} else if err := startCheckpoints(rec, o.checkpoint, signer, o.record, s.err); err != nil {
		rec.Close()
		return nil, err
	}
	if o.announce {
		fmt.Fprintf(s.err, "tracectl: recording to %s\n", escapeTerminal(o.bundle))
		if started != nil {
			fmt.Fprintf(s.err, "tracectl: server launched: %s\n", escapeTerminal(launchString(started)))
		}
	}
	serverErr := o.serverErr
	if serverErr == nil {
		serverErr = s.err
	}
	grace := o.grace
	if grace == 0 {
		grace = -1 // --grace 0: none (the library's zero is its default)
	}
	res, runErr := stdio.Run(ctx, stdio.Config{
		Command: o.exe, Args: o.args, Env: o.env,
		ClientIn: o.clientIn, ClientOut: o.clientOut, ServerErr: serverErr,
		Recorder: rec, Capture: o.capture, CallTimeout: o.callTimeout, Grace: grace, KillAfter: o.killAfter,
		MaxRetain: o.maxFrame, SpoolDir: filepath.Dir(o.bundle),
	})
	sum := &sessionSummary{bundle: o.bundle}
	if res != nil {
		sum.status = res.ExitStatus
		sum.res = res
		sum.oversize, sum.refused, sum.unreadable = res.OversizedFrames, res.RefusedFrames, res.UnreadableListRequests
	}
	// An anchored session is never dropped: its first checkpoint is in
	// the log, and audit would find its bundle missing.
	if o.dropEmpty && sa == nil && res != nil && res.ClientBytes == 0 && runErr == nil {
		if err := rec.Close(); err != nil {
			return sum, err
		}
		if err := os.RemoveAll(o.bundle); err != nil {
			return sum, fmt.Errorf("remove the empty bundle: %w", err)
		}
		sum.dropped = true
		return sum, nil
	}
	var rs producer.RecordSigner
	if signer != nil {
		rs = trustRecordSigner{signer: signer, identity: o.record, now: time.Now}
	}
	if sa != nil {
		rs = sa
	}
	sealed, sealErr := rec.Seal(context.WithoutCancel(ctx), rs)
	sum.sealed = sealed
	sum.signed = sealed != nil && sealed.Signed
	if err := errors.Join(runErr, sealErr); err != nil {
		return sum, err
	}
	return sum, nil
}

// launchString is the one-line form of what a launcher started.
func launchString(l *transcript.Launch) string {
	var b strings.Builder
	b.WriteString(l.Launcher)
	if l.Package != "" {
		b.WriteString(" package " + l.Package)
		if l.Version != "" {
			b.WriteString(" (version " + l.Version + " in the launcher's cache)")
		}
	}
	if l.Script != "" {
		b.WriteString(" script " + l.Script)
		if l.ScriptSHA256 != "" {
			b.WriteString(" " + l.ScriptSHA256)
		}
	}
	if l.Image != "" {
		b.WriteString(" image " + l.Image)
	}
	return b.String()
}

// launchRecordable: a launch the header can hold (valid UTF-8 within the
// transcript's bounds); anything else is only printed.
func launchRecordable(l *transcript.Launch) bool {
	for _, v := range []string{l.Package, l.Script, l.Image} {
		if len(v) > transcript.MaxPathBytes || !utf8.ValidString(v) {
			return false
		}
	}
	return len(l.Version) <= transcript.MaxReportedBytes && utf8.ValidString(l.Version)
}
