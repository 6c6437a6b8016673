package httpproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// listLog counts the tools/list requests an upstream received, by the
// Authorization header they carried, and remembers their session ids.
type listLog struct {
	mu       sync.Mutex
	byAuth   map[string]int
	sessions []string
	ids      []string
}

func (l *listLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/list" {
				l.mu.Lock()
				if l.byAuth == nil {
					l.byAuth = map[string]int{}
				}
				l.byAuth[r.Header.Get("Authorization")]++
				l.sessions = append(l.sessions, r.Header.Get("Mcp-Session-Id"))
				l.ids = append(l.ids, string(m.ID))
				l.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bundleEvents reads a sealed bundle's transcript: its attempts and its
// snapshots by id.
func bundleEvents(t *testing.T, dir string) (attempts []*transcript.Attempt, snaps map[string]*transcript.SnapshotEvent) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snaps = map[string]*transcript.SnapshotEvent{}
	r := transcript.NewReader(f)
	for {
		_, ev, err := r.Next()
		if err == io.EOF {
			return attempts, snaps
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *transcript.Attempt:
			attempts = append(attempts, e)
		case *transcript.SnapshotEvent:
			snaps[e.SnapshotID] = e
		}
	}
}

// manifestOf reads a recorded snapshot's manifest from the bundle's pack.
func manifestOf(t *testing.T, dir string, s *transcript.SnapshotEvent) *snapshot.Manifest {
	t.Helper()
	payloads, err := transcript.OpenPayloads(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer payloads.Close()
	b, err := payloads.Read(s.ManifestDigest, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Two clients of one stateless bundle, each with its own credentials, to
// which the upstream gives different tools: the one that lists binds its
// own list; the one that never lists gets the proxy's collection made with
// its own credentials (auto), or binds nothing (never): never the other
// client's list.
func TestCaptureBindsOwnView(t *testing.T) {
	for _, policy := range []string{"auto", "never"} {
		t.Run(policy, func(t *testing.T) {
			serverA, _ := sdkServer(5) // 7 tools
			serverB, _ := sdkServer(1) // 3 tools
			var log listLog
			up := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
				if r.Header.Get("Authorization") == "Bearer b" {
					return serverB
				}
				return serverA
			}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
			defer up.Close()
			h := newHarness(t, up.URL, func(c *Config) { c.Capture = policy })
			a := connect(t, h.srv.URL, "2026-07-28", &http.Client{Transport: headerRT{map[string]string{"Authorization": "Bearer a"}}})
			if n := listAll(t, a); n != 7 {
				t.Fatalf("client a listed %d tools, want 7", n)
			}
			callEcho(t, a, "from a")
			b := connect(t, h.srv.URL, "2026-07-28", &http.Client{Transport: headerRT{map[string]string{"Authorization": "Bearer b"}}})
			callEcho(t, b, "from b")
			a.Close()
			b.Close()
			reps := h.close()
			if policy == "auto" {
				requireVerified(t, reps)
			} else {
				requireIntact(t, reps)
			}
			var attempts []*transcript.Attempt
			snaps := map[string]*transcript.SnapshotEvent{}
			for dir := range reps {
				at, sn := bundleEvents(t, dir)
				attempts = append(attempts, at...)
				for k, v := range sn {
					snaps[k] = v
				}
			}
			if len(attempts) != 2 {
				t.Fatalf("%d attempts, want 2", len(attempts))
			}
			bound := func(a *transcript.Attempt) string {
				if a.Snapshot.SnapshotID == "" {
					return "none"
				}
				s := snaps[a.Snapshot.SnapshotID]
				if !s.Complete {
					return "incomplete"
				}
				return map[int64]string{7: "a's list", 3: "b's list"}[s.Tools]
			}
			if got := bound(attempts[0]); got != "a's list" {
				t.Errorf("client a's call binds %s, want a's list", got)
			}
			want := map[string]string{"auto": "b's list", "never": "none"}[policy]
			if got := bound(attempts[1]); got != want {
				t.Errorf("client b's call binds %s, want %s", got, want)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			wantB := map[string]int{"auto": 2, "never": 0}[policy] // PageSize 2: 3 tools are 2 pages
			if log.byAuth["Bearer b"] != wantB || log.byAuth["Bearer a"] != 4 {
				t.Errorf("the upstream got tools/list %v by credential, want Bearer a 4 (the client's own), Bearer b %d", log.byAuth, wantB)
			}
		})
	}
}

// A session (2025-11-25) whose client never lists: before its first call
// the proxy lists the upstream's tools in that session (the client's own
// session id), the call binds the complete snapshot, the client never sees
// the collection, and the bundle verifies. A second call binds the same
// snapshot without listing again.
func TestCaptureSession(t *testing.T) {
	server, _ := sdkServer(5)
	var log listLog
	up := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	defer up.Close()
	h := newHarness(t, up.URL, func(c *Config) { c.Capture = "auto" })
	cs := connect(t, h.srv.URL, "2025-11-25", nil)
	callEcho(t, cs, "one")
	callEcho(t, cs, "two")
	sid := cs.ID()
	cs.Close()
	reps := h.close()
	requireVerified(t, reps)
	var attempts []*transcript.Attempt
	var snaps map[string]*transcript.SnapshotEvent
	var bundle string
	for dir := range reps {
		if at, sn := bundleEvents(t, dir); len(at) > 0 {
			attempts, snaps, bundle = at, sn, dir
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(attempts))
	}
	for _, a := range attempts {
		s := snaps[a.Snapshot.SnapshotID]
		if s == nil || !s.Complete || s.Tools != 7 || a.Snapshot.SnapshotID != attempts[0].Snapshot.SnapshotID {
			t.Fatalf("attempt %s binds %+v, want the one complete snapshot of 7 tools", a.AttemptID, a.Snapshot)
		}
	}
	if m := manifestOf(t, bundle, snaps[attempts[0].Snapshot.SnapshotID]); m.Collection.Mode != snapshot.ModeActive {
		t.Errorf("collection mode %q, want %q: the producer's own collection", m.Collection.Mode, snapshot.ModeActive)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.ids) != 4 { // PageSize 2: 7 tools are 4 pages, listed once
		t.Fatalf("the upstream got %d tools/list requests (%v), want the proxy's 4", len(log.ids), log.ids)
	}
	for i, id := range log.ids {
		if !strings.HasPrefix(id, `"tracectl-capture-`) || log.sessions[i] != sid {
			t.Errorf("tools/list %d: id %s in session %q, want the proxy's own id in the client's session %q", i, id, log.sessions[i], sid)
		}
	}
}

// An upstream that fails the collection (HTTP 500 to tools/list): the call
// is forwarded all the same and binds the incomplete snapshot, which says
// why; the call's own response is recorded.
func TestCaptureUpstreamFails(t *testing.T) {
	server, _ := sdkServer(0)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tracectl-capture-`)) {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
	}))
	defer up.Close()
	h := newHarness(t, up.URL, func(c *Config) { c.Capture = "auto" })
	cs := connect(t, h.srv.URL, "2026-07-28", nil)
	callEcho(t, cs, "still answered")
	cs.Close()
	reps := h.close()
	for d, rep := range reps {
		// incomplete: the snapshot says so, honestly; nothing fails
		if rep.Verdict != verify.Incomplete || len(rep.Failures()) != 0 {
			t.Fatalf("%s: verdict %s with failures %v, want incomplete and none", filepath.Base(d), rep.Verdict, rep.Failures())
		}
	}
	for dir := range reps {
		attempts, snaps := bundleEvents(t, dir)
		for _, a := range attempts {
			s := snaps[a.Snapshot.SnapshotID]
			if s == nil || s.Complete || !strings.Contains(s.IncompleteReason, "invalid_page") {
				t.Fatalf("attempt %s binds %+v, want the incomplete collection (invalid_page)", a.AttemptID, s)
			}
		}
	}
	if _, r, _, _ := total(reps); r != 1 {
		t.Fatalf("%d responses, want the call's 1", r)
	}
}
