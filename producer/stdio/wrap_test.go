package stdio

// Tests of the whole recording path: a real client (the Go SDK's, or raw
// lines) -> stdio.Run -> a real server process, recorded through
// producer.Open + session.NewRecordingSink, sealed with a real Ed25519 signature and
// checked by package verify with the trusted key. Nothing here is a double
// except the failing file system of the full-disk test (wrap_faults_test.go).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
)

// testKey is an Ed25519 key generated per test binary run.
var testKey = sync.OnceValues(func() (sign.Signer, error) {
	k, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		return nil, err
	}
	return sign.NewSigner(k)
})

// recordSigner signs the Trust Record that commits to a sealed transcript,
// as tracectl's CLI does, with the test key.
type recordSigner struct{ s sign.Signer }

func (r recordSigner) SignTranscript(_ context.Context, root string, calls int64) ([]byte, error) {
	rec, err := sign.Build(sign.RecordOptions{
		IssuedAt: time.Now(), Key: r.s.Public(), Digest: canon.SHA256([]byte("tracectl producer/proxy tests")),
		TranscriptHash: root, CallCount: calls,
	})
	if err != nil {
		return nil, err
	}
	return sign.Sign(rec, r.s)
}

func signer(t testing.TB) sign.Signer {
	t.Helper()
	s, err := testKey()
	if err != nil {
		t.Fatalf("test key: %v", err)
	}
	return s
}

// lockedBuf collects bytes written from several goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (l *lockedBuf) String() string { return string(l.Bytes()) }

// wrapOpts configure a recorded proxy session.
type wrapOpts struct {
	durability  string        // default strict
	callTimeout time.Duration // Config.CallTimeout
	grace       time.Duration // default 2s
	fs          producer.FS   // default producer.OS
	maxFrame    int64         // producer.Limits.MaxFrameBytes (0: the default)
	noRedact    bool          // producer.Options.NoRedaction
	capture     string        // Config.Capture
}

// wrapRun is one recorded proxy session. The client side is a pair of
// pipes (clientW: what the client writes, clientR: what it reads); every byte
// crossing them is kept (sent, got) so tests can compare the transcript with
// the traffic the client really saw.
type wrapRun struct {
	t       *testing.T
	dir     string
	server  string
	rec     *producer.Recorder
	signer  sign.Signer
	clientW *io.PipeWriter // the client's requests
	clientR *io.PipeReader // what the client reads
	sent    lockedBuf      // every byte the client wrote
	got     lockedBuf      // every byte the proxy wrote to the client
	stderr  lockedBuf      // the server's stderr
	pid     atomic.Int64
	done    chan struct{}
	res     *producer.SessionResult
	err     error
}

// startWrap opens a bundle and runs the proxy in front of server.
func startWrap(t *testing.T, o wrapOpts, server string, args ...string) *wrapRun {
	t.Helper()
	if o.durability == "" {
		o.durability = transcript.DurabilityStrict
	}
	if o.grace == 0 {
		o.grace = 2 * time.Second
	}
	dir := filepath.Join(t.TempDir(), "run.trace")
	rec, err := producer.Open(dir, producer.Options{
		Clock: time.Now, Entropy: rand.Reader, FS: o.fs, Durability: o.durability,
		Producer: transcript.Producer{Name: "tracectl-proxy-test", Version: "test"},
		Server:   transcript.Server{Transport: transcript.TransportStdio, Executable: server, Argc: int64(len(args))},
		Limits:   producer.Limits{CallTimeout: o.callTimeout, MaxFrameBytes: o.maxFrame}, FramesCommitted: true, NoRedaction: o.noRedact,
	})
	if err != nil {
		t.Fatalf("producer.Open: %v", err)
	}
	w := &wrapRun{t: t, dir: dir, server: server, rec: rec, signer: signer(t), done: make(chan struct{})}

	inR, inW := io.Pipe()   // client -> proxy
	outR, outW := io.Pipe() // proxy -> relay
	cliR, cliW := io.Pipe() // relay -> client
	w.clientW, w.clientR = inW, cliR
	// The relay keeps reading after the client stops (a client that closed
	// its end must not make the proxy's writes fail: that is a different
	// test), and keeps every byte.
	go func() {
		buf := make([]byte, 64<<10)
		gone := false
		for {
			n, err := outR.Read(buf)
			if n > 0 {
				w.got.Write(buf[:n])
				if !gone {
					if _, werr := cliW.Write(buf[:n]); werr != nil {
						gone = true
					}
				}
			}
			if err != nil {
				cliW.Close()
				return
			}
		}
	}()
	cfg := Config{
		Command: server, Args: args,
		ClientIn: io.TeeReader(inR, &w.sent), ClientOut: outW, ServerErr: &w.stderr,
		Recorder: rec, CallTimeout: o.callTimeout, Grace: o.grace, KillAfter: time.Second, MaxRetain: o.maxFrame, Capture: o.capture,
		Started: func(pid int) { w.pid.Store(int64(pid)) },
	}
	go func() {
		defer close(w.done)
		w.res, w.err = Run(context.Background(), cfg)
		outW.Close()
		inR.Close() // nothing reads client input any more
	}()
	t.Cleanup(func() {
		inW.Close()
		cliR.Close()
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Errorf("stdio.Run did not return")
		}
		w.rec.Close() // no-op once sealed
	})
	return w
}

