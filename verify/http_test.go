package verify_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// httpBundle records a Streamable HTTP bundle whose one client frame is a
// tools/call committed refused; with refusedLine the HTTP refusal that
// explains it comes first.
func httpBundle(t *testing.T, transport string, refusedLine bool) *verify.Report {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "http.trace")
	srv := transcript.Server{Transport: transport, URL: "https://mcp.example/mcp"}
	if transport == transcript.TransportStdio {
		srv = transcript.Server{Transport: transport, Name: "stdio"}
	}
	r, err := producer.Open(dir, producer.Options{
		Clock: clock(verifytest.Issued.Add(-time.Hour)), Entropy: &counterEntropy{}, Durability: transcript.DurabilityNone,
		Producer: transcript.Producer{Name: "verify-test", Version: "0"}, Server: srv, FramesCommitted: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	line := call(1, "rm", `{}`)
	m, ref := mcpwire.Read(line)
	if ref != nil {
		t.Fatal(ref)
	}
	zero := int64(0)
	if err := r.RecordHTTP(transcript.HTTPEvent{Event: transcript.HTTPRequest, Exchange: 1, Method: "POST", Path: "/mcp", Frame: &zero, Credentials: []string{"authorization"}}); err != nil {
		t.Fatal(err)
	}
	if refusedLine {
		if err := r.RecordHTTP(transcript.HTTPEvent{Event: transcript.HTTPRefused, Exchange: 1, Frame: &zero, Rule: transcript.RuleHeaderMismatch, Detail: "mcp-name disagrees"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.RecordFrame(producer.FrameRecord{Line: line, Message: m, Direction: transcript.ClientToServer, Index: 0, Disposition: transcript.FrameRefused}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seal(context.Background(), recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: verifytest.Key(t, 1).Public(), At: verifytest.At})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := v.Bundle(context.Background(), os.DirFS(dir))
	if rep == nil {
		t.Fatal("no report")
	}
	return rep
}

// TestHTTPHeaderRefusal: a tools/call committed refused is accepted right
// after the HTTP line that refused its headers (and reported as refused),
// and is frame_misrecorded without it: a call the gate read is otherwise
// committed by an attempt line.
func TestHTTPHeaderRefusal(t *testing.T) {
	rep := httpBundle(t, transcript.TransportHTTP, true)
	if rep.Verdict != verify.Verified || len(rep.Find(verify.CodeFramesRefused)) == 0 {
		t.Fatalf("verdict %s, refused findings %d; want verified with the refusal reported", rep.Verdict, len(rep.Find(verify.CodeFramesRefused)))
	}
	found := false
	for _, f := range rep.Find(verify.CodeProducerObservation) {
		found = found || strings.Contains(f.Detail, "credential headers")
	}
	if !found {
		t.Error("the presence of credential headers is not reported")
	}
	rep = httpBundle(t, transcript.TransportHTTP, false)
	if rep.Verdict != verify.Failed || len(rep.Find(verify.CodeFrameMisrecorded)) == 0 {
		t.Fatalf("without the refusal line: verdict %s, want failed with frame_misrecorded", rep.Verdict)
	}
}

// TestHTTPLineInStdioBundle: http lines belong to Streamable HTTP
// transcripts only.
func TestHTTPLineInStdioBundle(t *testing.T) {
	rep := httpBundle(t, transcript.TransportStdio, true)
	if rep.Verdict != verify.Failed || len(rep.Find(verify.CodeTranscriptMalformed)) == 0 {
		t.Fatalf("verdict %s, want failed with transcript_malformed", rep.Verdict)
	}
}
