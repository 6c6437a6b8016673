package httpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest/tssse"
	"github.com/tracectl/tracectl/mcpwire"
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
	// capture auto, the default: the proxy does not collect over this
	// transport, and the client's own listing is bound
	h := newHarness(t, up.URL, func(c *Config) { c.Capture = "auto" })
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

// The TypeScript SDK v1's HTTP+SSE server (SSEServerTransport: the stream
// at /sse, messages POSTed to /messages?sessionId=…, another path) behind
// the proxy, with the TypeScript SDK v1's HTTP+SSE client and with the Go
// SDK's: each session verifies in its own bundle, every call the server
// ran is an attempt with its response.
func TestLegacySSETypeScript(t *testing.T) {
	for _, client := range []string{"ts-v1", "go-sdk"} {
		t.Run(client, func(t *testing.T) {
			srv := tssse.StartServer(t)
			h := newHarness(t, srv.URL, nil)
			var want []string
			switch client {
			case "ts-v1":
				evs := tssse.RunClient(t, h.srv.URL+"/sse")
				for _, e := range evs {
					if e.Event == "echo" {
						want = append(want, e.Text)
					}
				}
				if len(want) != 2 {
					t.Fatalf("client events %+v, want two echoes", evs)
				}
			case "go-sdk":
				cs := connectSSE(t, h.srv.URL+"/sse")
				if n := listAll(t, cs); n != 1 {
					t.Fatalf("listed %d tools, want 1", n)
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "go over sse"}})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, res.Content[0].(*mcp.TextContent).Text)
				if err := cs.Close(); err != nil {
					t.Fatal(err)
				}
			}
			reps := h.close()
			sse := map[string]*verify.Report{}
			for d, rep := range reps {
				if strings.HasPrefix(filepath.Base(d), kindSSE+"-") {
					sse[d] = rep
				}
			}
			if len(sse) != 1 {
				t.Fatalf("%d HTTP+SSE bundles, want 1", len(sse))
			}
			requireVerified(t, sse)
			attempts, responses, _, _ := total(sse)
			if got := srv.Executed(); !slices.Equal(got, want) || attempts != int64(len(want)) || responses != attempts {
				t.Fatalf("server ran %q, client got %q; bundle: %d attempts, %d responses", got, want, attempts, responses)
			}
		})
	}
}

// rawLegacy is a hostile HTTP+SSE server: it speaks the transport
// (endpoint event, 202 to each POST, answers on the stream) and answers
// each tools/call as mode says, logging the calls it received.
type rawLegacy struct {
	mode   string
	events chan string
	calls  atomic.Int64
}

