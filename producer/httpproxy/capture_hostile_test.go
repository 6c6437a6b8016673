package httpproxy

// Security review of the proxy's own collection (capture.go) and the
// stateless view keys: each test here states what must hold and fails on
// main where it does not.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

const reviewMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func reviewList(id int, cursor string) string {
	c := ""
	if cursor != "" {
		c = `,"cursor":` + fmt.Sprintf("%q", cursor)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{%s%s}}`, id, reviewMeta, c)
}

func reviewCall(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":"echo","arguments":{"text":"x"}}}`, id, reviewMeta)
}

var listHdr = map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": ""}

func withHdr(base map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range base {
		out[a] = b
	}
	return out
}

// tenantUpstream is a stateless JSON upstream whose tools/list depends on
// a tenant (a header), with the same cursors for every tenant ("p2"), as a
// server whose cursors are page numbers has. pages 1: one page.
type tenantUpstream struct {
	header string
	pages  int
	// hold, when set, is called before answering a tools/list page
	// (tenant, cursor, the request id).
	hold func(tenant, cursor, id string)
	mu   sync.Mutex
	list []string // tenant/cursor of each tools/list received
}

func (u *tenantUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	json.Unmarshal(body, &m)
	tenant := r.Header.Get(u.header)
	w.Header().Set("Content-Type", "application/json")
	switch m.Method {
	case "tools/list":
		u.mu.Lock()
		u.list = append(u.list, tenant+"/"+m.Params.Cursor)
		u.mu.Unlock()
		if u.hold != nil {
			u.hold(tenant, m.Params.Cursor, string(m.ID))
		}
		if m.Params.Cursor == "" {
			next := ""
			if u.pages > 1 {
				next = `,"nextCursor":"p2"`
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","description":"echo for tenant %s","inputSchema":{"type":"object"}}]%s}}`, m.ID, tenant, next)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"other","description":"second page for tenant %s","inputSchema":{"type":"object"}}]}}`, m.ID, tenant)
	case "tools/call":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"x"}]}}`, m.ID)
	default:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	}
}

// boundPages returns, for each attempt, the response bytes of the pages
// of the snapshot it binds (nil: binds none), and whether that snapshot
// is complete and has list_changed_since.
type boundSnap struct {
	pages     []string
	complete  bool
	changed   bool
	snapshot  string
	attemptID string
}

func boundSnapshots(t *testing.T, reps map[string]*verify.Report) []boundSnap {
	t.Helper()
	var out []boundSnap
	for dir := range reps {
		attempts, snaps := bundleEvents(t, dir)
		for _, a := range attempts {
			bs := boundSnap{attemptID: a.AttemptID, snapshot: a.Snapshot.SnapshotID, changed: a.Snapshot.ListChangedSince}
			if s := snaps[a.Snapshot.SnapshotID]; s != nil {
				bs.complete = s.Complete
				m := manifestOf(t, dir, s)
				payloads, err := transcript.OpenPayloads(os.DirFS(dir))
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range m.Pages {
					b, err := payloads.Read(p.Response.Digest, 1<<24)
					if err != nil {
						t.Fatal(err)
					}
					bs.pages = append(bs.pages, string(b))
				}
				payloads.Close()
			}
			out = append(out, bs)
		}
	}
	return out
}

func verdicts(reps map[string]*verify.Report) string {
	var b strings.Builder
	for _, r := range reps {
		fmt.Fprintf(&b, "%s ", r.Verdict)
	}
	return b.String()
}

// TestHostileCursorJoinAcrossViews: two stateless clients with different
// credentials, whose upstream lists different tools per credential but
// uses the same cursors, list two pages each, interleaved (A page 1, B
// page 1, B page 2, A page 2). Client B's call must bind only what B's
// credentials were given: its snapshot's first page must be B's. On main
// listPage continues whichever collection offered the cursor first
// (b.waiting is keyed by cursor alone), so B's call binds A's first page
// joined to B's second, complete, and the bundle verifies.
func TestHostileCursorJoinAcrossViews(t *testing.T) {
	up := &tenantUpstream{header: "Authorization", pages: 2}
	srv := httptest.NewServer(up)
	defer srv.Close()
	h := newHarness(t, srv.URL, func(c *Config) { c.Capture = "auto" })
	A := withHdr(listHdr, "Authorization", "Bearer A")
	B := withHdr(listHdr, "Authorization", "Bearer B")
	post(t, h.srv.URL, reviewList(1, ""), A)
	post(t, h.srv.URL, reviewList(2, ""), B)
	post(t, h.srv.URL, reviewList(3, "p2"), B)
	post(t, h.srv.URL, reviewList(4, "p2"), A)
	if resp, body := post(t, h.srv.URL, reviewCall(5), map[string]string{"Authorization": "Bearer B"}); resp.StatusCode != 200 {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	reps := h.close()
	t.Logf("verdicts: %s", verdicts(reps))
	for _, bs := range boundSnapshots(t, reps) {
		if len(bs.pages) == 0 {
			t.Fatalf("B's call binds no snapshot")
		}
		t.Logf("B's call binds %s complete=%v pages %q", bs.snapshot, bs.complete, bs.pages)
		if !strings.Contains(bs.pages[0], "tenant Bearer B") {
			t.Errorf("client B's call binds a snapshot whose first page is another credential's list: %s", bs.pages[0])
		}
	}
}

// TestHostileViewKeyCustomHeader: the upstream's list depends on a header
// IsCredentialHeader does not know (X-Tenant, as an authenticating
// gateway in front of the proxy sets: X-Forwarded-User, X-Tenant-Id ...).
// Client a lists; client b (another tenant) calls without listing. With
// capture auto, b's call must bind b's own list; on main the view keys
// are equal, so b's call binds a's list, complete and current.
func TestHostileViewKeyCustomHeader(t *testing.T) {
	up := &tenantUpstream{header: "X-Tenant", pages: 1}
	srv := httptest.NewServer(up)
	defer srv.Close()
	h := newHarness(t, srv.URL, func(c *Config) { c.Capture = "auto" })
	post(t, h.srv.URL, reviewList(1, ""), withHdr(listHdr, "X-Tenant", "a"))
	if resp, body := post(t, h.srv.URL, reviewCall(2), map[string]string{"X-Tenant": "b"}); resp.StatusCode != 200 {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	reps := h.close()
	t.Logf("verdicts: %s; upstream tools/list: %v", verdicts(reps), up.list)
	for _, bs := range boundSnapshots(t, reps) {
		t.Logf("b's call binds %s complete=%v pages %q", bs.snapshot, bs.complete, bs.pages)
		if len(bs.pages) == 0 || !strings.Contains(bs.pages[0], "tenant b") {
			t.Errorf("tenant b's call binds another tenant's list")
		}
	}
}

// TestHostileListChangedDuringCapture: a tools/list_changed delivered on
// another exchange while the proxy's own collection for a stateless
// client is between pages. The collection's first page predates the
// change: the call must not bind it as a complete, current snapshot
// (the stdio session and session bundles make such a collection
// incomplete, sink.ListChanged -> active.NotifyListChanged). On main the
// per-view sink never hears of the notification, the snapshot is recorded
// complete after the notification line (so the verifier sees no
// list_changed since), and a second call binds it again as current.
func TestHostileListChangedDuringCapture(t *testing.T) {
	page2 := make(chan struct{})
	atPage2 := make(chan struct{}, 4)
	up := &tenantUpstream{header: "Authorization", pages: 2}
	up.hold = func(tenant, cursor, id string) {
		if cursor == "p2" && strings.Contains(id, "tracectl-capture-") {
			atPage2 <- struct{}{}
			<-page2
		}
	}
	notify := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"method":"ping"`) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", m.ID)
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		up.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(notify)
	defer srv.Close()
	h := newHarness(t, srv.URL, func(c *Config) { c.Capture = "auto" })
	A := map[string]string{"Authorization": "Bearer A"}
	done := make(chan string)
	go func() {
		resp, body := post(t, h.srv.URL, reviewCall(1), A)
		done <- fmt.Sprint(resp.StatusCode, " ", body)
	}()
	<-atPage2
	ping := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{%s}}`, reviewMeta)
	if resp, body := post(t, h.srv.URL, ping, map[string]string{"Mcp-Method": "ping", "Mcp-Name": "", "Authorization": "Bearer A"}); !strings.Contains(body, "list_changed") {
		t.Fatalf("ping: %d %s", resp.StatusCode, body)
	}
	close(page2)
	t.Logf("first call: %s", <-done)
	post(t, h.srv.URL, reviewCall(2), A)
	reps := h.close()
	t.Logf("verdicts: %s; upstream tools/list: %v", verdicts(reps), up.list)
	// The collection the change came during is incomplete; the next call
	// binds one collected after it (auto: the first was not current).
	bound := boundSnapshots(t, reps)
	slices.SortFunc(bound, func(a, b boundSnap) int { return strings.Compare(a.attemptID, b.attemptID) })
	for _, bs := range bound {
		t.Logf("attempt %s binds %s complete=%v list_changed_since=%v", bs.attemptID, bs.snapshot, bs.complete, bs.changed)
	}
	if len(bound) != 2 || bound[0].complete || (bound[1].complete && bound[1].snapshot == bound[0].snapshot) {
		t.Errorf("the call during whose collection a tools/list_changed came binds a complete snapshot, or the next call binds that collection again")
	}
}

// TestHostileCaptureMutexBlocksOthers: one stateless client whose view the
// upstream is slow to list (held until the test releases it, as a hostile
// upstream or a slow backend for one tenant does) must not block another
// client's tools/call, whose own list is complete and current: collections
// lock per view, and a current view takes no lock.
func TestHostileCaptureMutexBlocksOthers(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	up := &tenantUpstream{header: "Authorization", pages: 1}
	up.hold = func(tenant, cursor, id string) {
		if tenant == "Bearer slow" {
			held <- struct{}{}
			<-release
		}
	}
	srv := httptest.NewServer(up)
	defer srv.Close()
	h := newHarness(t, srv.URL, func(c *Config) { c.Capture = "auto" })
	// the fast client lists: its view is complete and current
	post(t, h.srv.URL, reviewList(1, ""), withHdr(listHdr, "Authorization", "Bearer fast"))
	slowDone := make(chan struct{})
	go func() {
		post(t, h.srv.URL, reviewCall(2), map[string]string{"Authorization": "Bearer slow"})
		close(slowDone)
	}()
	<-held // the slow client's collection is under way, and stays so
	fast := make(chan struct{})
	go func() {
		post(t, h.srv.URL, reviewCall(3), map[string]string{"Authorization": "Bearer fast"})
		close(fast)
	}()
	select {
	case <-fast:
	case <-slowDone:
		t.Error("the slow collection ended first")
	case <-time.After(time.Minute): // a bound on a hang, not a synchronization
		t.Error("the fast client's call (its own list current) waited behind another client's collection")
	}
	close(release)
	<-slowDone
	h.close()
}

// TestHostileViewKeyRepeatedHeaders: viewKey writes each credential
// header's name and then its values, length-prefixed, but not how many
// values there are, so a value spelling the next header's name moves
// values between headers: Authorization: x, Authorization: Cookie,
// Authorization: y has the key of Authorization: x with Cookie: y. The
// upstream sees different requests; the key must differ.
func TestHostileViewKeyRepeatedHeaders(t *testing.T) {
	r1 := httptest.NewRequest(http.MethodPost, "/", nil)
	r1.Header["Authorization"] = []string{"x", "Cookie", "y"}
	r2 := httptest.NewRequest(http.MethodPost, "/", nil)
	r2.Header["Authorization"] = []string{"x"}
	r2.Header["Cookie"] = []string{"y"}
	if viewKey(r1) == viewKey(r2) {
		t.Error("two different credential header sets have one view key")
	}
}

// TestHostileListChangedDuringStatelessListing: the same for a stateless
// client's own two-page listing: a tools/list_changed between its pages
// (on another exchange) must leave that listing incomplete or stale. On
// main the per-client sink in b.waiting never hears of it: the listing is
// recorded complete after the notification and the call binds it as
// current (capture auto does not collect again).
func TestHostileListChangedDuringStatelessListing(t *testing.T) {
	up := &tenantUpstream{header: "Authorization", pages: 2}
	notify := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"method":"ping"`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n\n")
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		up.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(notify)
	defer srv.Close()
	h := newHarness(t, srv.URL, func(c *Config) { c.Capture = "auto" })
	A := withHdr(listHdr, "Authorization", "Bearer A")
	post(t, h.srv.URL, reviewList(1, ""), A)
	ping := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{%s}}`, reviewMeta)
	if _, body := post(t, h.srv.URL, ping, map[string]string{"Mcp-Method": "ping", "Mcp-Name": "", "Authorization": "Bearer A"}); !strings.Contains(body, "list_changed") {
		t.Fatalf("ping: %s", body)
	}
	post(t, h.srv.URL, reviewList(2, "p2"), A)
	post(t, h.srv.URL, reviewCall(3), map[string]string{"Authorization": "Bearer A"})
	reps := h.close()
	t.Logf("verdicts: %s; upstream tools/list: %v", verdicts(reps), up.list)
	// The client's own listing (its pages answer ids 1 and 2) straddled
	// the change: whatever the call binds is not that listing as complete.
	for _, bs := range boundSnapshots(t, reps) {
		t.Logf("attempt %s binds %s complete=%v list_changed_since=%v", bs.attemptID, bs.snapshot, bs.complete, bs.changed)
		own := len(bs.pages) > 0 && strings.Contains(bs.pages[0], `"id":1,`)
		if own && bs.complete && !bs.changed {
			t.Errorf("attempt %s binds the client's own listing, which a tools/list_changed came between the pages of, as complete and current", bs.attemptID)
		}
	}
}

// TestHostileCaptureAmplification: every stateless view key the proxy has
// not seen (any new query string, any new cookie) makes the next
// tools/call collect the upstream's whole tools/list and store it. A
// client that varies its query string must not turn each small call into
// a copy of the list on disk without bound: past maxCaptures collections
// in a bundle the proxy collects no more (those calls bind nothing).
func TestHostileCaptureAmplification(t *testing.T) {
	var lists atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		if m.Method == "tools/list" {
			lists.Add(1)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","description":"d","inputSchema":{"type":"object"}}]}}`, m.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"x"}]}}`, m.ID)
	}))
	defer srv.Close()
	h := newHarness(t, srv.URL, func(c *Config) { c.Capture = "auto" })
	calls := maxCaptures + 16
	for i := range calls {
		post(t, h.srv.URL+fmt.Sprintf("/?n=%d", i), reviewCall(i+1), nil)
	}
	reps := h.close()
	if n := lists.Load(); n != maxCaptures {
		t.Errorf("%d calls under %d views made the proxy list the upstream %d times, want the budget, %d", calls, calls, n, maxCaptures)
	}
	none := 0
	for _, bs := range boundSnapshots(t, reps) {
		if bs.snapshot == "" {
			none++
		}
	}
	if none != 16 {
		t.Errorf("%d calls bind no snapshot, want the 16 past the budget", none)
	}
}
