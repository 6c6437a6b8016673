package inspect_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

type zeroEntropy struct{}

func (zeroEntropy) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(10 * time.Millisecond)
	return c.t
}

var t0 = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

// record writes a bundle through the producer: each call of do gets the
// recorder and a request maker.
func record(t testing.TB, retention string, do func(r *producer.Recorder, req func(id int, tool, args string) producer.Call)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run.trace")
	c := &stepClock{t: t0}
	r, err := producer.Open(dir, producer.Options{Clock: c.now, Entropy: zeroEntropy{}, Retention: retention,
		Producer: transcript.Producer{Name: "inspect-test", Version: "1"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess, Name: "srv"}})
	if err != nil {
		t.Fatal(err)
	}
	do(r, func(id int, tool, args string) producer.Call {
		return producer.Call{Line: fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", id, tool, args)}
	})
	if _, err := r.Seal(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func resp(id int, body string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,%s}`+"\n", id, body)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// outcomesBundle records one attempt per outcome the model distinguishes.
func outcomesBundle(t testing.TB, retention string) string {
	ctx := context.Background()
	return record(t, retention, func(r *producer.Recorder, req func(int, string, string) producer.Call) {
		h, err := r.Attempt(ctx, req(1, "ok", `{"x":1}`))
		must(t, err)
		must(t, h.Response(resp(1, `"result":{"content":[]}`)))
		h, err = r.Attempt(ctx, req(2, "toolerr", `{}`))
		must(t, err)
		must(t, h.Response(resp(2, `"result":{"content":[],"isError":true}`)))
		h, err = r.Attempt(ctx, req(3, "rpcerr", `{}`))
		must(t, err)
		must(t, h.Response(resp(3, `"error":{"code":-32601,"message":"no"}`)))
		h, err = r.Attempt(ctx, req(4, "broken", `{}`))
		must(t, err)
		must(t, h.TransportFailure("pipe closed"))
		slow, err := r.Attempt(ctx, req(5, "slow", `{"n":1}`))
		must(t, err)
		must(t, slow.Timeout())
		retry, err := r.Retry(ctx, slow, transcript.BasisCallerDeclared, req(6, "slow", `{"n":1}`))
		must(t, err)
		must(t, slow.LateResponse(resp(5, `"result":{"content":[]}`)))
		must(t, retry.Response(resp(6, `"result":{"content":[]}`)))
		h, err = r.Attempt(ctx, req(7, "cancelled", `{}`))
		must(t, err)
		must(t, h.CancelSent())
		_, err = r.Attempt(ctx, req(8, "inflight", `{}`))
		must(t, err)
		h, err = r.Attempt(ctx, req(9, "lost", `{}`))
		must(t, err)
		must(t, h.Timeout())
		must(t, h.TransportFailure("server exited"))
	})
}

func TestOutcomes(t *testing.T) {
	dir := outcomesBundle(t, transcript.RetainFull)
	b, err := inspect.Load(context.Background(), verify.DirFS(dir), inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, kind, label, class string }{
		{"a1", inspect.OutcomeResult, "result", inspect.ClassResponse},
		{"a2", inspect.OutcomeToolError, "isError", inspect.ClassResponse},
		{"a3", inspect.OutcomeJSONRPCError, "error -32601", inspect.ClassResponse},
		{"a4", inspect.OutcomeTransportFailure, "transport failure", inspect.ClassTransportFailure},
		{"a5", inspect.OutcomeTimeout, "late result (after timeout)", inspect.ClassResponse},
		{"a6", inspect.OutcomeResult, "result", inspect.ClassResponse},
		{"a7", inspect.OutcomeCancelled, "unknown (cancelled)", inspect.ClassUnknown},
		{"a8", inspect.OutcomeUnknown, "unknown (sealed_in_flight)", inspect.ClassUnknown},
		{"a9", inspect.OutcomeTransportFailure, "transport failure (after timeout)", inspect.ClassTransportFailure},
	}
	if len(b.Attempts) != len(want) {
		t.Fatalf("%d attempts, want %d", len(b.Attempts), len(want))
	}
	for i, w := range want {
		a := b.Attempts[i]
		if a.AttemptID != w.id || a.Outcome.Kind != w.kind || a.Outcome.Label() != w.label || a.Outcome.Class() != w.class {
			t.Errorf("attempt %d: %s %s %q %s, want %s %s %q %s", i, a.AttemptID, a.Outcome.Kind, a.Outcome.Label(), a.Outcome.Class(), w.id, w.kind, w.label, w.class)
		}
		if a.EndMs <= a.AtMs {
			t.Errorf("%s: end %d not after start %d", a.AttemptID, a.EndMs, a.AtMs)
		}
	}
	if got := b.Attempt("a5").RetriedBy; len(got) != 1 || got[0] != "a6" {
		t.Errorf("a5 retried by %v, want [a6]", got)
	}
	if a := b.Attempt("a6"); a.RetryOf != "a5" || a.RetryBasis != transcript.BasisCallerDeclared {
		t.Errorf("a6 retry %q %q", a.RetryOf, a.RetryBasis)
	}
	if code := b.Attempt("a3").Outcome.ErrorCode; code == nil || *code != -32601 {
		t.Errorf("a3 error code %v", code)
	}
	if b.Seal == nil || b.Seal.Attempts != 9 {
		t.Fatalf("seal %+v", b.Seal)
	}
	// The one count model: the seal line's counts are the classes'.
	n := map[string]int64{}
	for _, a := range b.Attempts {
		n[a.Outcome.Class()]++
	}
	if s := b.Seal; s.Responses != n[inspect.ClassResponse] || s.TransportFailures != n[inspect.ClassTransportFailure] || s.Unknown != n[inspect.ClassUnknown] {
		t.Errorf("seal counts %d/%d/%d, classes %v", s.Responses, s.TransportFailures, s.Unknown, n)
	}

	// The line digest is the SHA-256 of the attempt line's exact bytes.
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	a1 := b.Attempt("a1")
	sum := sha256.Sum256(lines[a1.Seq])
	if a1.LineDigest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("a1 line digest %s does not hash line %d", a1.LineDigest, a1.Seq)
	}

	// Records carry the payloads only on request.
	recs := b.Records()
	if recs[0].Arguments != nil {
		t.Error("arguments exported without WithPayloads")
	}
	b.WithPayloads(verify.DirFS(dir), &recs[0])
	b.WithPayloads(verify.DirFS(dir), &recs[2])
	if string(recs[0].Arguments) != `{"x":1}` || string(recs[0].Result) != `{"content":[]}` {
		t.Errorf("a1 payloads %s %s (%s)", recs[0].Arguments, recs[0].Result, recs[0].PayloadProblem)
	}
	if string(recs[2].Result) != `{"code":-32601,"message":"no"}` {
		t.Errorf("a3 error object %s", recs[2].Result)
	}
	if recs[4].End == "" || *recs[4].DurationMs != 10 || recs[4].LateResponse != inspect.OutcomeResult {
		t.Errorf("a5 record %+v", recs[4])
	}
}

func TestDigestRetention(t *testing.T) {
	dir := outcomesBundle(t, transcript.RetainDigest)
	b, err := inspect.Load(context.Background(), verify.DirFS(dir), inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := b.Records()
	b.WithPayloads(verify.DirFS(dir), &recs[0])
	if recs[0].Arguments != nil || !strings.Contains(recs[0].PayloadProblem, inspect.ErrUnavailable.Error()) {
		t.Errorf("digest-only: arguments %s, problem %q", recs[0].Arguments, recs[0].PayloadProblem)
	}
}

func TestPayloadBytes(t *testing.T) {
	dir := outcomesBundle(t, transcript.RetainFull)
	fsys := verify.DirFS(dir)
	b, err := inspect.Load(context.Background(), fsys, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := b.Attempt("a1").Request
	got, err := inspect.PayloadBytes(fsys, p.Digest, p.Length)
	if err != nil || int64(len(got)) != p.Length || !bytes.HasPrefix(got, []byte(`{"jsonrpc":"2.0","id":1,`)) {
		t.Fatalf("PayloadBytes = %q, %v", got, err)
	}
	if _, err := inspect.PayloadBytes(fsys, p.Digest, p.Length-1); !errors.Is(err, inspect.ErrTooLarge) {
		t.Errorf("limit-1: %v, want ErrTooLarge", err)
	}
	// One byte of the request's entry changed in the pack (a copy of the
	// bundle): the bytes no longer open the commitment.
	tampered := t.TempDir()
	for _, name := range []string{transcript.TranscriptFile, transcript.PackFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == transcript.PackFile {
			i := bytes.Index(data, got)
			if i < 0 {
				t.Fatal("the request's bytes are not in the pack")
			}
			data[i+len(got)-2] ^= 1
		}
		if err := os.WriteFile(filepath.Join(tampered, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := inspect.PayloadBytes(verify.DirFS(tampered), p.Digest, p.Length); !errors.Is(err, inspect.ErrMismatch) {
		t.Errorf("changed bytes: %v, want ErrMismatch", err)
	}
	if _, err := inspect.PayloadBytes(fsys, "sha256:"+strings.Repeat("0", 64), 10); !errors.Is(err, inspect.ErrUnavailable) {
		t.Errorf("absent: %v, want ErrUnavailable", err)
	}
	if _, err := inspect.PayloadBytes(fsys, "sha256:../../etc/passwd", 10); !errors.Is(err, inspect.ErrUnavailable) {
		t.Errorf("malformed digest: %v, want ErrUnavailable", err)
	}
}

// TestTornTranscript: a transcript that stops in a torn line gives the
// model of the lines before it, and says why.
func TestTornTranscript(t *testing.T) {
	dir := outcomesBundle(t, transcript.RetainFull)
	path := filepath.Join(dir, transcript.TranscriptFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.LastIndexByte(data[:len(data)-1], '\n')
	torn := append(data[:cut+1:cut+1], `{"type":"seal"`...)
	b, err := inspect.Load(context.Background(), memFS{transcript.TranscriptFile: torn}, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Seal != nil || !strings.Contains(b.Problem, transcript.CodeTornLine) || len(b.Attempts) != 9 {
		t.Errorf("seal %v, problem %q, %d attempts", b.Seal, b.Problem, len(b.Attempts))
	}
	if _, err := inspect.Load(context.Background(), memFS{transcript.TranscriptFile: []byte("not json\n")}, inspect.Options{}); err == nil {
		t.Error("a transcript without a header loaded")
	}
	if _, err := inspect.Load(context.Background(), memFS{}, inspect.Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no transcript: %v", err)
	}
}

// memFS is an in-memory file system of whole files.
type memFS map[string][]byte

type memFile struct {
	*bytes.Reader
	name string
}

func (m memFile) Stat() (fs.FileInfo, error) { return nil, errors.New("no stat") }
func (m memFile) Close() error               { return nil }

func (m memFS) Open(name string) (fs.File, error) {
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return memFile{Reader: bytes.NewReader(b), name: name}, nil
}

var _ io.Reader = memFile{}

// TestVerified: with a Verifier the model carries verify's Report.
func TestVerified(t *testing.T) {
	dir := outcomesBundle(t, transcript.RetainFull)
	v, err := verify.New(verify.Options{AllowEmbeddedKey: true, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	// No record.json (sealed without a signer): the verifier cannot read
	// one, and Load says so rather than showing an unverified model.
	if _, err := inspect.Load(context.Background(), verify.DirFS(dir), inspect.Options{Verifier: v}); err == nil {
		t.Error("a bundle without a record loaded as verified")
	}
}
