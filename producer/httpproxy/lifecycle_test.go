package httpproxy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/producer"
)

// TestNoEmptyStatelessBundle: a proxy that starts and stops opens no
// bundle; 2025-11-25 session traffic (the Go SDK client: initialize, its
// GET stream, calls, DELETE) opens only its session's bundle; the first
// sessionless request opens the stateless bundle.
func TestNoEmptyStatelessBundle(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer up.Close()
	var mu sync.Mutex
	var kinds []string
	opened := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(kinds)
	}
	mod := func(c *Config) {
		open := c.Open
		c.Open = func(kind string) (*producer.Recorder, error) {
			mu.Lock()
			kinds = append(kinds, kind)
			mu.Unlock()
			return open(kind)
		}
	}

	idle := newHarness(t, up.URL, mod)
	if err := idle.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	if k := opened(); len(k) != 0 {
		t.Fatalf("a proxy without traffic opened %v", k)
	}

	h := newHarness(t, up.URL, mod)
	cs := connect(t, h.srv.URL, "2025-11-25", nil)
	listAll(t, cs)
	callEcho(t, cs, "session")
	cs.Close()
	if k := opened(); !slices.Equal(k, []string{kindSession}) {
		t.Fatalf("session traffic opened %v, want one session bundle", k)
	}
	post(t, h.srv.URL, callBody, nil) // sessionless
	if k := opened(); !slices.Equal(k, []string{kindSession, kindStateless}) {
		t.Fatalf("after a sessionless request: %v, want the session's and the stateless bundle", k)
	}
	requireIntact(t, h.close())
}
