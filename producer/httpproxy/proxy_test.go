package httpproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

var testKey = sync.OnceValues(func() (sign.Signer, error) {
	k, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		return nil, err
	}
	return sign.NewSigner(k)
})

// harness runs a proxy in front of upstream, recording into a temporary
// directory.
type harness struct {
	t      *testing.T
	dir    string
	proxy  *Proxy
	srv    *httptest.Server
	mu     sync.Mutex
	sealed []string
	n      atomic.Int64
	// retain and noRedaction are the recorders' (set before the first
	// request: bundles open with it).
	retain      string
	noRedaction bool
	// policy and policyMode are the recorders' policy file and mode
	// (policy_test.go).
	policy     []byte
	policyMode string
	approve    []string // the recorders' approve command (approve_test.go)
}

func newHarness(t *testing.T, upstream string, mod func(*Config), set ...func(*harness)) *harness {
	t.Helper()
	s, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: t.TempDir()}
	for _, f := range set { // before the proxy serves: its requests read them
		f(h)
	}
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := producer.HTTPServer(u, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Upstream: u,
		Open: func(kind string) (*producer.Recorder, error) {
			dir := filepath.Join(h.dir, fmt.Sprintf("%s-%d.trace", kind, h.n.Add(1)))
			sv := srv
			sv.URL = h.proxy.ServerURL() // as recorded: credential-like path segments redacted
			return producer.Open(dir, producer.Options{
				Clock: time.Now, Entropy: rand.Reader, Producer: transcript.Producer{Name: "tracectl-test", Version: "0"},
				Server: sv, FramesCommitted: true, Durability: transcript.DurabilityBatch,
				Retention: h.retain, NoRedaction: h.noRedaction,
				PolicyFile: h.policy, PolicyMode: h.policyMode, ApproveCommand: h.approve,
			})
		},
		Seal: func(r *producer.Recorder) error {
			_, err := r.Seal(context.Background(), sign.TranscriptSigner{Key: s, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("tracectl httpproxy tests"))}})
			return err
		},
		Sealed: func(dir string, err error) {
			h.mu.Lock()
			h.sealed = append(h.sealed, dir)
			h.mu.Unlock()
		},
		CaptureID:      func() (string, error) { return snapshot.NewCaptureID(rand.Reader) },
		SnapshotLimits: snapshot.Limits{},
		// The proxy's own collection has its tests (capture_test.go);
		// the rest are about the call path, most against upstreams that
		// answer one kind of request only.
		Capture: "never",
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = p
	h.srv = httptest.NewServer(p)
	t.Cleanup(h.srv.Close)
	return h
}

// close seals every bundle and verifies each; it returns the reports by
// bundle directory.
func (h *harness) close() map[string]*verify.Report {
	h.t.Helper()
	if err := h.proxy.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	s, _ := testKey()
	v, err := verify.New(verify.Options{TrustedKey: s.Public(), At: time.Now()})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*verify.Report{}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.sealed {
		rep, err := v.Bundle(context.Background(), os.DirFS(d))
		if rep == nil {
			h.t.Fatalf("verify %s: %v", d, err)
		}
		out[d] = rep
	}
	return out
}

func requireVerified(t *testing.T, reps map[string]*verify.Report) {
	t.Helper()
	if len(reps) == 0 {
		t.Fatal("no bundle was sealed")
	}
	for d, rep := range reps {
		if rep.Verdict != verify.Verified {
			var b strings.Builder
			for _, f := range rep.Findings {
				if f.Status != verify.StatusPass && f.Status != verify.StatusInfo {
					fmt.Fprintf(&b, "  %s %s [%s]: %s\n", f.Status, f.Code, f.Subject, f.Detail)
				}
			}
			t.Fatalf("%s: verdict %s, want verified:\n%s", filepath.Base(d), rep.Verdict, b.String())
		}
	}
}

// requireIntact: no finding fails. A raw tools/call sent without a
// tools/list first leaves the verdict incomplete (no snapshot is bound),
// which is honest and expected there.
func requireIntact(t *testing.T, reps map[string]*verify.Report) {
	t.Helper()
	if len(reps) == 0 {
		t.Fatal("no bundle was sealed")
	}
	for d, rep := range reps {
		for _, f := range rep.Findings {
			if f.Status == verify.StatusFail || (f.Status != verify.StatusPass && f.Status != verify.StatusInfo && f.Status != verify.StatusWarning && f.Code != verify.CodeEvidenceUnavailable) {
				t.Errorf("%s: %s %s [%s]: %s", filepath.Base(d), f.Status, f.Code, f.Subject, f.Detail)
			}
		}
	}
}

func total(reps map[string]*verify.Report) (attempts, responses, unknown, tf int64) {
	for _, r := range reps {
		attempts += r.Counts.Attempts
		responses += r.Counts.Responses
		unknown += r.Counts.Unknown
		tf += r.Counts.TransportFailures
	}
	return
}

