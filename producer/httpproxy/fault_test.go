package httpproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/verify"
)

const callBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"text":"x"}}}`

func post(t *testing.T, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// findings lists a report's finding codes.
func hasFinding(reps map[string]*verify.Report, code verify.Code) bool {
	for _, r := range reps {
		if len(r.Find(code)) > 0 {
			return true
		}
	}
	return false
}

// TestFaultsHonest: a 502, an upstream that cuts the stream mid-event and
// one that refuses connections each leave the call a transport failure
// (unknown outcome), never a response, and the bundle verifies.
func TestFaultsHonest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		status  int
	}{
		{"502", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		}, http.StatusBadGateway},
		{"killed-mid-stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"res")
			w.(http.Flusher).Flush()
			// Kill the connection under the response.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(tc.handler)
			defer up.Close()
			// The fault is the call's: the proxy's own collection, which
			// would meet it first, has its tests (capture_test.go).
			h := newHarness(t, up.URL, func(c *Config) { c.Capture = "never" })
			resp, body := post(t, h.srv.URL, callBody, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, body)
			}
			if strings.Contains(body, `"id":7,"res`) {
				t.Fatal("the partial event was delivered")
			}
			if tc.name == "killed-mid-stream" && !strings.Contains(body, "notifications/progress") {
				t.Fatal("the whole event sent before the cut was lost")
			}
			reps := h.close()
			requireIntact(t, reps)
			a, r, _, tf := total(reps)
			if a != 1 || r != 0 || tf != 1 {
				t.Fatalf("attempts %d responses %d transport failures %d, want 1 0 1", a, r, tf)
			}
		})
	}
	t.Run("connection-refused", func(t *testing.T) {
		up := httptest.NewServer(http.NotFoundHandler())
		url := up.URL
		up.Close()
		h := newHarness(t, url, func(c *Config) { c.Capture = "never" }) // the call's fault, not the collection's
		resp, body := post(t, h.srv.URL, callBody, nil)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "outcome is unknown") {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		reps := h.close()
		requireIntact(t, reps)
		if a, _, _, tf := total(reps); a != 1 || tf != 1 {
			t.Fatalf("attempts %d transport failures %d, want 1 1", a, tf)
		}
	})
}

// fakeTimer fires when the test says.
type fakeTimer struct {
	c chan time.Time
}

func (f *fakeTimer) C() <-chan time.Time { return f.c }
func (f *fakeTimer) Stop() bool          { return true }
func (f *fakeTimer) Reset(time.Duration) {}

// TestStalledStream: an upstream that sends progress and then stalls is
// abandoned when the (injected) idle timer fires: the call's outcome is
// unknown (a timeout), the progress it did send was committed and
// delivered, and the bundle verifies.
func TestStalledStream(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	defer close(release)
	timers := make(chan *fakeTimer, 4)
	h := newHarness(t, up.URL, func(c *Config) {
		c.Capture = "never" // the stall is the call's (capture_test.go has the collection's)
		c.NewTimer = func(time.Duration) Timer {
			ft := &fakeTimer{c: make(chan time.Time, 1)}
			timers <- ft
			return ft
		}
	})
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL, strings.NewReader(callBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	second, _ := br.ReadString('\n')
	if !strings.Contains(first+second, "notifications/progress") {
		t.Fatalf("the progress sent before the stall was not delivered: %q", first+second)
	}
	<-timers         // the wait for the response headers, stopped
	idle := <-timers // the stream's, armed before the first event was delivered
	idle.c <- time.Now()
	if _, err := io.ReadAll(br); err != nil {
		t.Logf("rest of the stream: %v", err)
	}
	reps := h.close()
	requireIntact(t, reps)
	a, r, u, _ := total(reps)
	if a != 1 || r != 0 || u != 1 {
		t.Fatalf("attempts %d responses %d unknown %d, want 1 0 1", a, r, u)
	}
}

// TestHeaderGate: a 2026-07-28 tools/call whose routing headers are missing
// or disagree with its body is refused with HTTP 400 and -32600 naming the
// rule, never forwarded, and committed refused; the bundle verifies.
func TestHeaderGate(t *testing.T) {
	forwarded := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forwarded++ }))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	for _, tc := range []struct {
		hdr  map[string]string
		rule string
	}{
		{map[string]string{"Mcp-Name": "rm_rf"}, "header_mismatch"},
		{map[string]string{"Mcp-Method": ""}, "header_missing"},
		{map[string]string{"MCP-Protocol-Version": "2025-11-25"}, "header_mismatch"},
		{map[string]string{"Mcp-Param-Region": "us"}, "header_unverifiable"},
	} {
		resp, body := post(t, h.srv.URL, callBody, tc.hdr)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "-32600") || !strings.Contains(body, tc.rule) {
			t.Fatalf("%v: status %d body %s, want 400 -32600 naming %s", tc.hdr, resp.StatusCode, body, tc.rule)
		}
	}
	if forwarded != 0 {
		t.Fatalf("%d refused requests reached the upstream", forwarded)
	}
	reps := h.close()
	requireIntact(t, reps)
	if a, _, _, _ := total(reps); a != 0 {
		t.Fatalf("%d attempts recorded for refused requests", a)
	}
	if !hasFinding(reps, verify.CodeFramesRefused) {
		t.Fatal("no refusal reported by verify")
	}
}

