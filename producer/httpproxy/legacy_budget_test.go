package httpproxy

import (
	"net/http"
	"strings"
	"testing"
)

// The in-flight budget bounds the request bodies held in memory
// (spec/http.md, Limits: "Memory stays bounded by the budget, not by what
// clients send"). On the HTTP+SSE transport a forwarded request stays in
// the session's table of open requests, body and all, until its answer
// comes on the stream, but its charge is given back when its POST ends:
// a client (or a slow upstream) keeps up to 4096 bodies of up to 64 MiB
// each per session held, uncharged. Now an open request keeps its charge
// until it leaves the table: POSTs past the budget are refused 503.
func TestLegacyOpenRequestsHoldBudget(t *testing.T) {
	up := newReviewUpstream(t)
	const budgetBytes = 256 << 10
	h := newHarness(t, up.srv.URL, func(c *Config) { c.MaxInflightBytes = budgetBytes })
	resp, _, ep := openLegacy(t, h)
	defer resp.Body.Close()
	pad := strings.Repeat("a", 100<<10)
	accepted, refused := 0, 0
	for i := range 8 {
		body := `{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"` + pad + `"}}}`
		switch pr, _ := post(t, ep, body, nil); pr.StatusCode {
		case http.StatusAccepted:
			accepted++
		case http.StatusServiceUnavailable:
			// Over the budget the open requests still hold: refused,
			// to be retried (Retry-After), never held uncharged.
			if pr.Header.Get("Retry-After") == "" {
				t.Errorf("POST %d: 503 without Retry-After", i)
			}
			refused++
		default:
			t.Fatalf("POST %d answered %d", i, pr.StatusCode)
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d POSTs accepted, %d refused: want the budget to take some and refuse the rest", accepted, refused)
	}
	var held int64
	h.proxy.mu.Lock()
	for _, b := range h.proxy.sessions {
		if b.legacy == nil {
			continue
		}
		b.legacy.mu.Lock()
		for _, x := range b.legacy.open {
			held += int64(cap(x.body))
		}
		b.legacy.mu.Unlock()
	}
	h.proxy.mu.Unlock()
	inUse := h.proxy.budget.inUse()
	up.events <- ""
	resp.Body.Close()
	h.close()
	if held > budgetBytes {
		t.Fatalf("the session holds %d bytes of request bodies in its open requests, over the in-flight budget of %d (charged now: %d)", held, budgetBytes, inUse)
	}
}
