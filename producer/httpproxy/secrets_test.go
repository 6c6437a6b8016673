package httpproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/transcript"
)

// TestSecretsNotRecorded: a secret argument the tool's declaration mirrors
// into Mcp-Param-Region (the Go SDK client sets it, SEP-2243), a key in the
// upstream URL's path, a key in the client's request path and a segment an
// operator's --redact-path names: none of them is in any file of the
// bundle, with --retain full and with digest, though each reached the
// upstream. With UnsafeRecordInClear (and payloads unredacted) they are
// recorded: the test sees them where they would be.
func TestSecretsNotRecorded(t *testing.T) {
	const (
		paramSecret = "ghp_Zq8xW3vN5mK7pL2rT9yB4cD6fH1jS0aE8uGi"
		upKey       = "u5Kx9QpL2mZ7vR4tW8yB"
		clientKey   = "c7Hd2Lq9Vx4Nm8Rt3Wz6"
		tenant      = "tenant-acme"
	)
	for _, tc := range []struct {
		name    string
		retain  string
		inClear bool
	}{
		{"retain-full", transcript.RetainFull, false},
		{"retain-digest", transcript.RetainDigest, false},
		{"unsafe-in-clear", transcript.RetainFull, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := mcp.NewServer(&mcp.Implementation{Name: "params", Version: "1"}, nil)
			server.AddTool(&mcp.Tool{Name: "where", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
				})
			inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
			var sawParam, sawPath bool
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sawParam = sawParam || r.Header.Get("Mcp-Param-Region") == paramSecret
				sawPath = sawPath || strings.Contains(r.URL.Path, upKey)
				inner.ServeHTTP(w, r)
			}))
			defer up.Close()
			h := newHarness(t, up.URL+"/mcp/"+upKey+"/stream", func(c *Config) {
				c.RedactPaths = []*regexp.Regexp{regexp.MustCompile(`^tenant-`)}
				c.UnsafeRecordInClear = tc.inClear
			})
			h.retain, h.noRedaction = tc.retain, tc.inClear
			cs := connect(t, h.srv.URL+"/c/"+clientKey+"/"+tenant+"/mcp", "2026-07-28", nil)
			listAll(t, cs)
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "where", Arguments: map[string]any{"region": paramSecret}}); err != nil {
				t.Fatalf("the call: %v", err)
			}
			cs.Close()
			if !sawParam || !sawPath {
				t.Fatalf("the upstream saw the param header %v, its path key %v: both must be forwarded", sawParam, sawPath)
			}
			reps := h.close()
			requireIntact(t, reps) // digest-only retention verifies incomplete: payloads withheld
			files := bundleBytes(t, reps)
			for _, s := range []string{paramSecret, upKey, clientKey, tenant} {
				n := countIn(files, s)
				if tc.inClear && n == 0 {
					t.Errorf("in clear: %q is not recorded; the test would not see it", s)
				}
				if !tc.inClear && n != 0 {
					for p, b := range files {
						if strings.Contains(string(b), s) {
							t.Errorf("%s holds %q", p, s)
						}
					}
				}
			}
			if !tc.inClear {
				if n := countIn(files, pathMarker); n == 0 {
					t.Error("no path segment is marked redacted")
				}
				if n := countIn(files, `"header_digests":{"mcp-param-region":"sha256:`); n == 0 {
					t.Error("the Mcp-Param-Region header's presence is not recorded")
				}
			}
		})
	}
}

// TestRedactPath: which segments read as credentials.
func TestRedactPath(t *testing.T) {
	p := &Proxy{cfg: Config{RedactPaths: []*regexp.Regexp{regexp.MustCompile(`^acct-\d+$`)}}}
	for in, want := range map[string]string{
		"/mcp":                                  "/mcp",
		"/v1/sse":                               "/v1/sse",
		"/mcp/2025-11-25/streamable":            "/mcp/2025-11-25/streamable",
		"/api/mcp/s/a1b2c3d4e5f6g7h8/mcp":       "/api/mcp/s/[REDACTED:path]/mcp",
		"/mcp/sk-proj-abcdefghijklmnopqrstuvwx": "/mcp/[REDACTED:path]",
		"/mcp/acct-42/tools":                    "/mcp/[REDACTED:path]/tools",
		"/mcp/acct-42x/tools":                   "/mcp/acct-42x/tools",
		"/x/key%3Dabc123def456ghi789/":          "/x/[REDACTED:path]/",
		"/documentation-pages/introduction":     "/documentation-pages/introduction",
	} {
		if got := p.redactPath(in); got != want {
			t.Errorf("redactPath(%q) = %q, want %q", in, got, want)
		}
	}
	p.cfg.UnsafeRecordInClear = true
	if got := p.redactPath("/api/mcp/s/a1b2c3d4e5f6g7h8/mcp"); got != "/api/mcp/s/a1b2c3d4e5f6g7h8/mcp" {
		t.Errorf("in clear: %q", got)
	}
}
