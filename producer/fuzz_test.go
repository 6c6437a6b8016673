package producer

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
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
		q, _, err := parseRequest(body, nil)
		if err != nil {
			return
		}
		r := newRecorder("x", Options{Clock: testOptions(t).Clock}, "scope-1", canon.SHA256(nil))
		for _, era := range []mcpwire.Era{mcpwire.EraUnknown, mcpwire.EraLegacy} {
			r.proto.era, r.proto.legacyVer = era, "2025-11-25"
			a := &transcript.Attempt{
				Seq: 1, AtMs: 1, ExecutionScope: "scope-1", AttemptID: "a1",
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

// FuzzPack: any byte string, however damaged, is read by ScanPack as
// whole entries up to a named problem, never past it: the entries it
// returns tile the pack from byte 0 to the end it reports, and reopening a
// bundle with that pack either refuses it (ErrCorrupt, ErrNeedsRecovery) or
// keeps exactly those entries. Seed corpus: testdata/fuzz/FuzzPack.
func FuzzPack(f *testing.F) {
	good := []byte("payload")
	d := canon.SHA256(good)[len("sha256:"):]
	f.Add([]byte(d + " 7\npayload\n"))
	f.Add([]byte(d + " 7\npayload\n" + d + " 7\npay"))
	f.Add([]byte(d + " 99999999999999999999\n"))
	f.Add([]byte(d + " 07\npayload\n"))
	f.Add([]byte(d + " 7 00112233445566778899aabbccddeeff\npayload\n"))
	f.Add([]byte(d + " 7 0011\npayload\n"))
	f.Fuzz(func(t *testing.T, pack []byte) {
		var next int64
		end, err := transcript.ScanPack(bytes.NewReader(pack), func(e transcript.PackEntry, _ io.Reader) error {
			if e.Offset != next {
				t.Fatalf("entry at %d, want %d", e.Offset, next)
			}
			if want := int64(len(transcript.AppendPackHeader(nil, e.Digest, e.Length, e.Salt))); e.Header != want {
				t.Fatalf("entry at %d: header of %d bytes, its fields make %d", e.Offset, e.Header, want)
			}
			next = e.Offset + e.Header + e.Length + 1
			return nil
		})
		var p *transcript.PackProblem
		switch {
		case err == nil && end != int64(len(pack)):
			t.Fatalf("no problem reported, but the entries end at %d of %d", end, len(pack))
		case err != nil && !errors.As(err, &p):
			t.Fatalf("ScanPack = %v, not a PackProblem", err)
		case p != nil && p.Offset != end:
			t.Fatalf("problem at %d, entries end at %d", p.Offset, end)
		}
		if end > int64(len(pack)) || (err == nil && next != end) {
			t.Fatalf("end %d, last entry ends at %d, pack %d bytes", end, next, len(pack))
		}
		ix, err := transcript.IndexPack(bytes.NewReader(pack), 0)
		if err != nil || ix.End != end {
			t.Fatalf("IndexPack: end %v, %v; ScanPack end %d", ix, err, end)
		}
	})
}