// connect connects the Go SDK client through the proxy.
func (w *wrapRun) connect(ctx context.Context, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	w.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "proxy-test-client", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: w.clientR, Writer: w.clientW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		w.t.Fatalf("connect through the proxy (%s): %v\nserver stderr:\n%s", version, err, w.stderr.String())
	}
	return cs
}

// wait waits for Run to return (after the client closed its side).
func (w *wrapRun) wait() (*producer.SessionResult, error) {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		w.t.Fatal("stdio.Run did not return within 30s")
	}
	return w.res, w.err
}

// end closes the client's input and waits for Run; Run must succeed.
func (w *wrapRun) end() *producer.SessionResult {
	w.t.Helper()
	w.clientW.Close()
	res, err := w.wait()
	if err != nil {
		w.t.Fatalf("stdio.Run: %v\nserver stderr:\n%s", err, w.stderr.String())
	}
	return res
}

// seal seals and signs the bundle (Run has finished snapshot collection).
func (w *wrapRun) seal() *producer.Sealed {
	w.t.Helper()
	s, err := w.rec.Seal(context.Background(), recordSigner{w.signer})
	if err != nil {
		w.t.Fatalf("Seal: %v", err)
	}
	if !s.Signed {
		w.t.Fatal("Seal: bundle not signed")
	}
	return s
}

// verifyBundle verifies dir with the trusted test key.
func verifyBundle(t *testing.T, dir string, pub crypto.PublicKey) *verify.Report {
	t.Helper()
	v, err := verify.New(verify.Options{TrustedKey: pub, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Bundle(context.Background(), os.DirFS(dir))
	if rep == nil {
		t.Fatalf("verify: no report: %v", err)
	}
	return rep
}

// requireVerified fails unless the verdict is verified.
func requireVerified(t *testing.T, rep *verify.Report) {
	t.Helper()
	if rep.Verdict != verify.Verified {
		var b strings.Builder
		for _, f := range rep.Findings {
			if f.Status != verify.StatusPass && f.Status != verify.StatusInfo {
				fmt.Fprintf(&b, "  %s %s [%s]: %s\n", f.Status, f.Code, f.Subject, f.Detail)
			}
		}
		t.Fatalf("verdict %s, want verified:\n%s", rep.Verdict, b.String())
	}
}

// notPassed lists the findings that are neither pass nor info as
// "status code subject attempt", the attempt being the first aN the detail
// names, if any.
func notPassed(rep *verify.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Status == verify.StatusPass || f.Status == verify.StatusInfo {
			continue
		}
		s := string(f.Status) + " " + string(f.Code) + " " + f.Subject
		for _, w := range strings.Fields(f.Detail) {
			w = strings.TrimRight(w, ":,.;")
			if len(w) > 1 && w[0] == 'a' && strings.Trim(w[1:], "0123456789") == "" {
				s += " " + w
				break
			}
		}
		out = append(out, s)
	}
	return out
}

// journalView is a transcript read back with transcript.Reader, which checks
// every line (canonical, known types, contiguous seq, scope) on the way.
type journalView struct {
	raw    [][]byte
	events []any
}

func readJournal(t *testing.T, dir string) *journalView {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := transcript.NewReader(f)
	j := &journalView{}
	for {
		raw, ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return j
		}
		if err != nil {
			t.Fatalf("transcript line %d: %v", len(j.raw), err)
		}
		j.raw, j.events = append(j.raw, raw), append(j.events, ev)
	}
}

func (j *journalView) attempts() []*transcript.Attempt {
	var out []*transcript.Attempt
	for _, e := range j.events {
		if a, ok := e.(*transcript.Attempt); ok {
			out = append(out, a)
		}
	}
	return out
}

func (j *journalView) attempt(t *testing.T, id string) *transcript.Attempt {
	t.Helper()
	for _, a := range j.attempts() {
		if a.AttemptID == id {
			return a
		}
	}
	t.Fatalf("no attempt %s in the transcript", id)
	return nil
}

