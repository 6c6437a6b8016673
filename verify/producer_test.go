package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// The producer is used here only to make real bundles on disk, the way
// tracectl wrap and Go runtimes make them; package verify never imports it.

// recordSigner signs sealed transcripts (producer.RecordSigner).
type recordSigner struct {
	key sign.Signer
	at  time.Time
}

func (s recordSigner) SignTranscript(_ context.Context, root string, calls int64) ([]byte, error) {
	rec, err := sign.Build(sign.RecordOptions{IssuedAt: s.at, Key: s.key.Public(), Digest: canon.SHA256([]byte("verify tests")), TranscriptHash: root, CallCount: calls})
	if err != nil {
		return nil, err
	}
	return sign.Sign(rec, s.key)
}

type counterEntropy struct{ n byte }

func (c *counterEntropy) Read(p []byte) (int, error) {
	for i := range p {
		c.n++
		p[i] = c.n
	}
	return len(p), nil
}

// clock returns a clock that ticks one millisecond per reading.
func clock(start time.Time) func() time.Time {
	t := start
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func openRecorder(t testing.TB, dir, durability string) *producer.Recorder {
	t.Helper()
	r, err := producer.Open(dir, producer.Options{
		Clock: clock(verifytest.Issued.Add(-time.Hour)), Entropy: &counterEntropy{}, Durability: durability,
		Producer: transcript.Producer{Name: "verify-test", Version: "0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess, Name: "test-server"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recordSnapshot collects n tools and records the snapshot.
func recordSnapshot(t testing.TB, r *producer.Recorder, n, perPage int) {
	t.Helper()
	s := verifytest.Collect(t, "cap-1", n, perPage)
	blobs := make([][]byte, 0, 2*len(s.Pages))
	for _, p := range s.Pages {
		blobs = append(blobs, p.Request, p.Response)
	}
	m := s.Manifest
	if _, err := r.RecordSnapshot(producer.Snapshot{Manifest: s.Bytes, Digest: s.Digest, Complete: m.Complete, IncompleteReason: m.IncompleteReason(),
		Tools: int64(len(m.Tools)), Pages: int64(len(m.Pages)), Reuse: m.Cache.Provenance == snapshot.ProvenanceReused, Blobs: blobs}); err != nil {
		t.Fatal(err)
	}
}

func call(id int, tool string, args string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", id, tool, args)
}

func answer(id int, text string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`+"\n", id, text)
}

// TestProducerBundle verifies a bundle written by the producer: every kind
// of outcome, a caller-declared retry, a late response, sealed and signed.
func TestProducerBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	r := openRecorder(t, dir, transcript.DurabilityStrict)
	ctx := context.Background()
	recordSnapshot(t, r, 12, 5)
	h1, err := r.Attempt(ctx, producer.Call{Line: call(1, "tool_1", `{"x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h1.Response(answer(1, "one")); err != nil {
		t.Fatal(err)
	}
	h2, err := r.Attempt(ctx, producer.Call{Line: call(2, "tool_2", `{"x":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Timeout(); err != nil {
		t.Fatal(err)
	}
	h3, err := r.Retry(ctx, h2, transcript.BasisCallerDeclared, producer.Call{Line: call(3, "tool_2", `{"x":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h3.Response(answer(3, "two")); err != nil {
		t.Fatal(err)
	}
	if err := h2.LateResponse(answer(2, "two, late")); err != nil {
		t.Fatal(err)
	}
	h4, err := r.Attempt(ctx, producer.Call{Line: call(4, "tool_3", `{"x":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h4.TransportFailure("server exited"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Attempt(ctx, producer.Call{Line: call(5, "tool_4", `{"x":4}`)}); err != nil { // in flight at seal
		t.Fatal(err)
	}
	sealed, err := r.Seal(ctx, recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued})
	if err != nil {
		t.Fatal(err)
	}

	rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Verified || len(codes) != 0 {
		t.Fatalf("verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
	}
	s := sealed.Seal
	if got, want := rep.Counts, (verify.Counts{Lines: sealed.Lines, Attempts: s.Attempts, Responses: s.Responses, TransportFailures: s.TransportFailures,
		Unknown: s.Unknown, Snapshots: 1, Payloads: rep.Counts.Payloads}); got != want {
		t.Errorf("counts %+v, the seal says %+v", got, want)
	}
	if rep.Root != sealed.Root {
		t.Errorf("root %s, sealed %s", rep.Root, sealed.Root)
	}
	var unknown []string
	for _, f := range rep.Find(verify.CodeOutcomeUnknown) {
		unknown = append(unknown, f.Subject)
	}
	// h2 has a late response; h4 failed in transport; h5 was in flight.
	if want := []string{"attempt " + h4.ID(), "attempt a5"}; !slices.Equal(unknown, want) {
		t.Errorf("outcome_unknown for %v, want %v\n%s", unknown, want, dump(rep))
	}

	// One byte in the transcript on disk.
	tr := filepath.Join(dir, transcript.TranscriptFile)
	data, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"tool":"tool_3"`)) + len(`"tool":"tool_`)
	if err := os.WriteFile(tr, slices.Concat(data[:i], []byte("9"), data[i+1:]), 0o600); err != nil {
		t.Fatal(err)
	}
	// The line is no longer the one signed, and its claim no longer
	// matches the retained request bytes: both are reported.
	rep, codes = verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Failed || !slices.Equal(codes, []verify.Code{verify.CodeBindingFailure, verify.CodeEvidenceMismatch}) {
		t.Fatalf("after tampering: verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
}

// TestProducerRecovered verifies a bundle recovered after a crash: a torn
// last line quarantined, the attempt in flight resolved unknown.
func TestProducerRecovered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	r := openRecorder(t, dir, transcript.DurabilityStrict)
	recordSnapshot(t, r, 3, 3)
	if _, err := r.Attempt(context.Background(), producer.Call{Line: call(1, "tool_1", `{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, transcript.TranscriptFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"at_ms":17829`) // a write cut short
	f.Close()
	r, err = producer.Recover(dir, producer.Options{Clock: clock(verifytest.Issued.Add(-time.Minute)), Entropy: &counterEntropy{},
		Producer: transcript.Producer{Name: "verify-test"}, Server: transcript.Server{Transport: transcript.TransportInProcess}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seal(context.Background(), recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Verified || len(codes) != 0 || !rep.Has(verify.CodeRecoveryRecorded) {
		t.Fatalf("verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
	}
	unk := rep.Find(verify.CodeOutcomeUnknown)
	if len(unk) != 1 || !strings.Contains(unk[0].Detail, "resolved as unknown") {
		t.Errorf("outcome_unknown %+v", unk)
	}
}
