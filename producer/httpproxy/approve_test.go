//go:build unix

package httpproxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/verify"
)

// approveYAML asks for approval of every echo call.
const approveYAML = `version: 1
default: allow
rules:
  - id: ask-first
    tool: echo
    action: approve
`

// approver approves a message "yes", refuses the rest.
var approver = []string{"/bin/sh", "-c", `case "$(cat)" in
*'"message":"yes"'*) echo '{"approve":true,"by":"carol"}' ;;
*) echo '{"approve":false,"by":"carol","reason":"no"}' ;;
esac`}

// TestApprovalHTTP: through the HTTP proxy (the Go SDK's streamable
// client, in a 2025-11-25 session and stateless), the approver is asked
// after the client frame order is released; the approved call runs, the
// refused one never reaches the server and the client gets -32094 naming
// the rule and the refusal; the bundles verify with the approvals checked.
func TestApprovalHTTP(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			up := newLoggingUpstream(t)
			h := newHarness(t, up.srv.URL, nil, withPolicy(approveYAML, ""), func(h *harness) { h.approve = approver })
			cs := connect(t, h.srv.URL+"/mcp", version, nil)
			listAll(t, cs)
			ctx := context.Background()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "yes"}}); err != nil {
				t.Fatalf("the approved call: %v", err)
			}
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "maybe"}})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != -32094 || we.Message != "tracectl: denied by policy rule ask-first: approval refused: no" {
				t.Fatalf("the refused call: %v (%#v)", err, we)
			}
			cs.Close()
			if got := up.calls(); len(got) != 1 || !strings.Contains(got[0], "yes") {
				t.Fatalf("the server executed %q, want the approved call only", got)
			}
			reps := h.close()
			requireDecisions(t, reps, 1, 1)
			for _, rep := range reps {
				for _, f := range rep.Findings {
					if f.Code == verify.CodeApprovalMismatch {
						t.Errorf("%s", f.Detail)
					}
				}
			}
		})
	}
}