// serveLegacyStream serves a test upstream's HTTP+SSE stream: the
// endpoint event naming /msg?s=SESSION, then each event sent on events,
// until "" (the stream ends) or the client goes away.
func serveLegacyStream(w http.ResponseWriter, r *http.Request, session string, events <-chan string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "event: endpoint\ndata: /msg?s="+session+"\n\n")
	w.(http.Flusher).Flush()
	for {
		select {
		case ev := <-events:
			if ev == "" {
				return // end the stream
			}
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func newRawLegacy(t *testing.T, mode string) *httptest.Server {
	u := &rawLegacy{mode: mode, events: make(chan string, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			serveLegacyStream(w, r, "secret-session", u.events)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		w.WriteHeader(http.StatusAccepted)
		msg := func(id, result string) string {
			return "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":" + result + "}\n\n"
		}
		id := string(m.ID)
		switch m.Method {
		case "initialize":
			u.events <- msg(id, `{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"raw-legacy","version":"1"}}`)
		case "tools/list":
			u.events <- msg(id, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			u.calls.Add(1)
			lie, truth := `{"content":[{"type":"text","text":"lie"}]}`, `{"content":[{"type":"text","text":"truth"}]}`
			switch u.mode {
			case "id-twin":
				u.events <- msg(`"`+id+`"`, lie)
				u.events <- msg(id, truth)
			case "second-response":
				u.events <- msg(id, truth)
				u.events <- msg(id, lie)
			case "event-name":
				u.events <- "event: other\n" + msg(id, lie)[len("event: message\n"):]
				u.events <- msg(id, truth)
			case "stream-ends":
				u.events <- ""
			default:
				u.events <- msg(id, truth)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A hostile HTTP+SSE server cannot make the bundle record what the client
// did not act on: an id twin, an answer in an event other readers skip,
// and a stream that ends with the call open each leave the Go SDK client
// with the proxy's error and the bundle with a transport failure; a
// second answer is not delivered. Every bundle verifies, and none holds
// the upstream's endpoint.
func TestLegacySSEHostileServer(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		text  string // the result the client gets; "" an error
		code  int64  // the error's code
		tfail int64
	}{
		{"id-twin", "", codeResponseRefused, 1},
		{"event-name", "", codeResponseRefused, 1},
		{"second-response", "truth", 0, 0},
		{"stream-ends", "", codeTransportFailure, 1},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			up := newRawLegacy(t, tc.mode)
			h := newHarness(t, up.URL, nil)
			cs := connectSSE(t, h.srv.URL)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
			var got string
			if err == nil {
				got = res.Content[0].(*mcp.TextContent).Text
			}
			var werr *jsonrpc.Error
			switch {
			case tc.text != "" && got != tc.text:
				t.Fatalf("client got %q (%v), want %q", got, err, tc.text)
			case tc.mode == "stream-ends" && err != nil && !errors.As(err, &werr):
				// The proxy writes -32092 before it ends the stream, but
				// the Go SDK's SSE client may see the end first (its
				// reader selects between the message and the close), and
				// fails the call with the connection's error: no result
				// either way.
			case tc.text == "" && (!errors.As(err, &werr) || werr.Code != tc.code):
				t.Fatalf("client got %q, error %v; want the proxy's error %d", got, err, tc.code)
			}
			_ = cs.Close()
			reps := h.close()
			requireIntact(t, reps)
			_, responses, _, tf := total(reps)
			if tf != tc.tfail || responses != 1-tc.tfail {
				t.Fatalf("%d transport failures, %d responses; want %d and %d", tf, responses, tc.tfail, 1-tc.tfail)
			}
			if n := countIn(bundleBytes(t, reps), "secret-session"); n != 0 {
				t.Fatalf("the upstream's endpoint is in the bundle %d times", n)
			}
		})
	}
}

// A call the policy denies over HTTP+SSE never reaches the server; the
// client reads the denial on its stream (a legacy client reads no POST
// body), and the allowed call runs.
func TestLegacySSEDenied(t *testing.T) {
	srv := tssse.StartServer(t)
	h := newHarness(t, srv.URL, nil, withPolicy(policyYAML, ""))
	cs := connectSSE(t, h.srv.URL+"/sse")
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "forbidden"}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32094 || !strings.Contains(werr.Message+string(werr.Data), "no-forbidden") {
		t.Fatalf("denied call: %v; want -32094 naming the rule", err)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "fine"}}); err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
	reps := h.close()
	requireIntact(t, reps)
	if got := srv.Executed(); !slices.Equal(got, []string{"fine"}) {
		t.Fatalf("the server ran %q, want only the allowed call", got)
	}
}

// When the upstream ends the stream with a call open, the proxy answers
// that call on the client's stream (-32092) before it ends it too, and
// the call is a transport failure: read by a raw client, which reads the
// stream in order.
func TestLegacySSEStreamEndsAnswered(t *testing.T) {
	up := newRawLegacy(t, "stream-ends")
	h := newHarness(t, up.URL, nil)
	resp, err := http.Get(h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	er := mcpwire.NewEventReader(resp.Body)
	ev, err := er.Next()
	if err != nil || ev.Name != "endpoint" || !strings.HasPrefix(string(ev.Data), "?"+legacyParam+"=") {
		t.Fatalf("first event %q (%v), want the proxy's endpoint", ev.Raw, err)
	}
	pr, _ := post(t, h.srv.URL+string(ev.Data), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil)
	if pr.StatusCode != http.StatusAccepted {
		t.Fatalf("POST answered %d, want 202", pr.StatusCode)
	}
	var answers []string
	for {
		ev, err := er.Next()
		if ev.Data != nil {
			answers = append(answers, string(ev.Data))
		}
		if err != nil {
			break
		}
	}
	if len(answers) != 1 || !strings.Contains(answers[0], `"id":5`) || !strings.Contains(answers[0], "-32092") {
		t.Fatalf("the stream carried %q, want the proxy's -32092 for id 5", answers)
	}
	reps := h.close()
	requireIntact(t, reps)
	if _, _, _, tf := total(reps); tf != 1 {
		t.Fatalf("%d transport failures, want 1", tf)
	}
}
