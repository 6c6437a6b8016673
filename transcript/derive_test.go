package transcript_test

import (
	"testing"

	"github.com/tracectl/tracectl/transcript"
)

// FuzzDerive: the derivations never panic, and what they derive is what the
// format can hold (a tool or why not, never both; one of digest and
// unsupported; a version iff present; an id's text or digest).
func FuzzDerive(f *testing.F) {
	f.Add([]byte(`{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"x":1},"name":"t"}}`))
	f.Add([]byte(`{"id":1,"id":2,"method":"tools/call"}`))
	f.Add([]byte(`{"id":"x","result":{"isError":true,"resultType":"input_required"}}`))
	f.Add([]byte(`{"error":{"code":-32602},"id":null}`))
	f.Add([]byte(`{"method":"notifications/cancelled","params":{"requestId":7}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if q, err := transcript.DeriveRequest(body); err == nil {
			if q.Tool != "" && q.ToolInvalid != "" {
				t.Errorf("tool %q with tool_invalid %q", q.Tool, q.ToolInvalid)
			}
			if q.ToolInvalid == "" && len(q.Tool) > 1024 {
				t.Errorf("tool of %d bytes", len(q.Tool))
			}
			if q.ArgsDigest != "" && q.ArgsUnsupported != "" {
				t.Error("arguments digest and unsupported both set")
			}
			if (q.ProtoState == transcript.ProtoPresent) != (q.ProtoVersion != "") {
				t.Errorf("protocol state %s with version %q", q.ProtoState, q.ProtoVersion)
			}
			if q.RPCID.Present && (q.RPCID.Text == "") == (q.RPCID.Digest == "") {
				t.Errorf("id %+v", q.RPCID)
			}
		}
		r := transcript.DeriveResponse(body)
		if r.ErrorCode != nil && r.ResultType != transcript.ResultTypeError || len(r.ResultType) > transcript.MaxReportedBytes {
			t.Errorf("response facts %+v", r)
		}
		transcript.DeriveNotification(body)
	})
}
