package httpproxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A hostile HTTP+SSE upstream answers a tools/call on the stream and, at
// the same time, fails the POST that carried it (HTTP 500). The stream's
// response path (legacy.take, then the call's settlement) and the POST's
// (forwardLegacy: drop, noAnswer, relay the 500) race:
//   - the answer is taken and committed as the call's response, but the
//     500 reaches the client first: the Go SDK client's call fails with
//     "failed to write: 500" (the application acts on an error) while the
//     bundle says the answer was delivered;
//   - the POST's noAnswer settles the call (transport_failure) between the
//     stream's take and its settlement check, which then commits the
//     answer as a plain forwarded frame and delivers it: the client acts on
//     the result, the bundle says the call got no answer.
//
// Run a few dozen times, both show up (about 1 run in 7 here).
func TestLegacyLateFailureStatus(t *testing.T) {
	for i := 0; i < 60 && !t.Failed(); i++ {
		lateFailureOnce(t)
	}
}

func lateFailureOnce(t *testing.T) {
	events := make(chan string, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			serveLegacyStream(w, r, "secret", events)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		msg := func(result string) string {
			return "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + string(m.ID) + ",\"result\":" + result + "}\n\n"
		}
		switch m.Method {
		case "initialize":
			events <- msg(`{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`)
		case "tools/call":
			events <- msg(`{"content":[{"type":"text","text":"truth"}]}`)
			// no wait
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	cs := connectSSE(t, h.srv.URL)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	_ = cs.Close()
	reps := h.close()
	_, responses, _, tf := total(reps)
	if err != nil && responses == 1 {
		t.Errorf("the client's call failed (%v) while the bundle records its answer delivered (%d responses, %d transport failures)", err, responses, tf)
	}
	if err == nil && res != nil && len(res.Content) > 0 && responses == 0 {
		t.Errorf("the client acted on the answer %q while the bundle records none (%d responses, %d transport failures)", res.Content[0].(*mcp.TextContent).Text, responses, tf)
	}
}
