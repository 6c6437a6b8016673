package httpproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// A JSON answer to a call that is longer than the gate's 64 MiB (70 MiB
// here) is read on within maxLargeBody and the in-flight budget, read by
// the gate (mcpwire.ReadLarge), bound as the call's response and delivered
// byte for byte; with a budget too small to hold it, it is withheld and
// the call is a transport failure.
func TestLargeJSONAnswer(t *testing.T) {
	const size = 70 << 20
	answer := func(id string) []byte {
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"`)
		b.Write(bytes.Repeat([]byte("z"), size))
		b.WriteString(`"}]}}`)
		return b.Bytes()
	}
	body := answer("7")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	for _, tc := range []struct {
		name   string
		budget int64
		bound  bool
	}{
		{"bound", 0, true},
		{"over-budget", 66 << 20, false}, // under the 70 MiB answer
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, up.URL, func(c *Config) {
				if tc.budget > 0 {
					c.MaxInflightBytes = tc.budget
				}
			})
			resp, got := post(t, h.srv.URL, callBody, nil)
			reps := h.close()
			requireIntact(t, reps)
			_, responses, _, tf := total(reps)
			if tc.bound {
				if resp.StatusCode != http.StatusOK || got != string(body) {
					t.Fatalf("status %d, %d bytes; want the %d-byte answer", resp.StatusCode, len(got), len(body))
				}
				if responses != 1 || tf != 0 {
					t.Fatalf("%d responses, %d transport failures; want the answer bound", responses, tf)
				}
				return
			}
			if resp.StatusCode != http.StatusBadGateway || strings.Contains(got, "zzzz") || responses != 0 || tf != 1 {
				t.Fatalf("status %d, %.200q; %d responses, %d transport failures: want it withheld", resp.StatusCode, got, responses, tf)
			}
		})
	}
}
