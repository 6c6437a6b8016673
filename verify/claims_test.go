package verify_test

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

const (
	claimReq  = `{"id":"r-1","jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"dev.tracectl/correlationId":"order-7","io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"x":1},"name":"tool_1"}}`
	claimResp = `{"id":"r-1","jsonrpc":"2.0","result":{"content":[{"text":"no","type":"text"}],"isError":true}}`
	claimErr  = `{"error":{"code":-32602,"message":"bad"},"id":"r-1","jsonrpc":"2.0"}`
)

// claimBundle records one attempt with its request bytes and one response,
// each line's claims derived from the bytes as the producer derives them
// and then changed by amod and omod, and signs the result: the record is
// valid, only the claims can disagree with the bytes.
func claimBundle(t *testing.T, req, resp string, amod func(*transcript.Attempt), omod func(*transcript.Observation)) fstest.MapFS {
	t.Helper()
	return claimBundleBytes(t, req, req, resp, amod, omod)
}

// claimBundleBytes is claimBundle with the attempt's claims derived from
// req and the bytes retained (and committed) being reqBytes.
func claimBundleBytes(t *testing.T, req, reqBytes, resp string, amod func(*transcript.Attempt), omod func(*transcript.Observation)) fstest.MapFS {
	t.Helper()
	b := verifytest.New(t)
	ref := b.Snapshot("snap-1", 3, 3) // tool_0, tool_1, tool_2
	f, err := transcript.DeriveRequest([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	era := mcpwire.EraUnknown
	if f.ProtoState == transcript.ProtoPresent {
		era = mcpwire.EraModern
	}
	a := &transcript.Attempt{ExecutionScope: b.Scope, AttemptID: "a1", Tool: f.Tool, ToolInvalid: f.ToolInvalid,
		ArgsDigest: f.ArgsDigest, ArgsUnsupport: f.ArgsUnsupported, RPCID: f.RPCID, Correlation: f.Correlation,
		Protocol:     transcript.AttemptProto{Era: era, State: f.ProtoState, Value: f.ProtoVersion},
		ServerDigest: b.ServerDigest, Request: b.Blob([]byte(reqBytes)), Terminator: mcpwire.TermLF, Snapshot: ref}
	if amod != nil {
		amod(a)
	}
	b.Add(a)
	// An honest response answers the request's id.
	resp = strings.Replace(resp, `"id":"r-1"`, `"id":`+f.RPCID.Text, 1)
	r := transcript.DeriveResponse([]byte(resp))
	p := b.Blob([]byte(resp))
	o := &transcript.Observation{AttemptID: "a1", Kind: transcript.ObsResponse, ResultType: r.ResultType, IsError: r.IsError,
		ErrorCode: r.ErrorCode, Response: &p, Terminator: mcpwire.TermLF, Basis: transcript.BasisProducer}
	if omod != nil {
		omod(o)
	}
	b.Add(o)
	b.Seal()
	return b.FS()
}

func TestClaimsAgainstBytes(t *testing.T) {
	code := func(n int64) *int64 { return &n }
	tests := []struct {
		name   string
		req    string
		resp   string
		amod   func(*transcript.Attempt)
		omod   func(*transcript.Observation)
		bytes  string // request bytes retained instead of req (the claims stay req's)
		member string // in the mismatch detail; "" when the bundle verifies
	}{
		{name: "claims as derived", req: claimReq, resp: claimResp},
		{name: "JSON-RPC error as derived", req: claimReq, resp: claimErr},
		{name: "no _meta, no arguments, numeric id", req: `{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"name":"tool_1"}}`, resp: claimResp},
		{name: "negotiated revision for a request without one", req: `{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"name":"tool_1"}}`, resp: claimResp,
			amod: func(a *transcript.Attempt) {
				a.Protocol = transcript.AttemptProto{Era: mcpwire.EraLegacy, State: transcript.ProtoNegotiated, Value: "2025-06-18"}
			}},
		{name: "invalid tool and unsupported arguments as derived", req: `{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"x":1.5},"name":3}}`, resp: claimResp},

		{name: "tool", req: claimReq, resp: claimResp, amod: func(a *transcript.Attempt) { a.Tool = "tool_2" }, member: "tool:"},
		{name: "tool_invalid", req: claimReq, resp: claimResp, amod: func(a *transcript.Attempt) { a.Tool, a.ToolInvalid = "", "absent" }, member: "tool_invalid:"},
		{name: "arguments_digest", req: claimReq, resp: claimResp,
			amod: func(a *transcript.Attempt) { a.ArgsDigest = "sha256:" + strings.Repeat("0", 64) }, member: "arguments_digest:"},
		{name: "arguments_unsupported", req: claimReq, resp: claimResp,
			amod: func(a *transcript.Attempt) { a.ArgsDigest, a.ArgsUnsupport = "", "unsupported_number" }, member: "arguments_unsupported:"},
		{name: "jsonrpc_id.text", req: claimReq, resp: claimResp, amod: func(a *transcript.Attempt) { a.RPCID.Text = `"r-2"` }, member: "jsonrpc_id.text:"},
		{name: "jsonrpc_id.kind", req: claimReq, resp: claimResp, amod: func(a *transcript.Attempt) { a.RPCID.Kind = transcript.IDNumber }, member: "jsonrpc_id.kind:"},
		{name: "jsonrpc_id.present", req: claimReq, resp: claimResp, amod: func(a *transcript.Attempt) { a.RPCID = transcript.JSONRPCID{} }, member: "jsonrpc_id.present:"},
		{name: "protocol.version", req: claimReq, resp: claimResp, amod: func(a *transcript.Attempt) { a.Protocol.Value = "2025-06-18" }, member: "protocol.version:"},
		{name: "protocol.state absent for a present revision", req: claimReq, resp: claimResp,
			amod: func(a *transcript.Attempt) {
				a.Protocol = transcript.AttemptProto{Era: mcpwire.EraModern, State: transcript.ProtoAbsent}
			}, member: "protocol.state:"},
		{name: "protocol.state present for a request without one", req: `{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"name":"tool_1"}}`, resp: claimResp,
			amod: func(a *transcript.Attempt) {
				a.Protocol = transcript.AttemptProto{Era: mcpwire.EraModern, State: transcript.ProtoPresent, Value: "2026-07-28"}
			}, member: "protocol.state:"},
		{name: "correlation id", req: claimReq, resp: claimResp,
			amod: func(a *transcript.Attempt) { a.Correlation.CorrelationID.Value = "order-8" }, member: "correlation.correlation_id:"},
		{name: "correlation id removed", req: claimReq, resp: claimResp,
			amod: func(a *transcript.Attempt) { a.Correlation.CorrelationID = nil }, member: "correlation.correlation_id:"},
		{name: "request bytes that are not a tools/call", req: claimReq, bytes: `{"id":"r-1","jsonrpc":"2.0","method":"tools/list"}`, resp: claimResp, member: "request:"},

		{name: "is_error", req: claimReq, resp: claimResp, omod: func(o *transcript.Observation) { o.IsError = false }, member: "is_error:"},
		{name: "result_type", req: claimReq, resp: claimResp, omod: func(o *transcript.Observation) { o.ResultType = "input_required" }, member: "result_type:"},
		{name: "error_code", req: claimReq, resp: claimErr, omod: func(o *transcript.Observation) { o.ErrorCode = code(-32603) }, member: "error_code:"},
		{name: "error_code removed", req: claimReq, resp: claimErr, omod: func(o *transcript.Observation) { o.ErrorCode = nil }, member: "error_code:"},
		{name: "an error response claimed a result", req: claimReq, resp: claimErr,
			omod: func(o *transcript.Observation) { o.ResultType, o.ErrorCode = "complete", nil }, member: "result_type:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := claimBundle(t, tt.req, tt.resp, tt.amod, tt.omod)
			if tt.bytes != "" {
				fsys = claimBundleBytes(t, tt.req, tt.bytes, tt.resp, tt.amod, tt.omod)
			}
			rep, codes := verdictCodes(t, fsys, trusted(t))
			if tt.member == "" {
				if rep.Verdict != verify.Verified || len(codes) != 0 {
					t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
				}
				return
			}
			if got, want := codes, []verify.Code{verify.CodeEvidenceMismatch}; rep.Verdict != verify.Failed || !slices.Equal(got, want) {
				t.Fatalf("verdict %s, codes %v; want failed, %v\n%s", rep.Verdict, got, want, dump(rep))
			}
			f := rep.Find(verify.CodeEvidenceMismatch)
			if len(f) != 1 || f[0].Subject != "attempt a1" || !strings.Contains(f[0].Detail, tt.member) {
				t.Errorf("findings %+v, want one for attempt a1 naming %s", f, tt.member)
			}
			if rep.Has(verify.CodePayloadsVerified) {
				t.Errorf("payloads_verified alongside a contradicted claim\n%s", dump(rep))
			}
		})
	}
}

// TestClaimsUnavailable: a claim whose bytes are not retained cannot be
// checked; evidence_unavailable already says so, and nothing more is added.
func TestClaimsUnavailable(t *testing.T) {
	fsys := claimBundle(t, claimReq, claimResp, func(a *transcript.Attempt) { a.Tool = "tool_2" }, func(o *transcript.Observation) { o.IsError = false })
	for name := range fsys {
		if strings.HasPrefix(name, "blobs/") && fsys[name].Data[0] == '{' && strings.Contains(string(fsys[name].Data), `"r-1"`) {
			delete(fsys, name)
		}
	}
	rep, codes := verdictCodes(t, fsys, trusted(t))
	if got, want := codes, []verify.Code{verify.CodeEvidenceUnavailable}; rep.Verdict != verify.Incomplete || !slices.Equal(got, want) {
		t.Fatalf("verdict %s, codes %v; want incomplete, %v\n%s", rep.Verdict, got, want, dump(rep))
	}
	if n := len(rep.Find(verify.CodeEvidenceUnavailable)); n != 2 {
		t.Errorf("%d evidence_unavailable findings, want 2 (request, response)\n%s", n, dump(rep))
	}
}

// TestClaimsDetailEscaped: a claim's values come from hostile bytes; the
// finding quotes them escaped and bounded.
func TestClaimsDetailEscaped(t *testing.T) {
	hostile := "\x1b[31m\u202e" + strings.Repeat("A", 900)
	fsys := claimBundle(t, claimReq, claimResp, func(a *transcript.Attempt) { a.Tool = hostile }, nil)
	rep, _ := verdictCodes(t, fsys, trusted(t))
	f := rep.Find(verify.CodeEvidenceMismatch)
	if len(f) != 1 {
		t.Fatalf("findings %+v", f)
	}
	d := f[0].Detail
	if strings.ContainsAny(d, "\x1b\u202e") || !strings.Contains(d, `\x1b[31m\u202e`) || strings.Contains(d, strings.Repeat("A", 100)) {
		t.Errorf("detail not escaped or not bounded: %q", d)
	}
}
