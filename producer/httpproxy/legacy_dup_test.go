package httpproxy

import (
	"net/http"
	"strings"
	"testing"
)

// A second request under an id already open in the session is refused,
// and the refusal is written on the stream under that same id: a client
// takes it as the answer to the first, open request, whose real answer is
// then delivered and committed as its response as well.
func TestLegacyDuplicateIDRefusedUnderNull(t *testing.T) {
	up := newReviewUpstream(t)
	h := newHarness(t, up.srv.URL, nil)
	resp, er, ep := openLegacy(t, h)
	defer resp.Body.Close()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	if pr, _ := post(t, ep, call, nil); pr.StatusCode != http.StatusAccepted {
		t.Fatalf("call POST answered %d", pr.StatusCode)
	}
	if pr, _ := post(t, ep, strings.Replace(call, `"arguments":{}`, `"arguments":{"again":true}`, 1), nil); pr.StatusCode != http.StatusAccepted {
		t.Fatalf("second POST answered %d", pr.StatusCode)
	}
	up.events <- "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"truth\"}]}}\n\n"
	a, b := nextData(t, er), nextData(t, er)
	up.events <- ""
	resp.Body.Close()
	reps := h.close()
	_, responses, _, _ := total(reps)
	if strings.Contains(a, `"id":7`) && strings.Contains(a, `"error"`) && strings.Contains(b, "truth") && responses == 1 {
		t.Fatalf("two answers under id 7 reached the client (%s, then %s); the bundle records the second as the first call's response", a, b)
	}
}
