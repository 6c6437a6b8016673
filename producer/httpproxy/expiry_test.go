package httpproxy

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// manualSched is an AfterFunc whose functions run when the test says.
type manualSched struct {
	mu  sync.Mutex
	fns []*schedFn
}

type schedFn struct {
	f       func()
	stopped bool
}

func (s *manualSched) after(_ time.Duration, f func()) func() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &schedFn{f: f}
	s.fns = append(s.fns, e)
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		was := !e.stopped
		e.stopped = true
		return was
	}
}

// fire runs every function scheduled and not stopped so far; it returns
// how many ran.
func (s *manualSched) fire() int {
	s.mu.Lock()
	fns := s.fns
	s.fns = nil
	s.mu.Unlock()
	n := 0
	for _, e := range fns {
		s.mu.Lock()
		run := !e.stopped
		e.stopped = true
		s.mu.Unlock()
		if run {
			e.f()
			n++
		}
	}
	return n
}

// TestSessionIdleExpiry: a 2025-11-25 session whose client went away
// without a DELETE (no exchange open, no GET stream) is sealed once it has
// been unused for SessionIdle, not before, and the bundle verifies; a
// later request with its session id is still forwarded and recorded, in
// the stateless bundle.
func TestSessionIdleExpiry(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer up.Close()
	var now atomic.Int64
	base := time.Unix(1_780_000_000, 0)
	sched := &manualSched{}
	h := newHarness(t, up.URL, func(c *Config) {
		c.SessionIdle = time.Hour
		c.Clock = func() time.Time { return base.Add(time.Duration(now.Load())) }
		c.AfterFunc = sched.after
	})
	legacy := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "", "Mcp-Name": ""}
	resp, _ := post(t, h.srv.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"gone","version":"1"}}}`, legacy)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, session)
	}
	legacy["Mcp-Session-Id"] = session
	post(t, h.srv.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, legacy)
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"before"}}}`
	if resp, body := post(t, h.srv.URL, call, legacy); resp.StatusCode != http.StatusOK || !strings.Contains(body, "before") {
		t.Fatalf("tools/call: %s %s", resp.Status, body)
	}
	sealed := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.sealed)
	}

	// Half the idle time: checked, still open, checked again later.
	now.Store(int64(30 * time.Minute))
	if n := sched.fire(); n != 1 {
		t.Fatalf("%d expiry checks scheduled, want 1", n)
	}
	if sealed() != 0 {
		t.Fatal("a session unused for half its idle time was sealed")
	}
	// The full idle time: sealed.
	now.Store(int64(61 * time.Minute))
	if n := sched.fire(); n != 1 {
		t.Fatalf("%d expiry checks rescheduled, want 1", n)
	}
	if sealed() != 1 {
		t.Fatalf("%d bundles sealed after an hour unused, want the session's", sealed())
	}

	// The client comes back: forwarded, and recorded.
	again := strings.Replace(call, "before", "after", 1)
	if resp, body := post(t, h.srv.URL, strings.Replace(again, `"id":2`, `"id":3`, 1), legacy); resp.StatusCode != http.StatusOK || !strings.Contains(body, "after") {
		t.Fatalf("tools/call after expiry: %s %s", resp.Status, body)
	}
	reps := h.close()
	requireIntact(t, reps)
	if len(reps) != 2 {
		t.Fatalf("%d bundles, want the expired session's and the stateless one", len(reps))
	}
	for d, rep := range reps {
		want := int64(1)
		if rep.Counts.Attempts != want || rep.Counts.Responses != want {
			t.Errorf("%s: %d attempts, %d responses, want 1 and 1", filepath.Base(d), rep.Counts.Attempts, rep.Counts.Responses)
		}
	}
}

// A session in use is never expired: a check that finds an exchange open
// schedules nothing, and the exchange's end schedules the next.
func TestSessionInUseNotExpired(t *testing.T) {
	sched := &manualSched{}
	p := &Proxy{cfg: Config{SessionIdle: time.Minute, Clock: time.Now, AfterFunc: sched.after}, sessions: map[string]*bundle{}}
	b := &bundle{p: p, session: "s", refs: 1, retired: make(chan struct{})}
	p.sessions["s"] = b
	p.expire(b)
	if b.retiring || len(sched.fns) != 0 {
		t.Fatalf("retiring %v, %d checks scheduled while an exchange is open", b.retiring, len(sched.fns))
	}
	b.release()
	if len(sched.fns) != 1 || b.lastUsed.IsZero() {
		t.Fatalf("%d checks scheduled at the exchange's end, last use %v", len(sched.fns), b.lastUsed)
	}
	if !b.acquire() {
		t.Fatal("acquire refused")
	}
	if sched.fire() != 1 || b.retiring || p.sessions["s"] != b {
		t.Fatalf("a session in use was expired")
	}
}
