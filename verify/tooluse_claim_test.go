package verify_test

import (
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// A v4 attempt line is checked against its retained request bytes, but
// correlation.tool_use_id only when the line claims one: a producer (or
// anyone re-signing with its key) that leaves it out of an attempt whose
// request carries the agent host's tool-use id (claudecode/toolUseId, or a
// key the header's tool_use_meta names) gets a verified bundle whose
// claims say the call had no tool-use id. The bytes and the line
// disagree, which every other correlation member fails on; the tool-use
// id is the one an auditor joins the agent's transcript by, and the one
// retry links by caller_tool_use_id are made of.
func TestToolUseIDOmittedFails(t *testing.T) {
	b := verifytest.New(t)
	ref := b.Snapshot("snap-1", 5, 3)
	req := `{"id":"a1","jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"claudecode/toolUseId":"toolu_01","io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"x":1},"name":"tool_1"}}`
	f, err := transcript.DeriveRequest([]byte(req))
	if err != nil || f.Correlation.ToolUseID == nil || !f.Correlation.ToolUseID.Valid {
		t.Fatalf("derive: %+v %v", f, err)
	}
	a := &transcript.Attempt{ExecutionScope: b.Scope, AttemptID: "a1", Tool: f.Tool, ArgsDigest: f.ArgsDigest, RPCID: f.RPCID, Correlation: f.Correlation,
		Protocol:     transcript.AttemptProto{Era: mcpwire.EraModern, State: f.ProtoState, Value: f.ProtoVersion},
		ServerDigest: b.ServerDigest, Request: b.Blob([]byte(req)), Terminator: mcpwire.TermLF, Snapshot: ref}
	a.Correlation.ToolUseID = nil // the claim left out
	b.Add(a)
	b.Respond("a1", transcript.ObsResponse)
	b.Seal()
	rep, codes := verdictCodes(t, b.FS(), trusted(t))
	if rep.Verdict == verify.Verified {
		t.Fatalf("verified (problems %v): the attempt line claims no tool-use id, its request bytes carry claudecode/toolUseId \"toolu_01\"", codes)
	}
}
