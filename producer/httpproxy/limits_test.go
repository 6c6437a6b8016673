package httpproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

var legacyHdr = map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "", "Mcp-Name": ""}

// openSessions counts the session bundles open (not retiring).
func openSessions(p *Proxy) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for b := range p.live {
		b.mu.Lock()
		if !b.demux && !b.retiring {
			n++
		}
		b.mu.Unlock()
	}
	return n
}

// TestSessionFlood: a client loops initialize without DELETE; with
// MaxSessions 3 no more than 3 session bundles are ever open (each new one
// seals the least recently used), a Go SDK client that comes after is
// served, and every bundle sealed verifies.
func TestSessionFlood(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer up.Close()
	h := newHarness(t, up.URL, func(c *Config) { c.MaxSessions = 3 })
	for i := range 10 {
		resp, _ := post(t, h.srv.URL, initBody, legacyHdr)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize %d: %s", i, resp.Status)
		}
		if n := openSessions(h.proxy); n > 3 {
			t.Fatalf("after initialize %d: %d session bundles open, want at most 3", i, n)
		}
		h.mu.Lock()
		sealed := len(h.sealed)
		h.mu.Unlock()
		if want := max(0, i+1-3); sealed != want {
			t.Fatalf("after initialize %d: %d sealed, want %d", i, sealed, want)
		}
	}
	cs := connect(t, h.srv.URL, "2025-11-25", nil)
	listAll(t, cs)
	callEcho(t, cs, "still served")
	cs.Close()
	reps := h.close()
	requireIntact(t, reps)
	if len(reps) != 11 {
		t.Fatalf("%d bundles, want 11 (10 abandoned sessions and the client's)", len(reps))
	}
	if a, r, _, _ := total(reps); a != 1 || r != 1 {
		t.Fatalf("attempts %d responses %d, want 1 1", a, r)
	}
}

// TestSessionCapBusy: when every session at the cap is in use (Go SDK
// clients hold their GET streams open), the least recently used one is
// retired anyway (its stream ends, it is sealed): the new client is served.
func TestSessionCapBusy(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer up.Close()
	sealedc := make(chan string, 8)
	h := newHarness(t, up.URL, func(c *Config) {
		c.MaxSessions = 2
		prev := c.Sealed
		c.Sealed = func(d string, err error) { prev(d, err); sealedc <- d }
	})
	first := connect(t, h.srv.URL, "2025-11-25", nil)
	listAll(t, first)
	second := connect(t, h.srv.URL, "2025-11-25", nil)
	listAll(t, second)
	third := connect(t, h.srv.URL, "2025-11-25", nil)
	listAll(t, third)
	callEcho(t, third, "served")
	<-sealedc // the first session, once its stream ended
	if n := openSessions(h.proxy); n > 2 {
		t.Fatalf("%d session bundles open, want at most 2", n)
	}
	first.Close()
	second.Close()
	third.Close()
	reps := h.close()
	requireIntact(t, reps)
}

// TestInflightBudget: with a 4 KiB in-flight body budget, a 3 KiB call held
// in flight leaves no room for a 2 KiB one (with a Content-Length) or a
// chunked one: each is answered 503 with Retry-After, never forwarded, and
// recorded; once the first call ends, the same request is served, and no
// budget is left held.
func TestInflightBudget(t *testing.T) {
	var calls atomic.Int64
	url, started, release := blockingUpstream(t)
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		proxyTo(w, r, url)
	}))
	defer counted.Close()
	h := newHarness(t, counted.URL, func(c *Config) { c.MaxInflightBytes = 4096 })
	big := strings.Replace(blockCall, `"arguments":{}`, `"arguments":{"pad":"`+strings.Repeat("a", 3000)+`"}`, 1)
	small := strings.Replace(blockCall, `"arguments":{}`, `"arguments":{"pad":"`+strings.Repeat("b", 2000)+`"}`, 1)
	done := make(chan int, 1)
	go func() {
		code, _ := rawPost(t, h.srv.URL, big, "")
		done <- code
	}()
	<-started
	for _, chunked := range []bool{false, true} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL, strings.NewReader(small))
		if chunked {
			req, _ = http.NewRequest(http.MethodPost, h.srv.URL, io.MultiReader(strings.NewReader(small)))
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), ruleInflightBudget) {
			t.Fatalf("chunked %v: status %d Retry-After %q body %s, want 503 with Retry-After naming %s", chunked, resp.StatusCode, resp.Header.Get("Retry-After"), b, ruleInflightBudget)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests reached the upstream, want the first call's", n)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the call in flight: status %d", code)
	}
	if code, body := rawPost(t, h.srv.URL, small, ""); code != http.StatusOK || !strings.Contains(body, `"done"`) {
		t.Fatalf("after the budget freed: %d %s", code, body)
	}
	if n := h.proxy.budget.inUse(); n != 0 {
		t.Fatalf("%d bytes of budget still held", n)
	}
	reps := h.close()
	requireIntact(t, reps)
	if n := countIn(bundleBytes(t, reps), `"rule":"inflight_budget"`); n != 2 {
		t.Fatalf("%d inflight_budget lines, want 2", n)
	}
}