// attemptFor returns the attempt of the tools/call sent with the given
// JSON-RPC id text.
func (j *journalView) attemptFor(t *testing.T, idText string) *transcript.Attempt {
	t.Helper()
	var found *transcript.Attempt
	for _, a := range j.attempts() {
		if a.RPCID.Text == idText {
			if found != nil {
				t.Fatalf("two attempts with JSON-RPC id %s", idText)
			}
			found = a
		}
	}
	if found == nil {
		t.Fatalf("no attempt with JSON-RPC id %s", idText)
	}
	return found
}

func (j *journalView) observations(id string) []*transcript.Observation {
	var out []*transcript.Observation
	for _, e := range j.events {
		if o, ok := e.(*transcript.Observation); ok && o.AttemptID == id {
			out = append(out, o)
		}
	}
	return out
}

// history is the attempt's observation kinds and resolution, in order,
// e.g. "timeout,resolution:unknown/sealed_in_flight".
func (j *journalView) history(id string) string {
	var h []string
	for _, e := range j.events {
		switch e := e.(type) {
		case *transcript.Observation:
			if e.AttemptID == id {
				h = append(h, e.Kind)
			}
		case *transcript.Resolution:
			if e.AttemptID == id {
				h = append(h, "resolution:"+e.Outcome+"/"+e.Reason)
			}
		}
	}
	return strings.Join(h, ",")
}

func (j *journalView) snapshots() []*transcript.SnapshotEvent {
	var out []*transcript.SnapshotEvent
	for _, e := range j.events {
		if s, ok := e.(*transcript.SnapshotEvent); ok {
			out = append(out, s)
		}
	}
	return out
}

