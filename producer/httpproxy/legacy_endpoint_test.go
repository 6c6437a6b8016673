package httpproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
)

// spec/http.md (The deprecated HTTP+SSE transport): the upstream's
// endpoint event names its URL and session id and is "recorded withheld
// (sse_endpoint, no frame, no URL)". An endpoint event the proxy does not
// take as the transport's (one with an id line, as a server that numbers
// every event writes it; one after the first; BOM, padding, a comment
// before it) was committed as a refused server frame, and with the default
// retention (full) its data, the upstream's session URL, was kept in the
// bundle's blobs (found by review); now every event named endpoint, as
// any reader might read the name, is withheld with no bytes. The variants the proxy takes (CRLF, split across
// chunks) and the other-origin ones (withheld, the stream ends, nothing
// reaches the other host) hold.
func TestLegacyEndpointVariants(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("other origin reached: %s", r.URL) }))
	defer other.Close()
	for _, tc := range []struct {
		name   string
		chunks []string
		legacy bool
	}{
		{"other-origin", []string{"event: endpoint\ndata: " + other.URL + "/msg\n\n"}, false},
		{"scheme-relative", []string{"event: endpoint\ndata: //" + strings.TrimPrefix(other.URL, "http://") + "/msg\n\n"}, false},
		{"userinfo", []string{"event: endpoint\ndata: http://u:p@HOST/msg\n\n"}, false},
		{"crlf", []string{"event: endpoint\r\ndata: /msg?s=secret\r\n\r\n"}, true},
		{"split", []string{"event: endp", "oint\ndata: /ms", "g?s=secret\n", "\n"}, true},
		{"bom", []string{"\xef\xbb\xbfevent: endpoint\ndata: /msg?s=secret\n\n"}, false},
		{"late", []string{": hi\n\n", "event: endpoint\ndata: /msg?s=secret\n\n"}, false},
		{"second", []string{"event: endpoint\ndata: /msg?s=secret\n\n", "event: endpoint\ndata: /msg?s=secret2\n\n", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n\n"}, true},
		{"lone-cr", []string{"event: endpoint\rdata: /msg?s=secret\r\r"}, false},
		{"padded", []string{"event:  endpoint\ndata: /msg?s=secret\n\n"}, false},
		{"extra-id", []string{"event: endpoint\ndata: /msg?s=secret\nid: 1\n\n"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var upURL string
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					w.WriteHeader(202)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				for _, c := range tc.chunks {
					_, _ = io.WriteString(w, strings.ReplaceAll(c, "HOST", strings.TrimPrefix(upURL, "http://")))
					w.(http.Flusher).Flush() // each chunk on its own (the reader may still see them joined)
				}
			}))
			defer up.Close()
			upURL = up.URL
			h := newHarness(t, up.URL, nil)
			resp, err := http.Get(h.srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(raw), "msg") || strings.Contains(string(raw), "secret") {
				t.Errorf("client got the upstream endpoint: %q", raw)
			}
			got := strings.Contains(string(raw), legacyParam)
			if got != tc.legacy {
				t.Errorf("legacy %v, want %v: %q", got, tc.legacy, raw)
			}
			er := mcpwire.NewEventReader(strings.NewReader(string(raw)))
			n := 0
			for {
				ev, err := er.Next()
				if ev.Name == "endpoint" {
					n++
				}
				if err != nil {
					break
				}
			}
			if n > 1 {
				t.Errorf("%d endpoint events delivered", n)
			}
			reps := h.close()
			requireIntact(t, reps)
			if c := countIn(bundleBytes(t, reps), "secret"); c != 0 {
				t.Errorf("secret in bundle %d times", c)
			}
		})
	}
}
