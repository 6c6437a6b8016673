package producer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// FuzzAttemptLine: whatever request line a client sends, the recorder
// either refuses it (ErrNotToolCall) or the attempt line it would write is
// a valid transcript line. Seed corpus: testdata/fuzz/FuzzAttemptLine.
func FuzzAttemptLine(f *testing.F) {
	for _, l := range [][]byte{
		call("1", "echo", `{"a":1}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","dev.tracectl/correlationId":"x"}`),
		call("", "t", `{"f":1.5}`, `{"dev.tracectl/retryOf":"\u0000"}`),
		[]byte(`{"id":9007199254740993,"method":"tools/call","params":{"name":7,"arguments":{"a":1,"a":2},"_meta":[]}}`),
		[]byte(`{"id":{"x":[1,2]},"method":"tools/call","params":{"name":"t","requestState":"s","_meta":{"tracestate":"a=b,a=c"}}}` + "\r\n"),
	} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		body, term := splitTerminator(line)
		q, err := parseRequest(body, nil)
		if err != nil {
			return
		}
		r := newRecorder("x", Options{Clock: testOptions(t).Clock}, "scope-1", canon.SHA256(nil))
		for _, era := range []string{transcript.EraUnknown, transcript.EraLegacy} {
			r.era, r.legacyVer = era, "2025-11-25"
			a := &transcript.Attempt{
				Type: transcript.TypeAttempt, Seq: 1, AtMs: 1, ExecutionScope: "scope-1", AttemptID: "a1",
				Tool: q.tool, ToolInvalid: q.toolBad, ArgsDigest: q.argsDigest, ArgsUnsupport: q.argsBad,
				RPCID: q.id, Protocol: r.protocolOf(q), ServerDigest: canon.SHA256(nil),
				Request:    transcript.Payload{Digest: canon.SHA256(body), Length: int64(len(body)), Retained: true},
				Terminator: term, Snapshot: transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot}, Correlation: q.corr,
			}
			b, err := transcript.Encode(a)
			if err != nil {
				t.Fatalf("encode the attempt for %q: %v", line, err)
			}
			if _, err := transcript.DecodeLine(b); err != nil {
				t.Fatalf("the attempt line for %q is invalid: %v\n%s", line, err, b)
			}
		}
	})
}

// FuzzSpool: settling any spool, however damaged, writes only blobs whose
// bytes hash to their name. Seed corpus: testdata/fuzz/FuzzSpool.
func FuzzSpool(f *testing.F) {
	good := []byte("payload")
	d := canon.SHA256(good)[len("sha256:"):]
	f.Add([]byte(d + " 7\npayload\n"))
	f.Add([]byte(d + " 7\npayload\n" + d + " 7\npay"))
	f.Add([]byte(d + " 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, spool []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
			t.Fatal(err)
		}
		s := newBlobStore(OSFS{}, dir)
		if err := os.WriteFile(s.spool, spool, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.settle(false); err != nil {
			t.Fatal(err)
		}
		ents, err := os.ReadDir(s.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
			if err != nil || canon.SHA256(b) != "sha256:"+e.Name() {
				t.Fatalf("blob %s does not hold the bytes its name says (%v)", e.Name(), err)
			}
		}
	})
}
