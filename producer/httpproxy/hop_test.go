package httpproxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedirectNeverRelayed: an upstream that answers tools/call with a
// redirect to another server (which would run the call) and a GET stream
// with one. The Go SDK client behind the proxy gets an error for the call,
// the redirect target is never reached, the call is a transport failure
// (its outcome unknown), no Location reaches the client, and the bundles
// verify (both eras).
func TestRedirectNeverRelayed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		version   string
	}{
		{"stateful-2025-11-25", false, "2025-11-25"},
		{"stateless-2026-07-28", true, "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
				server, _ := sdkServer(0)
				var reached atomic.Int64
				targetServer, _ := sdkServer(0)
				targetInner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return targetServer }, &mcp.StreamableHTTPOptions{Stateless: true})
				target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					reached.Add(1)
					targetInner.ServeHTTP(w, r)
				}))
				defer target.Close()
				inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: tc.stateless})
				up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					if r.Method == http.MethodGet || bytes.Contains(body, []byte(`"tools/call"`)) {
						http.Redirect(w, r, target.URL, code)
						return
					}
					r.Body = io.NopCloser(bytes.NewReader(body))
					inner.ServeHTTP(w, r)
				}))
				defer up.Close()
				h := newHarness(t, up.URL, nil)
				cs := connect(t, h.srv.URL, tc.version, nil)
				listAll(t, cs)
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
				if err == nil {
					t.Fatalf("%d: the call through a redirecting upstream returned a result", code)
				}
				cs.Close()
				// A GET stream (a 2025-11-25 client's) redirected: 502, no Location.
				req, _ := http.NewRequest(http.MethodGet, h.srv.URL, nil)
				req.Header.Set("Accept", "text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Location") != "" {
					t.Fatalf("%d: GET answered %d, Location %q; want 502 and none", code, resp.StatusCode, resp.Header.Get("Location"))
				}
				reps := h.close()
				requireVerified(t, reps)
				if n := reached.Load(); n != 0 {
					t.Fatalf("%d: the redirect target was reached %d times", code, n)
				}
				if a, r, _, tf := total(reps); a != 1 || r != 0 || tf != 1 {
					t.Fatalf("%d: attempts %d responses %d transport failures %d, want 1 0 1", code, a, r, tf)
				}
				if n := countIn(bundleBytes(t, reps), `(a redirect), which is not followed and not relayed`); n < 2 {
					t.Fatalf("%d: %d failure lines name the redirect, want the call's and the GET's", code, n)
				}
			}
		})
	}
}

// TestHopByHopHeaders: Proxy-Authorization, Proxy-Connection and the
// RFC 9110 hop-by-hop headers (Connection and the headers it names,
// Keep-Alive, TE, Upgrade) do not cross the proxy in either direction;
// the Proxy-Authorization credential is not recorded, not even by name;
// and a routing header named by Connection is dropped before the header
// gate reads it, so the gate and the upstream see the same headers.
func TestHopByHopHeaders(t *testing.T) {
	got := make(chan http.Header, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Proxy-Authenticate", "Basic realm=upstream")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-End-To-End", "kept")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`)
	}))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	resp, body := post(t, h.srv.URL, callBody, map[string]string{
		"Proxy-Authorization": "Basic cHJveHktc2VjcmV0LVpaWlo=",
		"Proxy-Connection":    "keep-alive",
		"Keep-Alive":          "timeout=9",
		"Connection":          "X-Hop",
		"X-Hop":               "1",
		"Te":                  "gzip",
		"Upgrade":             "websocket",
		"X-End-To-End":        "kept",
	})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	in := <-got
	for _, n := range []string{"Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "X-Hop", "Te", "Upgrade"} {
		if v := in.Get(n); v != "" {
			t.Errorf("the upstream received %s: %q", n, v)
		}
	}
	if in.Get("X-End-To-End") != "kept" {
		t.Error("an end-to-end header was dropped")
	}
	for _, n := range []string{"X-Resp-Hop", "Proxy-Authenticate", "Keep-Alive"} {
		if v := resp.Header.Get(n); v != "" {
			t.Errorf("the client received %s: %q", n, v)
		}
	}
	if resp.Header.Get("X-End-To-End") != "kept" {
		t.Error("an end-to-end response header was dropped")
	}
	// Connection naming Mcp-Name: the gate reads the request without it
	// (header_missing), as the upstream would have received it.
	resp, body = post(t, h.srv.URL, callBody, map[string]string{"Connection": "Mcp-Name"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "header_missing") {
		t.Fatalf("Connection: Mcp-Name: status %d body %s, want 400 header_missing", resp.StatusCode, body)
	}
	reps := h.close()
	requireIntact(t, reps)
	files := bundleBytes(t, reps)
	for _, s := range []string{"proxy-authorization", "cHJveHktc2VjcmV0LVpaWlo", "x-hop"} {
		if n := countIn(files, s); n != 0 {
			t.Errorf("the bundle holds %q %d times", s, n)
		}
	}
}
