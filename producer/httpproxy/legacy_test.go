package httpproxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/verify"
)

// legacyUpstream is a Go SDK server on the deprecated HTTP+SSE transport
// (mcp.SSEHandler: GET opens the stream, whose first event is the
// endpoint, ?sessionid=…), counting the tools/call requests it received.
func legacyUpstream(t *testing.T) (*httptest.Server, *atomic.Int64, chan struct{}, chan struct{}) {
	t.Helper()
	s, release, started := sdkServerStarted(3)
	var calls atomic.Int64
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				calls.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	up := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	return up, &calls, release, started
}

func connectSSE(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client-sse", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.SSEClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP+SSE: %v", err)
	}
	return cs
}

// The Go SDK's HTTP+SSE client through the proxy to the Go SDK's HTTP+SSE
// server: the session is recorded in a bundle of its own that verifies,
// every call with its response; the client never learns the upstream's
// endpoint (its session id), and a POST to the proxy's endpoint once the
// stream is gone is refused, not forwarded.
func TestLegacySSE(t *testing.T) {
	up, calls, _, _ := legacyUpstream(t)
	h := newHarness(t, up.URL, nil)
	cs := connectSSE(t, h.srv.URL)
	if n := listAll(t, cs); n != 5 {
		t.Fatalf("listed %d tools, want 5", n)
	}
	for _, text := range []string{"one", "two"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != text {
			t.Fatalf("echo %q answered %q", text, got)
		}
	}
	// A call to a tool the server does not have: answered by the server
	// with an error, recorded as that answer.
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Fatalf("a call to an unknown tool succeeded: %+v", res)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	reps := h.close()
	var sse *verify.Report
	var sseDir string
	for d, rep := range reps {
		if strings.HasPrefix(filepath.Base(d), kindSSE+"-") {
			if sse != nil {
				t.Fatalf("two HTTP+SSE bundles for one session")
			}
			sse, sseDir = rep, d
		}
	}
	if sse == nil {
		t.Fatalf("no HTTP+SSE bundle among %d", len(reps))
	}
	requireVerified(t, map[string]*verify.Report{sseDir: sse})
	if sse.Counts.Attempts != 3 || sse.Counts.Responses != 3 || calls.Load() != 3 {
		t.Fatalf("attempts %d, responses %d, upstream calls %d; want 3 each", sse.Counts.Attempts, sse.Counts.Responses, calls.Load())
	}
	files := bundleBytes(t, reps)
	if n := countIn(files, `"rule":"sse_endpoint"`); n != 2 {
		t.Fatalf("%d sse_endpoint lines, want 2 (the stateless bundle's hand-off, the session's withheld endpoint)", n)
	}
	if n := countIn(files, "sessionid="); n != 0 {
		t.Fatalf("the upstream's session id is in the bundle %d times", n)
	}
}

// A POST to an endpoint the proxy never gave is refused before its body
// is read, recorded, and never reaches the upstream.
func TestLegacySSEUnknownEndpoint(t *testing.T) {
	up, calls, _, _ := legacyUpstream(t)
	h := newHarness(t, up.URL, nil)
	resp, body := post(t, h.srv.URL+"?"+legacyParam+"=00112233445566778899aabbccddeeff", callBody, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, ruleSSESessionUnknown) {
		t.Fatalf("status %d body %s, want 404 naming %s", resp.StatusCode, body, ruleSSESessionUnknown)
	}
	reps := h.close()
	requireIntact(t, reps)
	if n := countIn(bundleBytes(t, reps), `"rule":"sse_session_unknown"`); n != 1 || calls.Load() != 0 {
		t.Fatalf("%d refusals recorded, %d calls upstream; want 1 and 0", n, calls.Load())
	}
}