type echoArgs struct {
	Text string `json:"text"`
}

// sdkServer is a Go SDK server with an echo tool, n extra tools (to
// paginate with page size 2) and a tool that blocks until released.
func sdkServer(extra int) (*mcp.Server, chan struct{}) {
	s, release, _ := sdkServerStarted(extra)
	return s, release
}

// sdkServerStarted is sdkServer, and a channel told each time the block
// tool starts.
func sdkServerStarted(extra int) (*mcp.Server, chan struct{}, chan struct{}) {
	started := make(chan struct{}, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-http", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: 2})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	release := make(chan struct{})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "blocks until released or cancelled"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	})
	for i := range extra {
		mcp.AddTool(s, &mcp.Tool{Name: fmt.Sprintf("t%d", i)}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	}
	return s, release, started
}

func connect(t *testing.T, endpoint string, version string, hc *http.Client) *mcp.ClientSession {
	return connectOpts(t, endpoint, version, hc, nil)
}

func connectOpts(t *testing.T, endpoint string, version string, hc *http.Client, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	return cs
}

func listAll(t *testing.T, cs *mcp.ClientSession) int {
	t.Helper()
	n := 0
	cursor := ""
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		n += len(res.Tools)
		if res.NextCursor == "" {
			return n
		}
		cursor = res.NextCursor
	}
}

func callEcho(t *testing.T, cs *mcp.ClientSession, text string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != text {
		t.Fatalf("echo %q, got %q", text, got)
	}
}

// TestGoSDKBothEras runs the Go SDK's streamable client through the proxy
// against the Go SDK's Streamable HTTP handler, stateful (2025-11-25: one
// bundle per session) and stateless (2026-07-28), with pagination,
// list_changed and 32 concurrent calls: every bundle verifies and every
// call is an attempt with its response.
func TestGoSDKBothEras(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		version   string
		json      bool
	}{
		{"stateful-2025-11-25", false, "2025-11-25", false},
		{"stateless-2026-07-28-sse", true, "2026-07-28", false},
		{"stateless-2026-07-28-json", true, "2026-07-28", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, _ := sdkServer(5)
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
				&mcp.StreamableHTTPOptions{Stateless: tc.stateless, JSONResponse: tc.json}))
			defer up.Close()
			h := newHarness(t, up.URL, nil)
			changed := make(chan struct{}, 1)
			cs := connectOpts(t, h.srv.URL, tc.version, nil, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default:
				}
			}})
			if n := listAll(t, cs); n != 7 {
				t.Fatalf("listed %d tools, want 7", n)
			}
			callEcho(t, cs, "hello")
			if !tc.stateless {
				// list_changed reaches a legacy client on its session's GET stream.
				mcp.AddTool(server, &mcp.Tool{Name: "late"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{}, nil, nil
				})
				<-changed // committed by the proxy before the client saw it
				if n := listAll(t, cs); n != 8 {
					t.Fatalf("listed %d tools after list_changed, want 8", n)
				}
			}
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					callEcho(t, cs, fmt.Sprintf("c%d", i))
				}()
			}
			wg.Wait()
			if err := cs.Close(); err != nil && tc.stateless {
				t.Logf("close: %v", err)
			}
			reps := h.close()
			requireVerified(t, reps)
			a, r, u, _ := total(reps)
			if a != 33 || r != 33 || u != 0 {
				t.Fatalf("attempts %d responses %d unknown %d, want 33 33 0", a, r, u)
			}
			if !tc.stateless && len(reps) != 1 {
				t.Fatalf("%d bundles, want the session's one", len(reps))
			}
			// The era as observed: the initialize exchange (2025-11-25) or
			// server/discover (2026-07-28), with the server's self-description.
			source := "initialize_response"
			if tc.stateless {
				source = "discover_response"
			}
			seen := false
			for _, rep := range reps {
				for _, f := range rep.Find(verify.CodeProducerObservation) {
					seen = seen || strings.Contains(f.Detail, `"sdk-http"`) && strings.Contains(f.Detail, source)
				}
			}
			if !seen {
				t.Errorf("no protocol observation from %s naming the server", source)
			}
		})
	}
}

