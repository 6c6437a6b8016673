package httpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest/tshttp"
	"github.com/tracectl/tracectl/verify"
)

// policyYAML denies echo with message "forbidden" and allows the rest.
const policyYAML = `version: 1
default: allow
rules:
  - id: no-forbidden
    tool: echo
    when: 'has(args.message) && args.message == "forbidden"'
    action: deny
`

// loggingUpstream is a Go SDK Streamable HTTP server whose echo tool logs
// the arguments of every call it executes.
type loggingUpstream struct {
	mu       sync.Mutex
	executed []string
	srv      *httptest.Server
}

func newLoggingUpstream(t *testing.T) *loggingUpstream {
	u := &loggingUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "logging-http", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "echoes", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.executed = append(u.executed, string(req.Params.Arguments))
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	u.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(u.srv.Close)
	return u
}

// withPolicy sets the recorders' policy and mode.
func withPolicy(policy, mode string) func(*harness) {
	return func(h *harness) { h.policy, h.policyMode = []byte(policy), mode }
}

func (u *loggingUpstream) calls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.executed...)
}

// requireDecisions: every bundle verifies, its decisions re-derived, and
// the denied and other outcomes are as counted.
func requireDecisions(t *testing.T, reps map[string]*verify.Report, denied, responses int64) {
	t.Helper()
	requireVerified(t, reps)
	var d, r int64
	for _, rep := range reps {
		d += rep.Counts.Denied
		r += rep.Counts.Responses
		found := false
		for _, f := range rep.Findings {
			found = found || f.Code == verify.CodeDecisionsVerified
		}
		if rep.Counts.Attempts > 0 && !found {
			t.Errorf("no %s finding", verify.CodeDecisionsVerified)
		}
	}
	if d != denied || r != responses {
		t.Errorf("denied %d responses %d, want %d %d", d, r, denied, responses)
	}
}

// TestPolicyGoSDK: the Go SDK's streamable client through the proxy with
// a policy. The denied call never reaches the server, the client gets
// -32094 naming the rule, the allowed call runs, and the bundle verifies
// with the decisions re-derived: in a 2025-11-25 session (a bundle of its
// own) and stateless (2026-07-28: the pages and the calls reach the
// stateless bundle through different sinks).
func TestPolicyGoSDK(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) { policyGoSDK(t, version) })
	}
}

func policyGoSDK(t *testing.T, version string) {
	up := newLoggingUpstream(t)
	h := newHarness(t, up.srv.URL, nil, withPolicy(policyYAML, ""))
	cs := connect(t, h.srv.URL+"/mcp", version, nil)
	listAll(t, cs)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}); err != nil {
		t.Fatalf("the allowed call: %v", err)
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "forbidden"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32094 || !strings.Contains(we.Message, "no-forbidden") || !strings.Contains(string(we.Data), `"rule":"no-forbidden"`) {
		t.Fatalf("the denied call: got %v (%#v), want JSON-RPC -32094 naming rule no-forbidden in message and data", err, we)
	}
	cs.Close()
	if got := up.calls(); len(got) != 1 || !strings.Contains(got[0], "hello") {
		t.Fatalf("the server executed %q, want the allowed call only", got)
	}
	requireDecisions(t, h.close(), 1, 1)
}

// TestPolicyTypeScriptHTTP: the TypeScript SDK v1's Streamable HTTP client
// likewise: its application sees the rejection with the code and the rule.
func TestPolicyTypeScriptHTTP(t *testing.T) {
	up := newLoggingUpstream(t)
	h := newHarness(t, up.srv.URL, nil, withPolicy(policyYAML, ""))
	evs := tshttp.Run(t, h.srv.URL+"/mcp", "tok", "denied")
	var denied string
	for _, e := range evs {
		if e.Event == "denied" {
			denied = e.Message
		}
	}
	if !strings.HasPrefix(denied, "rejected: code=-32094 ") || !strings.Contains(denied, `"rule":"no-forbidden"`) {
		t.Fatalf("the denied call as the TypeScript client saw it: %q (events %+v)", denied, evs)
	}
	if got := up.calls(); len(got) != 1 || strings.Contains(got[0], "forbidden") {
		t.Fatalf("the server executed %q, want the allowed call only", got)
	}
	requireDecisions(t, h.close(), 1, 1)
}

// TestPolicyAuditHTTP: in audit mode the deny is recorded and the call
// forwarded anyway; the bundle verifies.
func TestPolicyAuditHTTP(t *testing.T) {
	up := newLoggingUpstream(t)
	h := newHarness(t, up.srv.URL, nil, withPolicy(policyYAML, "audit"))
	cs := connect(t, h.srv.URL+"/mcp", "2025-11-25", nil)
	listAll(t, cs)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "forbidden"}}); err != nil {
		t.Fatalf("audit mode forwards a denied call: %v", err)
	}
	cs.Close()
	if got := up.calls(); len(got) != 1 {
		t.Fatalf("the server executed %q, want the call", got)
	}
	reps := h.close()
	requireDecisions(t, reps, 0, 1)
	for _, rep := range reps {
		for _, f := range rep.Findings {
			if f.Code == verify.CodeDecisionsVerified && !strings.Contains(f.Detail, "(1 deny)") || f.Code == verify.CodeDecisionsVerified && !strings.Contains(f.Detail, "mode audit") {
				t.Errorf("the audit bundle's decisions: %s, want the deny recorded in mode audit", f.Detail)
			}
		}
	}
}
