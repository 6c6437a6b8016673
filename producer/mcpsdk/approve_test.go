//go:build unix

package mcpsdk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/mcpsdk"
	"github.com/tracectl/tracectl/verify"
)

// TestAdapterApproval: the in-process adapter with an approve rule and the
// recorder's approve command (producer.Options.ApproveCommand). Without an
// approver the recorder does not open, naming the rule; with one, the
// approved call runs, the refused one never does and the client gets
// -32094 with the refusal; the bundle verifies.
func TestAdapterApproval(t *testing.T) {
	ctx := context.Background()
	ran, serverIn, serverOut := calculator(t, ctx)
	opts := adapterOptions([]byte(bigSumsPolicy))
	if _, err := producer.Open(filepath.Join(t.TempDir(), "no.trace"), opts); !errors.Is(err, producer.ErrInvalidOptions) || !strings.Contains(err.Error(), `rule 0 ("big-sums"): action "approve" needs an approver`) {
		t.Fatalf("an approve rule without an approver: %v", err)
	}
	opts.ApproveCommand = []string{"/bin/sh", "-c", `case "$(cat)" in *'"A":1000,'*) echo '{"approve":true,"by":"dave"}' ;; *) echo '{"approve":false,"by":"dave","reason":"too big"}' ;; esac`}
	rec, err := producer.Open(filepath.Join(t.TempDir(), "run.trace"), opts)
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcpsdk.Transport{Recorder: rec, ServerIn: serverIn, ServerOut: serverOut}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1.0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	approvedThenRefused(t, ctx, cs, "too big")
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"A": 1, "B": 2}}); err != nil {
		t.Fatalf("a call no approve rule matched: %v", err)
	}
	cs.Close()
	if _, err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("the server ran %d calls, want 2", n)
	}
	rep, err := sealVerify(t, ctx, rec)
	if err != nil || rep.Verdict != verify.Verified || rep.Counts.Denied != 1 || rep.Counts.Responses != 2 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestAdapterApprovalElicit: the in-process adapter asks the Go SDK
// client itself (producer.Options.ApproveElicit, no command): the session
// core sends elicitation/create on the client's connection, its
// ElicitationHandler answers; what it approves runs, what it declines is
// denied (-32094) and never runs; the bundle verifies, its approvals via
// elicitation by "client:my-agent".
func TestAdapterApprovalElicit(t *testing.T) {
	ctx := context.Background()
	ran, serverIn, serverOut := calculator(t, ctx)
	opts := adapterOptions([]byte(bigSumsPolicy))
	opts.ApproveElicit = true
	rec, err := producer.Open(filepath.Join(t.TempDir(), "run.trace"), opts)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	handler := func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		if strings.Contains(req.Params.Message, `"A":1000,`) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	tr := &mcpsdk.Transport{Recorder: rec, ServerIn: serverIn, ServerOut: serverOut}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1.0"}, &mcp.ClientOptions{ElicitationHandler: handler}).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	approvedThenRefused(t, ctx, cs, "the client declined")
	cs.Close()
	if _, err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 1 || asked != 2 {
		t.Fatalf("the server ran %d calls, want 1; the client was asked %d times, want 2", n, asked)
	}
	rep, err := sealVerify(t, ctx, rec)
	if err != nil || rep.Verdict != verify.Verified || rep.Counts.Denied != 1 || rep.Counts.Responses != 1 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if b, err := os.ReadFile(filepath.Join(rec.Dir(), "transcript.jsonl")); err != nil || !strings.Contains(string(b), `"by":"client:my-agent","outcome":"approved","via":"elicitation"}`) {
		t.Fatalf("transcript: %v\n%s", err, b)
	}
}

// bigSumsPolicy asks before any sum with A over 100.
const bigSumsPolicy = "version: 1\ndefault: allow\nrules:\n  - id: big-sums\n    tool: add\n    when: 'args.A > 100'\n    action: approve\n"

// approvedThenRefused calls add with A 1000, which the approver approves,
// then with A 5000, which it refuses for why: the client gets -32094.
func approvedThenRefused(t *testing.T, ctx context.Context, cs *mcp.ClientSession, why string) {
	t.Helper()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"A": 1000, "B": 2}}); err != nil {
		t.Fatalf("the approved call: %v", err)
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"A": 5000, "B": 2}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32094 || we.Message != "tracectl: denied by policy rule big-sums: approval refused: "+why {
		t.Fatalf("the refused call: %v", err)
	}
}
