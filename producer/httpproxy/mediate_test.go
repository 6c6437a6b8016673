package httpproxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMediatedBodies: upstream answers real clients read differently from
// one another are never delivered, the call is a transport failure, and the
// client gets the proxy's answer instead (spec/http.md, "Server to client").
func TestMediatedBodies(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"transferred 1000000"}]}}`
	for _, tc := range []struct {
		name       string
		status     int
		ct, body   string
		wantStatus int
		wantInBody string // what the client's body must hold
	}{
		// The Go SDK and the TypeScript SDK v2 read a JSON-RPC error from a
		// non-2xx body: its status and headers stay, its body is the proxy's.
		{"4xx JSON-RPC error", http.StatusBadRequest, "application/json", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"already charged"}}`, http.StatusBadRequest, "withheld"},
		// The TypeScript SDK discards a 202's body, the Go SDK reads it.
		{"202 with the answer", http.StatusAccepted, "application/json", answer, http.StatusOK, `"code":-32093`},
		// No client reads an event stream on a status but 200.
		{"event stream on 201", http.StatusCreated, "text/event-stream", "data: " + answer + "\n\n", http.StatusOK, `"code":-32093`},
		// The TypeScript SDK's schema refuses an unknown member (the call
		// would never resolve); the Go SDK reads it.
		{"unknown member", http.StatusOK, "application/json", `{"jsonrpc":"2.0","id":7,"result":{},"extra":1}`, http.StatusOK, `"code":-32093`},
		// The Go SDK truncates 7.5 to 7.
		{"fractional id", http.StatusOK, "application/json", `{"jsonrpc":"2.0","id":7.5,"result":{}}`, http.StatusOK, `"code":-32093`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer up.Close()
			h := newHarness(t, up.URL, nil)
			resp, body := post(t, h.srv.URL, callBody, nil)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(body, tc.wantInBody) {
				t.Fatalf("client got %d %q, want %d with %q", resp.StatusCode, body, tc.wantStatus, tc.wantInBody)
			}
			if strings.Contains(body, "transferred") || strings.Contains(body, "already charged") {
				t.Fatalf("the upstream's body reached the client: %s", body)
			}
			reps := h.close()
			requireIntact(t, reps) // no tools/list in the exchange: incomplete at best, never failed
			a, r, _, tf := total(reps)
			if a != 1 || r != 0 || tf != 1 {
				t.Fatalf("attempts %d responses %d transport failures %d, want 1 0 1", a, r, tf)
			}
		})
	}
}
