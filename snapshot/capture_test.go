package snapshot_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/snapdiff"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/snapshot"
)

// selfServerEnv makes the test binary act as a tiny raw-line server for the
// one behaviour the shared test servers do not have: ignoring
// server/discover entirely (a legacy server that never answers the probe).
const selfServerEnv = "SNAPSHOT_TEST_SILENT_DISCOVER"

func TestMain(m *testing.M) {
	if os.Getenv(selfServerEnv) != "" {
		silentDiscoverServer()
		os.Exit(0)
	}
	os.Exit(mcptest.Main(m))
}

// silentDiscoverServer answers initialize and one tools/list page, and
// never answers server/discover.
func silentDiscoverServer() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		id := between(line, `"id":`, `,`)
		switch {
		case strings.Contains(line, `"server/discover"`):
		case strings.Contains(line, `"initialize"`):
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"silent","version":"0.1"}}}`+"\n", id)
		case strings.Contains(line, `"tools/list"`) && os.Getenv(selfServerEnv) == "stall":
			// Page 1 offers a next page that never comes.
			if !strings.Contains(line, `"cursor"`) {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"only","inputSchema":{"type":"object"}}],"nextCursor":"2"}}`+"\n", id)
			}
		case strings.Contains(line, `"tools/list"`):
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"only","inputSchema":{"type":"object"}}]}}`+"\n", id)
		}
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}

func capture(t testing.TB, o snapshot.CaptureOptions, argv ...string) *snapshot.Snapshot {
	t.Helper()
	s, err := captureErr(o, argv...)
	if err != nil {
		t.Fatalf("Capture(%s, %q): %v", o.Protocol, argv, err)
	}
	return s
}

func captureErr(o snapshot.CaptureOptions, argv ...string) (*snapshot.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if o.CaptureID == "" {
		o.CaptureID = "cap-test"
	}
	if o.Clock == nil {
		// No request times out unless a test says so: a page that is only
		// slow (a loaded machine) must not change what a test observes.
		// The context above still ends a capture that is stuck.
		if o.RequestTimeout == 0 {
			o.RequestTimeout = time.Hour
		}
		o.Clock = newTestClock(o.RequestTimeout)
	}
	return snapshot.Capture(ctx, argv, o)
}

// testClock is a snapshot.Clock whose timers of the durations in manual
// fire only when the test calls fireNext; timers of any other duration run
// on the real clock (the shutdown grace, which a healthy server never
// reaches). A capture under a testClock cannot time out because the machine
// is slow: the test decides when a timeout happens.
type testClock struct {
	mu     sync.Mutex
	manual map[time.Duration]bool
	live   []*testTimer
	armed  bool // fire the next manual timer as soon as it starts
}

func newTestClock(manual ...time.Duration) *testClock {
	c := &testClock{manual: map[time.Duration]bool{}}
	for _, d := range manual {
		c.manual[d] = true
	}
	return c
}

func (c *testClock) NewTimer(d time.Duration) snapshot.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.manual[d] {
		return realTimer{time.NewTimer(d)}
	}
	t := &testTimer{c: make(chan time.Time, 1), clock: c}
	if c.armed {
		c.armed = false
		t.c <- time.Time{}
		return t
	}
	c.live = append(c.live, t)
	return t
}

// fireNext fires the oldest live manual timer, or else the next one started.
func (c *testClock) fireNext() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.live) == 0 {
		c.armed = true
		return
	}
	t := c.live[0]
	c.live = c.live[1:]
	t.c <- time.Time{}
}

type testTimer struct {
	c     chan time.Time
	clock *testClock
}

func (t *testTimer) C() <-chan time.Time { return t.c }

func (t *testTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range c.live {
		if l == t {
			c.live = append(c.live[:i], c.live[i+1:]...)
			return true
		}
	}
	return false
}

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

func loader(s *snapshot.Snapshot) snapshot.LoadFunc {
	blobs := map[string][]byte{}
	for _, p := range s.Pages {
		blobs[canon.SHA256(p.Request)] = p.Request
		blobs[canon.SHA256(p.Response)] = p.Response
	}
	return func(d string) ([]byte, error) {
		if b, ok := blobs[d]; ok {
			return b, nil
		}
		return nil, os.ErrNotExist
	}
}

func toolByName(m *snapshot.Manifest, name string) (snapshot.Tool, bool) {
	for _, t := range m.Tools {
		if t.Name != nil && *t.Name == name {
			return t, true
		}
	}
	return snapshot.Tool{}, false
}

// TestCaptureSDKServer captures 2,507 tools (2,500 generated plus the
// server's own seven) over 68 pages from the Go SDK server in both eras and
// checks every collection fact. (68 pages: 100 per page would be faster,
// but many pages is the point.)
func TestCaptureSDKServer(t *testing.T) {
	bin := mcptest.Build(t, "sdkserver")
	const tools, pageSize = 2507, 37
	wantPages := (tools + pageSize - 1) / pageSize
	byEra := map[string]*snapshot.Snapshot{}
	for _, tc := range []struct {
		proto                              string
		era                                mcpwire.Era
		version, watch, source, resultType string
	}{
		{snapshot.ProtocolModern, mcpwire.EraModern, snapshot.ModernVersion, snapshot.WatchSubscribed, "discover_response", "present"},
		{snapshot.ProtocolLegacy, mcpwire.EraLegacy, snapshot.LegacyVersion, snapshot.WatchSession, "initialize_response", "absent"},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			s := capture(t, snapshot.CaptureOptions{Protocol: tc.proto}, bin, "-tools", "2500", "-page-size", fmt.Sprint(pageSize), "-ttl-ms", "1500")
			byEra[tc.proto] = s
			m := s.Manifest
			if !m.Complete || len(m.IncompleteReasons) != 0 {
				t.Fatalf("incomplete: %q %+v", m.IncompleteReasons, m.Collection.Stop)
			}
			c := m.Collection
			if !c.FirstRequestWithoutCursor || !c.TerminalReached || c.Stop != nil || c.ListChangedDuring ||
				len(c.DuplicateToolNames) != 0 || c.UnnamedTools != 0 || c.Mode != snapshot.ModeActive {
				t.Errorf("collection facts: %+v", c)
			}
			if c.ListChangedWatch != tc.watch {
				t.Errorf("list_changed watch %s, want %s", c.ListChangedWatch, tc.watch)
			}
			if m.Protocol.Era != tc.era || *m.Protocol.Version != tc.version {
				t.Errorf("protocol %+v", m.Protocol)
			}
			if m.Server.Source != tc.source || m.Server.Name == nil || *m.Server.Name != "tracectl-sdkserver" {
				t.Errorf("server %+v", m.Server)
			}
			if len(m.Pages) != wantPages || len(m.Tools) != tools {
				t.Errorf("%d pages, %d tools; want %d, %d", len(m.Pages), len(m.Tools), wantPages, tools)
			}
			for i, p := range m.Pages {
				last := i == len(m.Pages)-1
				if (p.Cursor.State == "absent") != (i == 0) || (p.NextCursor.State == "absent") != last {
					t.Errorf("page %d cursors: %+v -> %+v", i, p.Cursor, p.NextCursor)
				}
				if p.TTLMs.Integer == nil || *p.TTLMs.Integer != 1500 || p.CacheScope.Value == nil || *p.CacheScope.Value != "public" {
					t.Errorf("page %d cache fields: ttl %+v scope %+v", i, p.TTLMs, p.CacheScope)
				}
				if p.ResultType.State != tc.resultType {
					t.Errorf("page %d resultType %+v, want state %s", i, p.ResultType, tc.resultType)
				}
			}
			// The decimals tool is served with 0.5, 0.7 and 2^53-1 as the
			// server wrote them, and its declaration is supported.
			dec, ok := toolByName(m, "decimals")
			if !ok || dec.Declaration.Status != snapshot.DeclOK {
				t.Fatalf("decimals: %+v", dec)
			}
			raw := s.Pages[dec.Page].Response
			for _, want := range []string{`"minimum":0.5`, `"default":0.7`, `"maximum":9007199254740991`} {
				if !bytes.Contains(raw, []byte(want)) {
					t.Errorf("page %d lacks %s", dec.Page, want)
				}
			}
			if ann, ok := toolByName(m, "annotated"); !ok || ann.Declaration.Status != snapshot.DeclOK ||
				!bytes.Contains(s.Pages[ann.Page].Response, []byte(`"com.example.vendor/owner":"team-tools"`)) {
				t.Errorf("annotated tool or its _meta missing: %+v", ann)
			}
			if probs := snapshot.VerifyPages(m, loader(s)); len(probs) != 0 {
				t.Errorf("VerifyPages: %v", probs)
			}
			if _, err := snapshot.ParseManifest(s.Bytes); err != nil {
				t.Error(err)
			}
		})
	}
	// Both eras serve the same declarations: no drift between them.
	if a, b := byEra[snapshot.ProtocolModern], byEra[snapshot.ProtocolLegacy]; a != nil && b != nil {
		r := snapdiff.Diff(snapdiff.Input{Manifest: a.Manifest, Load: loader(a)}, snapdiff.Input{Manifest: b.Manifest, Load: loader(b)})
		if r.Verdict != snapdiff.VerdictIdentical {
			t.Errorf("modern vs legacy: %s", r.Verdict)
		}
		if a.Digest == b.Digest {
			t.Error("modern and legacy captures share a manifest digest")
		}
	}
}

// A tool added while pages are being collected: the server sends
// list_changed (legacy: on the session; modern: on the listen stream the
// capture opened), and the snapshot is incomplete with that reason.
//
// Nothing here waits on the wall clock: the server answers page 3 only
// after it has written the notification (sdkserver's -add-tool-after-list),
// and the request timeout is a test clock that never fires (captureErr), so
// a slow machine makes the test slower, never different. (It used to run on
// the real 30 s request timeout: once, under load, a page took longer and
// the capture stopped with "timeout" at page 375.)
func TestCaptureListChangedMidCollection(t *testing.T) {
	bin := mcptest.Build(t, "sdkserver")
	for _, proto := range []string{snapshot.ProtocolModern, snapshot.ProtocolLegacy} {
		t.Run(proto, func(t *testing.T) {
			s := capture(t, snapshot.CaptureOptions{Protocol: proto}, bin, "-tools", "2500", "-page-size", "5", "-add-tool-after-list", "2")
			m := s.Manifest
			if !m.Collection.ListChangedDuring || m.Complete || !slices.Contains(m.IncompleteReasons, "list_changed_during_collection") {
				t.Fatalf("list_changed during %v, complete %v, reasons %q", m.Collection.ListChangedDuring, m.Complete, m.IncompleteReasons)
			}
			if !m.Collection.TerminalReached {
				t.Errorf("collection did not reach the terminal page: stop %+v after %d pages", m.Collection.Stop, len(m.Pages))
			}
		})
	}
}

// With relisting allowed, the collection during which the tool was added is
// given up and a fresh one, which includes the new tool, is complete; the
// manifest counts the relist.
func TestCaptureRelistsAfterListChanged(t *testing.T) {
	bin := mcptest.Build(t, "sdkserver")
	s := capture(t, snapshot.CaptureOptions{Protocol: snapshot.ProtocolLegacy, MaxRelists: 1}, bin, "-tools", "2500", "-page-size", "5", "-add-tool-after-list", "2")
	m := s.Manifest
	if !m.Complete || m.Collection.Relists != 1 {
		t.Fatalf("complete %v relists %d reasons %q", m.Complete, m.Collection.Relists, m.IncompleteReasons)
	}
	if _, ok := toolByName(m, "late_tool"); !ok {
		t.Error("the added tool is not in the second collection")
	}
	if _, err := captureErr(snapshot.CaptureOptions{MaxRelists: snapshot.MaxRelistsCeiling + 1}, bin); err == nil {
		t.Error("relists above the ceiling accepted")
	}
}

func TestCaptureProtocolSelection(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		o       snapshot.CaptureOptions
		argv    []string
		era     mcpwire.Era
		wantErr bool
	}{
		{"auto finds modern", snapshot.CaptureOptions{}, []string{raw, "-script", "modern"}, mcpwire.EraModern, false},
		{"auto falls back on an error", snapshot.CaptureOptions{}, []string{raw, "-script", "legacy"}, mcpwire.EraLegacy, false},
		{"auto falls back on a timeout, on a fresh process", snapshot.CaptureOptions{ProbeTimeout: time.Hour,
			Clock: probeTimesOut(time.Hour), Env: append(os.Environ(), selfServerEnv+"=1")}, []string{self}, mcpwire.EraLegacy, false},
		{"modern refused by a legacy server", snapshot.CaptureOptions{Protocol: snapshot.ProtocolModern}, []string{raw, "-script", "legacy"}, "", true},
		{"legacy refused by a modern server", snapshot.CaptureOptions{Protocol: snapshot.ProtocolLegacy}, []string{raw, "-script", "modern"}, "", true},
		{"no such server", snapshot.CaptureOptions{}, []string{"/nonexistent/server"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := captureErr(tt.o, tt.argv...)
			if tt.wantErr {
				if !errors.Is(err, snapshot.ErrHandshake) {
					t.Fatalf("got %v, want ErrHandshake", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Manifest.Protocol.Era != tt.era || !s.Manifest.Complete {
				t.Errorf("era %s complete %v %q", s.Manifest.Protocol.Era, s.Manifest.Complete, s.Manifest.IncompleteReasons)
			}
		})
	}
}

// probeTimesOut returns a clock on which the server/discover probe (the
// first timer of duration probe) times out at once.
func probeTimesOut(probe time.Duration) *testClock {
	c := newTestClock(probe)
	c.fireNext()
	return c
}

// A page that never comes: the request timeout stops the collection, and so
// does the caller's context; either way the snapshot says so. Both happen
// on an event (page 1 collected), not after a wall-clock wait.
func TestCaptureTimeoutAndCancel(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), selfServerEnv+"=stall")
	clock := newTestClock(time.Hour)
	o := snapshot.CaptureOptions{CaptureID: "cap-t", Protocol: snapshot.ProtocolLegacy, Env: env, RequestTimeout: time.Hour, Clock: clock,
		// After page 1 the only wait is for page 2, which never comes.
		Progress: func(pages, _ int) {
			if pages == 1 {
				clock.fireNext()
			}
		}}
	s, err := snapshot.Capture(context.Background(), []string{self}, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Manifest.IncompleteReasons; !slices.Equal(got, []string{snapshot.StopTimeout}) || len(s.Manifest.Pages) != 1 {
		t.Errorf("timeout: reasons %q pages %d", got, len(s.Manifest.Pages))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Clock = newTestClock(time.Hour) // never fires
	o.Progress = func(pages, _ int) {
		if pages == 1 {
			cancel()
		}
	}
	s, err = snapshot.Capture(ctx, []string{self}, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Manifest.IncompleteReasons; !slices.Equal(got, []string{snapshot.StopCancelled}) {
		t.Errorf("cancel: reasons %q", got)
	}
}

// Wire behaviour no SDK produces, from the raw-line server.
func TestCaptureRawScripts(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	empty := ""
	tests := []struct {
		script  string
		args    []string
		lim     snapshot.Limits
		reasons []string
		pages   int
		check   func(t *testing.T, s *snapshot.Snapshot)
	}{
		{script: "empty-cursor", reasons: []string{}, pages: 2, check: func(t *testing.T, s *snapshot.Snapshot) {
			p := s.Manifest.Pages
			if p[0].NextCursor.Value == nil || *p[0].NextCursor.Value != empty || p[1].Cursor.Value == nil || *p[1].Cursor.Value != empty {
				t.Errorf("empty cursor not followed: %+v %+v", p[0].NextCursor, p[1].Cursor)
			}
		}},
		{script: "repeated-cursor", reasons: []string{"repeated_cursor"}, pages: 2},
		{script: "dup-keys", reasons: []string{}, pages: 1, check: func(t *testing.T, s *snapshot.Snapshot) {
			d, _ := toolByName(s.Manifest, "raw-dup")
			if d.Declaration.Status != snapshot.DeclUnsupported || d.Declaration.Code != string(canon.CodeDuplicateKey) || *d.Declaration.Pointer != "/inputSchema/properties/a" {
				t.Errorf("raw-dup: %+v", d.Declaration)
			}
			if ok, _ := toolByName(s.Manifest, "raw-0000"); ok.Declaration.Status != snapshot.DeclOK {
				t.Errorf("raw-0000: %+v", ok.Declaration)
			}
		}},
		{script: "dup-envelope", reasons: []string{snapshot.StopInvalidPage}, pages: 1, check: func(t *testing.T, s *snapshot.Snapshot) {
			if p := s.Manifest.Pages[0]; p.Invalid != "ambiguous_envelope" {
				t.Errorf("page: %+v", p)
			}
		}},
		{script: "coerced-float", reasons: []string{}, pages: 1, check: func(t *testing.T, s *snapshot.Snapshot) {
			for name, ptr := range map[string]string{"coerced-maximum": "/inputSchema/properties/p/maximum", "coerced-default": "/inputSchema/properties/n/default"} {
				d, _ := toolByName(s.Manifest, name)
				if d.Declaration.Status != snapshot.DeclUnsupported || d.Declaration.Code != string(canon.CodeUnsupportedNumber) || *d.Declaration.Pointer != ptr {
					t.Errorf("%s: %+v", name, d.Declaration)
				}
			}
		}},
		{script: "extra-members", reasons: []string{}, pages: 1, check: func(t *testing.T, s *snapshot.Snapshot) {
			d, _ := toolByName(s.Manifest, "extra")
			i := bytes.Index(s.Pages[0].Response, []byte(`{"name":"extra"`))
			doc, err := canon.Parse(s.Pages[0].Response, canon.ParseOptions{})
			if err != nil || i < 0 {
				t.Fatal(err)
			}
			res, _ := doc.Root().Get("result")
			tl, _ := res.Get("tools")
			want, _ := tl.Elems()[d.Index].Digest(canon.PolicyMCPDecl)
			if d.Declaration.Digest != want {
				t.Errorf("extra: digest %s, want %s", d.Declaration.Digest, want)
			}
		}},
		{script: "die-mid-pagination", reasons: []string{snapshot.StopTransportClosed}, pages: 2},
		{script: "huge-page", args: []string{"-huge-bytes", "2000000"}, lim: snapshot.Limits{MaxPageBytes: 1 << 20},
			reasons: []string{"no_pages", snapshot.StopPageBytesLimit}, pages: 0},
		{script: "paged", args: []string{"-pages", "5"}, lim: snapshot.Limits{MaxPages: 4},
			reasons: []string{"page_limit"}, pages: 4},
		{script: "paged", args: []string{"-pages", "4"}, lim: snapshot.Limits{MaxPages: 4}, reasons: []string{}, pages: 4},
	}
	for _, tt := range tests {
		t.Run(tt.script+strings.Join(tt.args, ""), func(t *testing.T) {
			argv := append([]string{raw, "-script", tt.script}, tt.args...)
			s := capture(t, snapshot.CaptureOptions{Protocol: snapshot.ProtocolLegacy, Limits: tt.lim}, argv...)
			m := s.Manifest
			if !slices.Equal(m.IncompleteReasons, tt.reasons) || len(m.Pages) != tt.pages {
				t.Fatalf("reasons %q pages %d; want %q %d (stop %+v)", m.IncompleteReasons, len(m.Pages), tt.reasons, tt.pages, m.Collection.Stop)
			}
			if probs := snapshot.VerifyPages(m, loader(s)); len(probs) != 0 {
				t.Errorf("VerifyPages: %v", probs)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

// npm's server-everything: a real TypeScript-SDK server. The capture must
// be complete and hold exactly the tools the Go SDK client lists.
func TestCaptureEverything(t *testing.T) {
	bin := mcptest.EverythingBin(t)
	// It sends list_changed when it sees notifications/initialized, which
	// races with the first page request: one relist settles it.
	s := capture(t, snapshot.CaptureOptions{MaxRelists: 2}, bin)
	m := s.Manifest
	if !m.Complete {
		t.Fatalf("incomplete: %q %+v", m.IncompleteReasons, m.Collection.Stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The server offers some tools only to clients with capabilities (roots):
	// the SDK client declares none here, like the capture.
	cl := mcp.NewClient(&mcp.Implementation{Name: "cross-check", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	var got []string
	for _, tl := range m.Tools {
		got = append(got, *tl.Name)
	}
	slices.Sort(names)
	slices.Sort(got)
	if len(got) == 0 || !slices.Equal(got, names) {
		t.Errorf("captured %q, the SDK client lists %q", got, names)
	}
	t.Logf("server-everything: %d tools over %d pages, era %s %s", len(got), len(m.Pages), m.Protocol.Era, *m.Protocol.Version)
}