// proxyTo relays a request to url (a counting hop in front of an upstream).
func proxyTo(w http.ResponseWriter, r *http.Request, url string) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, url, r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// TestErrorsCarryNoPaths: a bundle that cannot be opened (its error names
// a path) is answered 503 without the error's text; the operator is told.
func TestErrorsCarryNoPaths(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	var told atomic.Value
	h := newHarness(t, up.URL, func(c *Config) {
		c.Open = func(string) (*producer.Recorder, error) {
			return nil, fmt.Errorf("create /home/operator/private/bundles/x.trace: %w", errors.New("too many open files"))
		}
		c.Failed = func(err error) { told.Store(err.Error()) }
	})
	for _, body := range []string{callBody, strings.Repeat(" ", 70<<20)} {
		resp, b := post(t, h.srv.URL, body, nil)
		if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(b, "/home/operator") || strings.Contains(b, "open files") {
			t.Fatalf("status %d body %s: want 503 without the path", resp.StatusCode, b)
		}
	}
	if s, _ := told.Load().(string); !strings.Contains(s, "/home/operator") {
		t.Fatalf("the operator was told %q", s)
	}
	if err := h.proxy.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDeclaredLengthHoldsNothing: a client that declares a body filling
// the whole budget and sends one byte of it holds only what arrived (one
// read chunk), not what it declared: another client's request is served.
func TestDeclaredLengthHoldsNothing(t *testing.T) {
	url, started, release := blockingUpstream(t)
	close(release)
	h := newHarness(t, url, func(c *Config) { c.MaxInflightBytes = 1 << 20 })
	read := make(chan struct{}, 64)
	h.proxy.onRead = func() {
		select {
		case read <- struct{}{}:
		default:
		}
	}
	pr, pw := io.Pipe()
	// Ended on every path (a failure too): the server's Close waits for it.
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL, pr)
	req.ContentLength = 1<<20 - 1
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if _, err := pw.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	<-read // the proxy read it: the body's buffer and its charge are taken
	if n := h.proxy.budget.inUse(); n > readChunk {
		t.Fatalf("a client that sent 1 byte holds %d bytes of budget", n)
	}
	if code, body := rawPost(t, h.srv.URL, blockCall, ""); code != http.StatusOK || !strings.Contains(body, `"done"`) {
		t.Fatalf("another client: %d %s", code, body)
	}
	<-started
	pw.CloseWithError(io.ErrUnexpectedEOF)
	<-errc
	requireIntact(t, h.close())
}

// TestBodyTimeout: a client that sends part of a body and stalls holds a
// connection only until BodyTimeout: it is answered 408, recorded as a
// refused request (body_timeout) naming no frame, and nothing reaches the
// upstream. The test waits on the proxy's answer, not on a clock.
func TestBodyTimeout(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer up.Close()
	h := newHarness(t, up.URL, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"", strings.TrimPrefix(h.srv.URL, "http://"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "body_timeout") {
		t.Fatalf("status %d body %s, want 408 naming body_timeout", resp.StatusCode, body)
	}
	// The same proxy still serves a client that sends its body.
	if resp, _ := post(t, h.srv.URL, callBody, nil); resp.StatusCode == http.StatusRequestTimeout {
		t.Fatal("a whole body was refused too")
	}
	reps := h.close()
	found := false
	for dir := range reps {
		data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
		if err != nil {
			t.Fatal(err)
		}
		found = found || strings.Contains(string(data), `"rule":"body_timeout"`)
	}
	if !found {
		t.Fatal("no refused line with rule body_timeout was recorded")
	}
	if reached.Load() != 1 {
		t.Fatalf("the upstream got %d requests, want only the whole one", reached.Load())
	}
}
