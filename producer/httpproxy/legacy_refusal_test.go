package httpproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
)

// reviewUpstream is a hostile HTTP+SSE server driven by the test: its
// stream writes the endpoint event, then whatever the test sends on
// events; every POST is answered 202 and its body kept.
type reviewUpstream struct {
	srv    *httptest.Server
	events chan string
	mu     sync.Mutex
	posts  [][]byte
}

func newReviewUpstream(t *testing.T) *reviewUpstream {
	u := &reviewUpstream{events: make(chan string, 64)}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			serveLegacyStream(w, r, "secret-session", u.events)
			return
		}
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.posts = append(u.posts, body)
		u.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// openLegacy opens the client's stream through the proxy and returns its
// reader and the proxy's endpoint (a URL to POST to).
func openLegacy(t *testing.T, h *harness) (*http.Response, *mcpwire.EventReader, string) {
	t.Helper()
	resp, err := http.Get(h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	er := mcpwire.NewEventReader(resp.Body)
	ev, err := er.Next()
	if err != nil || ev.Name != "endpoint" {
		t.Fatalf("first event %q (%v), want the proxy's endpoint", ev.Raw, err)
	}
	return resp, er, h.srv.URL + string(ev.Data)
}

// nextData reads the next event carrying data, within a deadline.
func nextData(t *testing.T, er *mcpwire.EventReader) string {
	t.Helper()
	type res struct {
		ev  mcpwire.Event
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			ev, err := er.Next()
			if ev.Data != nil || err != nil {
				ch <- res{ev, err}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.ev.Data == nil {
			t.Fatalf("stream ended: %v", r.err)
		}
		return string(r.ev.Data)
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return ""
	}
}

// The proxy's own answer to a client frame the gate refuses is a
// JSON-RPC error under the refused frame's id, and on the HTTP+SSE
// transport it goes on the client's stream. When the refused frame is the
// client's *response* to a server request (server ids and client ids are
// separate namespaces, both usually starting at small integers), that id
// is the id of one of the client's own open requests: the client takes
// the proxy's error as the answer to its tools/call. The call stays open
// at the proxy, so the upstream's real answer is later delivered too and
// committed as the call's response: the bundle said the client received
// "truth" for the call, the client acted on the proxy's refusal error
// (found by review). Now a response-shaped frame gets no JSON-RPC answer:
// its POST fails 400 and nothing goes on the stream.
func TestLegacyRefusedResponseNotAnswered(t *testing.T) {
	up := newReviewUpstream(t)
	h := newHarness(t, up.srv.URL, nil)
	resp, er, ep := openLegacy(t, h)
	defer resp.Body.Close()

	// the client's call, id 1: the upstream accepts it and answers later
	if pr, _ := post(t, ep, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil); pr.StatusCode != http.StatusAccepted {
		t.Fatalf("call POST answered %d", pr.StatusCode)
	}
	// the server asks the client something under its own id 1 ...
	up.events <- "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n"
	if d := nextData(t, er); !strings.Contains(d, `"method":"ping"`) {
		t.Fatalf("stream carried %s, want the server's ping", d)
	}
	// ... and the client's answer is a frame the gate refuses (here: both
	// result and error)
	// It is not answered on the stream: the POST itself fails (400).
	if pr, _ := post(t, ep, `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, nil); pr.StatusCode != http.StatusBadRequest {
		t.Fatalf("response POST answered %d, want 400", pr.StatusCode)
	}
	// now the upstream answers the call
	up.events <- "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"truth\"}]}}\n\n"

	// What the client receives next under id 1 while its call 1 is open
	// is the call's answer, the one the bundle binds.
	var first struct {
		ID     json.RawMessage `json:"id"`
		Result *struct{}       `json:"result"`
	}
	got := nextData(t, er)
	_ = json.Unmarshal([]byte(got), &first)
	up.events <- ""
	resp.Body.Close()
	reps := h.close()
	files := bundleBytes(t, reps)
	_, responses, _, _ := total(reps)
	if string(first.ID) != "1" || first.Result == nil || responses != 1 || !bytes.Contains(bytes.Join(mapValues(files), nil), []byte("truth")) {
		t.Fatalf("the client's open call 1 received %s first; the bundle has %d responses: want the upstream's answer, bound", got, responses)
	}
}

func mapValues(m map[string][]byte) [][]byte {
	var out [][]byte
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