// TestCredentialsNeverRecorded sends bearer tokens, cookies and API keys
// through the proxy: they reach the upstream unchanged, and no byte of any
// of them appears in any file of the bundle.
func TestCredentialsNeverRecorded(t *testing.T) {
	server, _ := sdkServer(0)
	secrets := []string{"Bearer s3cr3t-bearer-token-AAAA", "session=c00kie-value-BBBB", "k3y-value-CCCC", "x-tok-DDDD"}
	var seen atomic.Int64
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == secrets[0] && r.Header.Get("Cookie") == secrets[1] && r.Header.Get("X-Api-Key") == secrets[2] {
			seen.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	hc := &http.Client{Transport: headerRT{map[string]string{"Authorization": secrets[0], "Cookie": secrets[1], "X-Api-Key": secrets[2], "X-Auth-Token": secrets[3]}}}
	cs := connect(t, h.srv.URL, "2026-07-28", hc)
	listAll(t, cs)
	callEcho(t, cs, "hi")
	cs.Close()
	reps := h.close()
	requireVerified(t, reps)
	if seen.Load() == 0 {
		t.Fatal("the upstream never saw the credentials: they were not forwarded unchanged")
	}
	found := 0
	for d := range reps {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, s := range secrets {
				for _, part := range []string{s, s[len(s)-9:]} {
					if bytes.Contains(b, []byte(part)) {
						t.Errorf("%s holds %q", p, part)
					}
				}
			}
			if bytes.Contains(b, []byte(`"credentials":["authorization","cookie","x-api-key","x-auth-token"]`)) {
				found++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found == 0 {
		t.Fatal("the transcript does not record that the credential headers were present")
	}
}

type headerRT struct{ h map[string]string }

func (r headerRT) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range r.h {
		req.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestRotation: stateless traffic rotates its bundle every 2 calls; each
// bundle is sealed, signed and verifies, and no call is lost between them.
func TestRotation(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer up.Close()
	h := newHarness(t, up.URL, func(c *Config) { c.RotateCalls = 2 })
	cs := connect(t, h.srv.URL, "2026-07-28", nil)
	for i := range 5 {
		listAll(t, cs)
		callEcho(t, cs, fmt.Sprint(i))
	}
	cs.Close()
	reps := h.close()
	requireVerified(t, reps)
	if len(reps) != 3 {
		t.Fatalf("%d bundles, want 3 (2+2+1 calls)", len(reps))
	}
	if a, r, _, _ := total(reps); a != 5 || r != 5 {
		t.Fatalf("attempts %d responses %d, want 5 5", a, r)
	}
}

// TestCancellation: a Go SDK client cancels a call in flight (both eras).
// The call's outcome is unknown (cancel_sent or a transport failure: the
// client closed its request), or, when the server's answer to the
// cancellation (the tool returns ctx.Err()) reaches the proxy before the
// client closes its request, that answer, delivered; the session goes on,
// and the bundles verify.
func TestCancellation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		version   string
	}{
		{"stateful-2025-11-25", false, "2025-11-25"},
		{"stateless-2026-07-28", true, "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, release, started := sdkServerStarted(0)
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
				&mcp.StreamableHTTPOptions{Stateless: tc.stateless}))
			defer up.Close()
			defer close(release) // a stateless server may not cancel the tool when its request closes
			h := newHarness(t, up.URL, nil)
			cs := connect(t, h.srv.URL, tc.version, nil)
			listAll(t, cs)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{"text": "x"}})
				errc <- err
			}()
			<-started
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("the cancelled call returned a result")
			}
			callEcho(t, cs, "after")
			cs.Close()
			reps := h.close()
			requireVerified(t, reps)
			a, r, u, tf := total(reps)
			if a != 2 || r < 1 || r+u+tf != 2 {
				t.Fatalf("attempts %d responses %d unknown %d transport failures %d, want 2, the echo's response, and one response, unknown or transport failure", a, r, u, tf)
			}
		})
	}
}

// TestManyClients: 8 stateless clients at once share a bundle (their
// JSON-RPC ids collide: each starts at 1) and 4 stateful clients get one
// bundle each; every call is its own attempt with its own response, and
// every bundle verifies.
func TestManyClients(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		version   string
		clients   int
		bundles   int
	}{
		{"stateless", true, "2026-07-28", 8, 1},
		{"stateful", false, "2025-11-25", 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, _ := sdkServer(3)
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
				&mcp.StreamableHTTPOptions{Stateless: tc.stateless}))
			defer up.Close()
			h := newHarness(t, up.URL, nil)
			var wg sync.WaitGroup
			for c := range tc.clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cs := connect(t, h.srv.URL, tc.version, nil)
					defer cs.Close()
					listAll(t, cs)
					for i := range 4 {
						callEcho(t, cs, fmt.Sprintf("client %d call %d", c, i))
					}
				}()
			}
			wg.Wait()
			reps := h.close()
			requireVerified(t, reps)
			if len(reps) != tc.bundles {
				t.Fatalf("%d bundles, want %d", len(reps), tc.bundles)
			}
			want := int64(4 * tc.clients)
			if a, r, _, _ := total(reps); a != want || r != want {
				t.Fatalf("attempts %d responses %d, want %d each", a, r, want)
			}
		})
	}
}