// TestTLSUpstream: over TLS with a test CA the leaf's spki and the verified
// chain are recorded; an upstream whose certificate the roots do not
// verify is refused (a transport failure, nothing delivered from it).
func TestTLSUpstream(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewTLSServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer up.Close()
	pool := x509.NewCertPool()
	pool.AddCert(up.Certificate())
	h := newHarness(t, up.URL, func(c *Config) {
		c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	})
	cs := connect(t, h.srv.URL, "2026-07-28", nil)
	listAll(t, cs)
	callEcho(t, cs, "tls")
	cs.Close()
	reps := h.close()
	requireVerified(t, reps)
	want := spki(up.Certificate())
	ok := false
	for _, r := range reps {
		for _, f := range r.Find(verify.CodeProducerObservation) {
			if strings.Contains(f.Detail, want) && strings.Contains(f.Detail, "chain verified") {
				ok = true
			}
		}
	}
	if !ok {
		t.Fatalf("the upstream's spki %s and chain result are not in the verified report", want)
	}

	// The system roots do not know the test CA: refused.
	h2 := newHarness(t, up.URL, func(c *Config) { c.Capture = "never" }) // the call's fault, not the collection's
	resp, body := post(t, h2.srv.URL, callBody, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Fatalf("wrong certificate: status %d body %s", resp.StatusCode, body)
	}
	reps = h2.close()
	requireIntact(t, reps)
	if a, r, _, tf := total(reps); a != 1 || r != 0 || tf != 1 {
		t.Fatalf("attempts %d responses %d transport failures %d, want 1 0 1", a, r, tf)
	}
}

// TestStalledHeaders: an upstream that never answers with headers is
// abandoned when the (injected) timer fires: 502 to the client, and the
// call a transport failure (unknown outcome), never "did not run".
func TestStalledHeaders(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	defer close(release)
	timers := make(chan *fakeTimer, 4)
	h := newHarness(t, up.URL, func(c *Config) {
		c.Capture = "never" // the stall is the call's (capture_test.go has the collection's)
		c.NewTimer = func(time.Duration) Timer {
			ft := &fakeTimer{c: make(chan time.Time, 1)}
			timers <- ft
			return ft
		}
	})
	done := make(chan string)
	go func() {
		resp, body := post(t, h.srv.URL, callBody, nil)
		done <- strconv.Itoa(resp.StatusCode) + " " + body
	}()
	(<-timers).c <- time.Now()
	got := <-done
	if !strings.HasPrefix(got, "502 ") || !strings.Contains(got, "no response headers") {
		t.Fatalf("got %s, want a 502 saying the upstream did not answer", got)
	}
	reps := h.close()
	requireIntact(t, reps)
	if a, r, _, tf := total(reps); a != 1 || r != 0 || tf != 1 {
		t.Fatalf("attempts %d responses %d transport failures %d, want 1 0 1", a, r, tf)
	}
}