// manifest reads the retained manifest of the snapshot with id.
func (j *journalView) manifest(t *testing.T, dir, id string) *snapshot.Manifest {
	t.Helper()
	for _, s := range j.snapshots() {
		if s.SnapshotID != id {
			continue
		}
		payloads, err := transcript.OpenPayloads(os.DirFS(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer payloads.Close()
		b, err := payloads.Read(s.ManifestDigest, 1<<24)
		if err != nil {
			t.Fatalf("manifest of %s: %v", id, err)
		}
		m, err := snapshot.ParseManifest(b)
		if err != nil {
			t.Fatalf("manifest of %s: %v", id, err)
		}
		return m
	}
	t.Fatalf("no snapshot %s", id)
	return nil
}

func (j *journalView) notifications(method string) []*transcript.Notification {
	var out []*transcript.Notification
	for _, e := range j.events {
		if n, ok := e.(*transcript.Notification); ok && n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

func (j *journalView) protocols() []*transcript.Protocol {
	var out []*transcript.Protocol
	for _, e := range j.events {
		if p, ok := e.(*transcript.Protocol); ok {
			out = append(out, p)
		}
	}
	return out
}

func (j *journalView) seal(t *testing.T) *transcript.Seal {
	t.Helper()
	if len(j.events) == 0 {
		t.Fatal("empty transcript")
	}
	s, ok := j.events[len(j.events)-1].(*transcript.Seal)
	if !ok {
		t.Fatalf("last line is %T, want the seal", j.events[len(j.events)-1])
	}
	return s
}

// checkBinding checks that every attempt binds the snapshot in force when it
// was recorded: the latest snapshot line before it (or none, with the
// reason), with list_changed_since set iff a list_changed notification was
// recorded between that snapshot and the attempt.
func (j *journalView) checkBinding(t *testing.T) {
	t.Helper()
	var cur *transcript.SnapshotEvent
	changed := false
	for _, e := range j.events {
		switch e := e.(type) {
		case *transcript.SnapshotEvent:
			cur, changed = e, false
		case *transcript.Notification:
			if e.Method == "notifications/tools/list_changed" {
				changed = true
			}
		case *transcript.Attempt:
			want := transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot}
			if cur != nil {
				want = transcript.SnapshotRef{SnapshotID: cur.SnapshotID, ManifestDigest: cur.ManifestDigest, Complete: cur.Complete, ListChangedSince: changed && cur != nil}
			}
			if e.Snapshot != want {
				t.Errorf("attempt %s (%s) binds %+v, want %+v", e.AttemptID, e.Tool, e.Snapshot, want)
			}
		}
	}
}

// wireLine is one JSON-RPC line as a peer wrote it.
type wireLine struct {
	raw    []byte          // exact, with terminator
	body   []byte          // without terminator
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func splitWire(t *testing.T, b []byte) []wireLine {
	t.Helper()
	var out []wireLine
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		n := i + 1
		if i < 0 {
			n = len(b)
		}
		raw := b[:n]
		b = b[n:]
		body, _ := mcpwire.SplitTerminator(raw)
		l := wireLine{raw: raw, body: body}
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("a peer wrote a line that is not JSON: %q: %v", raw, err)
		}
		out = append(out, l)
	}
	return out
}

// checkTraffic compares the transcript with what crossed the client's
// pipes: the tools/call lines the client sent are exactly the attempts'
// requests (by digest of the exact bytes, as a multiset), and every response
// the client received to a tools/call is a recorded response observation
// (same exact bytes) or a proxy-synthesized error for an attempt with a
// transport failure. It returns the client's tools/call lines by id text.
func (w *wrapRun) checkTraffic(j *journalView) map[string]wireLine {
	t := w.t
	t.Helper()
	calls := map[string]wireLine{}
	var want []string
	for _, l := range splitWire(t, w.sent.Bytes()) {
		if l.Method == "tools/call" {
			calls[string(l.ID)] = l
			want = append(want, canon.SHA256(l.body))
		}
	}
	// Commitments are salted (transcript v3): the exact bytes are compared
	// through the retained copies, each checked against its commitment.
	payloads, err := transcript.OpenPayloads(os.DirFS(w.dir))
	if err != nil {
		t.Fatal(err)
	}
	defer payloads.Close()
	plain := func(p *transcript.Payload) string {
		b, err := payloads.Read(p.Digest, 1<<30)
		if err != nil {
			t.Errorf("payload %s: %v", p.Digest, err)
			return ""
		}
		return canon.SHA256(b)
	}
	var got []string
	for _, a := range j.attempts() {
		got = append(got, plain(&a.Request))
		if !a.Request.Retained {
			t.Errorf("attempt %s: request not retained", a.AttemptID)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("attempt request digests (%d) != the client's tools/call lines (%d)", len(got), len(want))
	}
	recorded := map[string]bool{}
	failed := map[string]bool{}
	for _, a := range j.attempts() {
		for _, o := range j.observations(a.AttemptID) {
			switch o.Kind {
			case transcript.ObsResponse, transcript.ObsLateResponse:
				recorded[a.RPCID.Text+" "+plain(o.Response)] = true
			case transcript.ObsTransportFailure:
				failed[a.RPCID.Text] = true
			}
		}
	}
	for _, l := range splitWire(t, w.got.Bytes()) {
		if l.Method != "" || l.ID == nil {
			continue
		}
		if _, isCall := calls[string(l.ID)]; !isCall {
			continue
		}
		switch {
		case recorded[string(l.ID)+" "+canon.SHA256(l.body)]:
		case l.Error != nil && l.Error.Code == mcpwire.CodeTransportFailure && failed[string(l.ID)]:
		default:
			t.Errorf("the client received a response to tools/call id %s that is not in the transcript: %s", l.ID, l.raw)
		}
	}
	return calls
}

// listAll fetches every tools/list page, as a client filling its catalog
// does, and returns the tool names and the page count. between runs after
// each page (nil: nothing).
func listAll(ctx context.Context, t *testing.T, cs *mcp.ClientSession, between func(page int)) ([]string, int) {
	t.Helper()
	var names []string
	cursor := ""
	for page := 1; ; page++ {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list page %d: %v", page, err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if between != nil {
			between(page)
		}
		if res.NextCursor == "" {
			return names, page
		}
		cursor = res.NextCursor
	}
}

func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// sdkFixedTools is the number of tools sdkserver serves besides -tools N.
const sdkFixedTools = 7

// TestWrapSDKModern: the Go SDK client in the modern era (it probes
// server/discover) through the recording proxy: a catalog over many pages,
// 32 concurrent calls, a tool error and a call the client gives up on.
func TestWrapSDKModern(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "sdkserver")
	w := startWrap(t, wrapOpts{}, srv, "-tools", "50", "-page-size", "7")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := w.connect(ctx, "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		t.Fatalf("negotiated %q, want %q", v, modernVersion)
	}

	names, pages := listAll(ctx, t, cs, nil)
	if len(names) != 50+sdkFixedTools || pages != 9 {
		t.Fatalf("listed %d tools over %d pages, want %d over 9", len(names), pages, 50+sdkFixedTools)
	}

	// 32 calls in flight at once, each with its own arguments.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := callTool(ctx, cs, "echo", map[string]any{"i": i})
			if err != nil {
				errs <- fmt.Errorf("call %d: %w", i, err)
				return
			}
			if txt := res.Content[0].(*mcp.TextContent).Text; txt != fmt.Sprintf(`{"i":%d}`, i) {
				errs <- fmt.Errorf("call %d: echoed %s", i, txt)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if res, err := callTool(ctx, cs, "fail", nil); err != nil || !res.IsError {
		t.Fatalf("fail: %v, %v; want a tool error", res, err)
	}
	// The client gives up after 200 ms: it sends notifications/cancelled.
	// A cancelled call does not hold the grace period: the session ends
	// without waiting for the server's late answer, and the outcome stays
	// unknown (cancel_sent) unless the server's late answer (the Go SDK
	// answers a cancelled call at once) arrived before its stdin closed.
	slowCtx, slowCancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := callTool(slowCtx, cs, "slow", map[string]any{"ms": 5000})
	slowCancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call: %v, want the client's deadline", err)
	}
	// The SDK client sends its notifications/cancelled asynchronously:
	// closing the session at once could drop it.
	waitJournal(t, w.dir, "the cancellation", isObservation(transcript.ObsCancelSent))
	cs.Close()
	res := w.end()
	if len(res.InFlight) > 1 || res.TransportFailures != 0 {
		t.Errorf("Result %+v: want at most the cancelled call abandoned in flight, no transport failure", res)
	}
	late := len(res.InFlight) == 0
	sealed := w.seal()

	j := readJournal(t, w.dir)
	calls := w.checkTraffic(j)
	j.checkBinding(t)
	snaps := j.snapshots()
	if len(snaps) != 1 || !snaps[0].Complete || snaps[0].Tools != 57 || snaps[0].Pages != 9 {
		t.Fatalf("snapshots %+v, want one complete snapshot of 57 tools over 9 pages", snaps)
	}
	atts := j.attempts()
	if len(atts) != 34 || sealed.Seal.Attempts != 34 {
		t.Fatalf("%d attempts (seal says %d), want 34", len(atts), sealed.Seal.Attempts)
	}
	for _, a := range atts {
		if a.Protocol != (transcript.AttemptProto{Era: mcpwire.EraModern, State: transcript.ProtoPresent, Value: modernVersion}) {
			t.Errorf("attempt %s protocol %+v", a.AttemptID, a.Protocol)
		}
		if a.Snapshot.SnapshotID != "s1" || !a.Snapshot.Complete {
			t.Errorf("attempt %s bound to %+v, want s1 (complete)", a.AttemptID, a.Snapshot)
		}
	}
	// Each call's history, found by the JSON-RPC id the client used.
	for id, l := range calls {
		a := j.attemptFor(t, id)
		var p struct {
			Params struct{ Name string } `json:"params"`
		}
		json.Unmarshal(l.body, &p)
		want := "response"
		if p.Params.Name == "slow" {
			want = "cancel_sent"
			if late {
				want += ",late_response"
			}
		}
		if got := j.history(a.AttemptID); got != want {
			t.Errorf("attempt %s (%s, id %s): history %q, want %q", a.AttemptID, p.Params.Name, id, got, want)
		}
		obs := j.observations(a.AttemptID)
		last := obs[len(obs)-1]
		switch p.Params.Name {
		case "fail":
			if !last.IsError || last.ResultType != "complete" {
				t.Errorf("fail: observation %+v, want is_error in a complete result", last)
			}
		case "slow":
			if late && last.ResultType != transcript.ResultTypeError {
				t.Errorf("slow: late response %+v, want a JSON-RPC error", last)
			}
			if n := j.notifications("notifications/cancelled"); len(n) != 1 || n[0].AttemptID != a.AttemptID || n[0].Direction != transcript.ClientToServer {
				t.Errorf("cancelled notifications %+v, want one naming %s", n, a.AttemptID)
			}
		}
	}
	if c := sealed.Seal; c.Responses+c.Unknown != 34 || c.Unknown != int64(len(res.InFlight)) || c.TransportFailures != 0 {
		t.Errorf("seal counts %+v", c)
	}
	var srcs []string
	for _, p := range j.protocols() {
		srcs = append(srcs, string(p.Era)+"/"+p.Source+"/"+p.Version)
	}
	if got, want := strings.Join(srcs, " "), "modern/request_meta/"+modernVersion+" modern/discover_response/"+modernVersion; got != want {
		t.Errorf("protocol observations %q, want %q", got, want)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// TestWrapSDKLegacyListChanged: the Go SDK client in the legacy era. The
// server adds a tool while the client is collecting its catalog (that
// collection is incomplete), the client re-lists (complete), a tool call
// adds another tool (list_changed after a complete snapshot: the next call
// binds it flagged stale), the client re-lists and calls the new tool.
func TestWrapSDKLegacyListChanged(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "sdkserver")
	w := startWrap(t, wrapOpts{}, srv, "-tools", "20", "-page-size", "5", "-add-tool-after-list", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 8)
	cs := w.connect(ctx, legacyVersion, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if v := cs.InitializeResult().ProtocolVersion; v != legacyVersion {
		t.Fatalf("negotiated %q, want %q", v, legacyVersion)
	}
	waitChanged := func() {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no notifications/tools/list_changed")
		}
	}
	// First collection: late_tool is added after the 2nd page is served;
	// wait for its list_changed before fetching page 3.
	listAll(ctx, t, cs, func(page int) {
		if page == 2 {
			waitChanged()
		}
	})
	names, pages := listAll(ctx, t, cs, nil)
	if len(names) != 28 || pages != 6 || !slices.Contains(names, lateToolSDK) {
		t.Fatalf("re-list: %d tools over %d pages, want 28 over 6 with %s", len(names), pages, lateToolSDK)
	}
	mustCall := func(name string, args map[string]any) {
		t.Helper()
		if res, err := callTool(ctx, cs, name, args); err != nil || res.IsError {
			t.Fatalf("call %s: %v %v", name, res, err)
		}
	}
	mustCall("echo", map[string]any{"n": 1})
	mustCall("add_tool", map[string]any{"name": "zz_added"})
	waitChanged()
	mustCall("echo", map[string]any{"n": 2})
	names, _ = listAll(ctx, t, cs, nil)
	if len(names) != 29 {
		t.Fatalf("after add_tool: %d tools, want 29", len(names))
	}
	mustCall("zz_added", map[string]any{"x": 1})
	cs.Close()
	w.end()
	sealed := w.seal()

	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	j.checkBinding(t)
	var got []string
	for _, s := range j.snapshots() {
		got = append(got, fmt.Sprintf("%s complete=%v tools=%d pages=%d %s", s.SnapshotID, s.Complete, s.Tools, s.Pages, s.IncompleteReason))
	}
	want := []string{
		// late_tool sorts onto a page already read: this collection
		// missed it, and knows it may have.
		"s1 complete=false tools=27 pages=6 list_changed_during_collection",
		"s2 complete=true tools=28 pages=6 ",
		// add_tool's list_changed leaves no current snapshot: the next
		// call makes the session collect the list itself (capture auto).
		"s3 complete=true tools=29 pages=6 ",
		"s4 complete=true tools=29 pages=6 ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("snapshots:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// Each call binds the snapshot in force: s2; then s3, the session's
	// own collection after add_tool's list_changed; s4, the client's
	// re-listing, for the added tool.
	type binding struct {
		tool, snap string
		stale      bool
	}
	var gotB []binding
	for _, a := range j.attempts() {
		gotB = append(gotB, binding{a.Tool, a.Snapshot.SnapshotID, a.Snapshot.ListChangedSince})
		if a.Protocol != (transcript.AttemptProto{Era: mcpwire.EraLegacy, State: transcript.ProtoNegotiated, Value: legacyVersion}) {
			t.Errorf("attempt %s protocol %+v, want legacy negotiated %s", a.AttemptID, a.Protocol, legacyVersion)
		}
		if h := j.history(a.AttemptID); h != "response" {
			t.Errorf("attempt %s history %q", a.AttemptID, h)
		}
	}
	wantB := []binding{{"echo", "s2", false}, {"add_tool", "s2", false}, {"echo", "s3", false}, {"zz_added", "s4", false}}
	if !slices.Equal(gotB, wantB) {
		t.Errorf("bindings %+v, want %+v", gotB, wantB)
	}
	if n := len(j.notifications("notifications/tools/list_changed")); n != 2 {
		t.Errorf("%d list_changed notifications recorded, want 2", n)
	}
	if p := j.protocols(); len(p) != 1 || p[0].Source != transcript.SourceInitialize || p[0].Version != legacyVersion || p[0].ServerName != "tracectl-sdkserver" {
		t.Errorf("protocol observations %+v, want one legacy initialize_response", p)
	}
	if sealed.Seal.Attempts != 4 || sealed.Seal.Responses != 4 {
		t.Errorf("seal %+v", sealed.Seal)
	}
	// The call made after list_changed without re-listing binds the
	// session's own complete collection: verified.
	if m := j.manifest(t, w.dir, "s3"); m.Collection.Mode != snapshot.ModeActive {
		t.Errorf("s3 collection mode %q, want %q (the producer's own)", m.Collection.Mode, snapshot.ModeActive)
	}
	rep := verifyBundle(t, w.dir, w.signer.Public())
	if got := notPassed(rep); rep.Verdict != verify.Verified || len(got) != 0 {
		t.Errorf("verdict %s, findings %q; want verified", rep.Verdict, got)
	}
}

// lateToolSDK is the tool sdkserver's -add-tool-after-list adds.
const lateToolSDK = "late_tool"

// TestWrapEverything: npm's server-everything (the TypeScript SDK, legacy)
// through the recording proxy, driven by the Go SDK client.
func TestWrapEverything(t *testing.T) {
	t.Parallel()
	bin := mcptest.EverythingBin(t)
	w := startWrap(t, wrapOpts{}, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 8)
	cs := w.connect(ctx, legacyVersion, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	// It registers one more tool once initialized and says so: list after
	// that, or the collection would be incomplete.
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("server-everything sent no list_changed after initialization")
	}
	names, pages := listAll(ctx, t, cs, nil)
	if !slices.Contains(names, "echo") {
		t.Fatalf("server-everything tools %v: no echo", names)
	}
	res, err := callTool(ctx, cs, "echo", map[string]any{"message": "through tracectl"})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %v", res, err)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, "through tracectl") {
		t.Errorf("echo answered %q", txt)
	}
	cs.Close()
	w.end()
	w.seal()

	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	j.checkBinding(t)
	snaps := j.snapshots()
	if len(snaps) != 1 || !snaps[0].Complete || snaps[0].Tools != int64(len(names)) || snaps[0].Pages != int64(pages) {
		t.Fatalf("snapshots %+v, want one complete snapshot of %d tools", snaps, len(names))
	}
	a := j.attempts()
	if len(a) != 1 || a[0].Tool != "echo" || a[0].Snapshot.SnapshotID != "s1" || j.history(a[0].AttemptID) != "response" {
		t.Fatalf("attempts %+v", a)
	}
	if p := j.protocols(); len(p) != 1 || p[0].Era != mcpwire.EraLegacy || p[0].ServerName == "" {
		t.Errorf("protocol observations %+v, want the legacy initialize response with serverInfo", p)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// rawConn drives the proxy with raw JSON-RPC lines from the client side.
type rawConn struct {
	t     *testing.T
	w     *wrapRun
	lines chan []byte
}

func (w *wrapRun) raw() *rawConn {
	c := &rawConn{t: w.t, w: w, lines: make(chan []byte, 1024)}
	go func() {
		br := bufio.NewReader(w.clientR)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				c.lines <- l
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	return c
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	if _, err := c.w.clientW.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *rawConn) recv() wireLine {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("recv: the proxy closed the client's stdout")
		}
		return splitWire(c.t, l)[0]
	case <-time.After(15 * time.Second):
		c.t.Fatalf("recv: timeout\nserver stderr:\n%s", c.w.stderr.String())
	}
	return wireLine{}
}

// legacyHandshake performs initialize + notifications/initialized.
func (c *rawConn) legacyHandshake() {
	c.t.Helper()
	c.send(initLine)
	if r := c.recv(); r.Error != nil || string(r.ID) != "0" {
		c.t.Fatalf("initialize: %s", r.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// listPaged lists rawserver's default catalog: two pages, cursor "page-2".
func (c *rawConn) listPaged() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"l1","method":"tools/list","params":{}}`)
	if r := c.recv(); string(r.ID) != `"l1"` || r.Error != nil || !strings.Contains(string(r.Result), `"nextCursor":"page-2"`) {
		c.t.Fatalf("tools/list page 1: %s", r.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":"l2","method":"tools/list","params":{"cursor":"page-2"}}`)
	if r := c.recv(); string(r.ID) != `"l2"` || r.Error != nil || strings.Contains(string(r.Result), "nextCursor") {
		c.t.Fatalf("tools/list page 2: %s", r.raw)
	}
}

// waitJournal polls the transcript until cond holds for some line.
func waitJournal(t *testing.T, dir string, what string, cond func(ev any) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if ev, err := transcript.DecodeLine(l); err == nil && cond(ev) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the transcript never recorded %s", what)
}

func isAttempt(tool string) func(any) bool {
	return func(ev any) bool { a, ok := ev.(*transcript.Attempt); return ok && a.Tool == tool }
}

func isObservation(kind string) func(any) bool {
	return func(ev any) bool { o, ok := ev.(*transcript.Observation); return ok && o.Kind == kind }
}

// TestWrapCapturesForClientsThatNeverList: a client that calls a tool
// without listing (a one-shot client, one that reuses a cached list) gets
// its call bound to a complete snapshot all the same: before forwarding
// the call the session collects every page of tools/list itself, under ids
// of its own, on the same server connection; the pages never reach the
// client, the server's log shows the requests, the manifest says the
// collection is the producer's own, and the bundle verifies. With capture
// "never" the same session binds no snapshot and is incomplete.
func TestWrapCapturesForClientsThatNeverList(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "sdkserver")
	for _, capture := range []string{"", "never"} {
		t.Run("capture="+cmp.Or(capture, "auto"), func(t *testing.T) {
			received := filepath.Join(t.TempDir(), "received.jsonl")
			// The server's stdin is logged as the server reads it.
			w := startWrap(t, wrapOpts{capture: capture}, "/bin/sh", "-c", `tee "$0" | "$1" -tools 12 -page-size 5`, received, srv)
			c := w.raw()
			c.legacyHandshake()
			c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`)
			if r := c.recv(); string(r.ID) != "7" || r.Error != nil {
				t.Fatalf("the call: %s", r.raw)
			}
			w.end()
			w.seal()
			for _, l := range splitWire(t, w.got.Bytes()) {
				if l.Method == "" && strings.Contains(string(l.raw), `"result":{"tools"`) {
					t.Errorf("a tools/list page reached the client: %.120s", l.raw)
				}
			}
			log, err := os.ReadFile(received)
			if err != nil {
				t.Fatal(err)
			}
			j := readJournal(t, w.dir)
			rep := verifyBundle(t, w.dir, w.signer.Public())
			lists := strings.Count(string(log), `"method":"tools/list"`)
			if capture == "never" {
				if lists != 0 || len(j.snapshots()) != 0 || rep.Verdict != verify.Incomplete {
					t.Fatalf("capture never: %d tools/list sent, %d snapshots, verdict %s", lists, len(j.snapshots()), rep.Verdict)
				}
				return
			}
			snaps := j.snapshots()
			if len(snaps) != 1 || !snaps[0].Complete || snaps[0].Pages < 3 {
				t.Fatalf("snapshots %+v, want one complete snapshot of 3 pages or more", snaps)
			}
			if int64(lists) != snaps[0].Pages || strings.Count(string(log), `"id":"tracectl-capture-`) != lists {
				t.Errorf("the server received %d tools/list requests (want %d pages, each under a tracectl-capture id):\n%s", lists, snaps[0].Pages, log)
			}
			if m := j.manifest(t, w.dir, snaps[0].SnapshotID); m.Collection.Mode != snapshot.ModeActive {
				t.Errorf("collection mode %q, want %q", m.Collection.Mode, snapshot.ModeActive)
			}
			a := j.attempts()
			if len(a) != 1 || a[0].Snapshot.SnapshotID != snaps[0].SnapshotID || a[0].Snapshot.ListChangedSince {
				t.Fatalf("attempts %+v, want one bound to %s", a, snaps[0].SnapshotID)
			}
			if got := notPassed(rep); rep.Verdict != verify.Verified || len(got) != 0 {
				t.Errorf("verdict %s, findings %q; want verified", rep.Verdict, got)
			}
		})
	}
}

// TestWrapCaptureEdges: the session's own collection against servers that
// page badly, die mid-collection or speak only the modern era. It always
// ends (a repeated cursor stops it; a dead server closes it), the call is
// forwarded (or answered with a transport failure when the server is
// gone), the snapshot says why it is incomplete, and no bundle is failed.
func TestWrapCaptureEdges(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "rawserver")
	modern := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct {
		name    string
		o       wrapOpts
		args    []string
		call    string
		reason  string // the snapshot's incomplete reason ("": complete)
		answer  bool   // the call gets the server's answer (else tracectl's transport failure)
		verdict verify.Verdict
	}{
		{"repeated cursor", wrapOpts{}, []string{"-script", "repeated-cursor"}, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raw-0000","arguments":{}}}`, "repeated_cursor", true, verify.Incomplete},
		{"dies mid-collection", wrapOpts{}, []string{"-script", "die-mid-pagination"}, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raw-0000","arguments":{}}}`, snapshot.StopTransportClosed, false, verify.Incomplete},
		{"modern only", wrapOpts{}, []string{"-script", "modern", "-pages", "3"}, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{` + modern + `,"name":"raw-0000","arguments":{}}}`, "", true, verify.Verified},
		// A page longer than the gate reads stops the collection at once
		// (not at the page timeout); the call is answered (-32602: its
		// name is not on the huge page).
		{"page over the gate's limit", wrapOpts{}, []string{"-script", "huge-page", "-huge-bytes", "70000000"}, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"huge-000000","arguments":{}}}`, snapshot.StopPageBytesLimit, true, verify.Incomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWrap(t, tc.o, srv, tc.args...)
			c := w.raw()
			c.send(tc.call)
			r := c.recv()
			if string(r.ID) != "5" || (r.Error == nil) != tc.answer {
				t.Fatalf("the call got %s", r.raw)
			}
			w.end()
			w.seal()
			j := readJournal(t, w.dir)
			snaps := j.snapshots()
			if len(snaps) != 1 || snaps[0].Complete != (tc.reason == "") || !strings.Contains(snaps[0].IncompleteReason, tc.reason) {
				t.Fatalf("snapshots %+v, want one with reason %q", snaps, tc.reason)
			}
			if m := j.manifest(t, w.dir, snaps[0].SnapshotID); m.Collection.Mode != snapshot.ModeActive {
				t.Errorf("collection mode %q", m.Collection.Mode)
			}
			if a := j.attempts(); len(a) != 1 || a[0].Snapshot.SnapshotID != snaps[0].SnapshotID {
				t.Fatalf("attempts %+v", a)
			}
			if rep := verifyBundle(t, w.dir, w.signer.Public()); rep.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s; findings %q", rep.Verdict, tc.verdict, notPassed(rep))
			}
		})
	}
}
