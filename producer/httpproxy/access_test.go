package httpproxy

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/verify"
)

// hostRT sends every request with this Host (a page whose name rebinds to
// 127.0.0.1) and, when set, this Origin.
type hostRT struct{ host, origin string }

func (r hostRT) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if r.host != "" {
		req.Host = r.host
	}
	if r.origin != "" {
		req.Header.Set("Origin", r.origin)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// bundleBytes is every file of every sealed bundle, by path.
func bundleBytes(t *testing.T, reps map[string]*verify.Report) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for d := range reps {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			out[p] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func countIn(files map[string][]byte, s string) int {
	n := 0
	for _, b := range files {
		n += bytes.Count(b, []byte(s))
	}
	return n
}

// TestHostOriginRefused: a request whose Host is a rebinding name, one with
// a foreign Origin and one with Origin null are refused with 403 before
// anything reaches the upstream, and each is recorded as a refused line
// naming its rule; the Go SDK client behind a rebinding name cannot even
// initialize. The upstream (a Go SDK server with its own DNS-rebinding
// protection) refuses the rebinding Host directly too. Loopback names, the
// listen address and the allowed names pass, and the bundle verifies.
func TestHostOriginRefused(t *testing.T) {
	server, _ := sdkServer(0)
	var reached atomic.Int64
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		inner.ServeHTTP(w, r)
	}))
	defer up.Close()
	h := newHarness(t, up.URL, func(c *Config) {
		c.AllowedHosts = []string{"mcp.internal"}
		c.AllowedOrigins = []string{"http://app.example:3000"}
	})
	port := h.srv.URL[strings.LastIndex(h.srv.URL, ":")+1:]

	// The upstream's own guard refuses a rebinding Host directly.
	req, _ := http.NewRequest(http.MethodPost, up.URL, strings.NewReader(callBody))
	req.Host = "attacker.example:" + port
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the upstream directly: status %d, want 403", resp.StatusCode)
	}
	reached.Store(0)

	for _, tc := range []struct {
		name, host, origin, rule string
	}{
		{"rebinding-host", "attacker.example:" + port, "", ruleHostNotAllowed},
		{"rebinding-host-no-port", "attacker.example", "", ruleHostNotAllowed},
		{"loopback-name-other-port", "localhost:1", "", ruleHostNotAllowed},
		{"allowed-name-wrong-case-still-allowed-but-foreign-origin", "MCP.internal:" + port, "https://evil.example", ruleOriginNotAllowed},
		{"foreign-origin", "", "https://evil.example", ruleOriginNotAllowed},
		{"origin-null", "", "null", ruleOriginNotAllowed},
		{"origin-other-port", "", "http://app.example:3001", ruleOriginNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL, strings.NewReader(callBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			req.Header.Set("Proxy-Authorization", "Basic cmVmdXNlZC1wcm94eS1jcmVk")
			req.Header.Set("Connection", "Origin")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body.String(), tc.rule) {
				t.Fatalf("status %d body %s, want 403 naming %s", resp.StatusCode, body.String(), tc.rule)
			}
		})
	}
	// The Go SDK client reaching the proxy by a rebinding name, and from a
	// foreign page, cannot initialize.
	for _, rt := range []hostRT{{host: "attacker.example:" + port}, {origin: "null"}} {
		c := mcp.NewClient(&mcp.Implementation{Name: "page", Version: "1"}, nil)
		if cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.srv.URL, HTTPClient: &http.Client{Transport: rt}}, nil); err == nil {
			cs.Close()
			t.Fatalf("%+v: the Go SDK client initialized through the proxy", rt)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}

	// What passes: the listen address, loopback names on its port, an
	// allowed host (any port), an allowed origin.
	for _, rt := range []hostRT{{}, {host: "localhost:" + port}, {host: "[::1]:" + port}, {host: "mcp.internal:8443"}, {origin: "http://app.example:3000"}} {
		cs := connect(t, h.srv.URL, "2026-07-28", &http.Client{Transport: rt})
		listAll(t, cs)
		callEcho(t, cs, "allowed")
		cs.Close()
	}
	reps := h.close()
	requireVerified(t, reps)
	files := bundleBytes(t, reps)
	// Each raw request above is one line; the SDK client sends at least
	// its initialize (and may send more, a DELETE, before it gives up).
	for _, s := range []string{"proxy-authorization", "cmVmdXNlZC1wcm94eS1jcmVk"} {
		if n := countIn(files, s); n != 0 {
			t.Errorf("a refused request's %q is recorded %d times", s, n)
		}
	}
	if n := countIn(files, `"rule":"host_not_allowed"`); n < 4 {
		t.Errorf("%d host_not_allowed lines, want at least 4", n)
	}
	if n := countIn(files, `"rule":"origin_not_allowed"`); n < 5 {
		t.Errorf("%d origin_not_allowed lines, want at least 5", n)
	}
	seen := false
	for _, rep := range reps {
		for _, f := range rep.Find(verify.CodeProducerObservation) {
			seen = seen || strings.Contains(f.Detail, "refused before their bodies were read")
		}
	}
	if !seen {
		t.Error("verify does not report the peer refusals")
	}
	if a, r, _, _ := total(reps); a != 5 || r != 5 {
		t.Fatalf("attempts %d responses %d, want 5 5 (the allowed clients' calls)", a, r)
	}
}

// TestAccessConfig: allow lists are checked when the proxy is made; null
// is never an allowed origin.
func TestAccessConfig(t *testing.T) {
	for _, tc := range []struct {
		hosts, origins []string
		ok             bool
	}{
		{[]string{"mcp.example", "mcp.example:8443", "[::1]:80"}, []string{"https://app.example", "http://localhost:3000/"}, true},
		{[]string{"http://mcp.example"}, nil, false},
		{[]string{"mcp.example:99999"}, nil, false},
		{nil, []string{"null"}, false},
		{nil, []string{"app.example"}, false},
		{nil, []string{"https://app.example/path"}, false},
	} {
		_, err := newAccess(tc.hosts, tc.origins)
		if (err == nil) != tc.ok {
			t.Errorf("hosts %q origins %q: err %v, want ok %v", tc.hosts, tc.origins, err, tc.ok)
		}
	}
}