// TestParamHeaders: a tool whose schema mirrors an argument into a header
// (x-mcp-header, SEP-2243). The Go SDK client sets Mcp-Param-Region from
// the declaration it listed through the proxy, and the call passes the
// header gate; a request whose Mcp-Param-Region disagrees with its body is
// refused header_mismatch, and one that leaves it out header_missing.
func TestParamHeaders(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "params", Version: "1"}, nil)
	var seen []string
	server.AddTool(&mcp.Tool{Name: "where", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Param-Region"); v != "" {
			seen = append(seen, v)
		}
		inner.ServeHTTP(w, r)
	}))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	cs := connect(t, h.srv.URL, "2026-07-28", nil)
	listAll(t, cs)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "where", Arguments: map[string]any{"region": "eu-west"}}); err != nil {
		t.Fatalf("a call with its mirrored header: %v", err)
	}
	cs.Close()
	if len(seen) != 1 || seen[0] != "eu-west" {
		t.Fatalf("upstream saw Mcp-Param-Region %q, want the client's eu-west", seen)
	}
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"where","arguments":{"region":"eu-west"}}}`
	for hv, rule := range map[string]string{"us-east": "header_mismatch", "": "header_missing"} {
		resp, out := post(t, h.srv.URL, body, map[string]string{"Mcp-Name": "where", "Mcp-Param-Region": hv})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, rule) {
			t.Fatalf("Mcp-Param-Region %q: status %d %s, want 400 %s", hv, resp.StatusCode, out, rule)
		}
	}
	if len(seen) != 1 {
		t.Fatalf("a refused request reached the upstream (%q)", seen)
	}
	reps := h.close()
	requireVerified(t, reps)
	if a, r, _, _ := total(reps); a != 1 || r != 1 {
		t.Fatalf("attempts %d responses %d, want 1 1", a, r)
	}
}

// TestTooLargeRequest: a POST body over the gate's limit is never
// forwarded; it is committed refused by its digest and length (every
// client frame is accounted for) and answered 413.
func TestTooLargeRequest(t *testing.T) {
	forwarded := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forwarded++ }))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("a", int(maxBody)) + `"}}}`
	resp, body := post(t, h.srv.URL, big, nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "frame_too_large") {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	if forwarded != 0 {
		t.Fatal("an oversized request reached the upstream")
	}
	reps := h.close()
	requireIntact(t, reps)
	if !hasFinding(reps, verify.CodeFramesRefused) {
		t.Fatal("the refused frame is not reported")
	}
}

// TestCallTimeoutLateResponse: a call with no response within the call
// timeout (an injected timer) gets a timeout observation, its outcome
// unknown; the response that comes later is still committed, as a late
// response, and delivered.
func TestCallTimeoutLateResponse(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n")
	}))
	defer up.Close()
	timers := make(chan *fakeTimer, 4)
	h := newHarness(t, up.URL, func(c *Config) {
		c.CallTimeout = time.Second
		c.Capture = "never" // the timers counted are the call's
		c.NewTimer = func(time.Duration) Timer {
			ft := &fakeTimer{c: make(chan time.Time, 1)}
			timers <- ft
			return ft
		}
	})
	timedOut := make(chan struct{})
	h.proxy.onTimeout = func() { close(timedOut) }
	done := make(chan string)
	go func() {
		_, body := post(t, h.srv.URL, callBody, nil)
		done <- body
	}()
	(<-timers).c <- time.Now() // the call's timer
	<-timedOut
	close(release)
	if body := <-done; !strings.Contains(body, `"result"`) {
		t.Fatalf("the late response was not delivered: %q", body)
	}
	reps := h.close()
	requireIntact(t, reps)
	a, r, u, _ := total(reps)
	if a != 1 || r != 1 || u != 0 {
		t.Fatalf("attempts %d responses %d unknown %d, want 1 1 0 (a late response counts as the response)", a, r, u)
	}
	for d := range reps {
		j, err := os.ReadFile(filepath.Join(d, "transcript.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		ti, li := bytes.Index(j, []byte(`"kind":"timeout"`)), bytes.Index(j, []byte(`"kind":"late_response"`))
		if ti < 0 || li < ti {
			t.Fatalf("want a timeout observation, then a late_response:\n%s", j)
		}
	}
}
