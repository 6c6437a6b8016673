//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

// Approval through elicitation end to end (spec/policy.md, "Approval"):
// the real tracectl wrap with --approve-elicit between the Go SDK client,
// whose ElicitationHandler answers, and sdklogserver, which logs what it
// executes. The client is asked on its own stream; only what it approves
// executes; its answer is committed and never reaches the server; the
// bundle verifies with the approvals via elicitation.

// elicitClient is a Go SDK client over wrap (argv) that answers the
// elicitations it is sent by the call's message (quoted in the message
// it is shown): ok* approves, no* refuses in the form, decline* and
// cancel* answer so, hang* waits until released (or its request is
// cancelled). Without answer, the client declares no elicitation.
type elicitClient struct {
	cs      *mcp.ClientSession
	cmd     *exec.Cmd
	stderr  *syncBuffer
	mu      sync.Mutex
	asked   []*mcp.ElicitParams
	hanging chan struct{} // a hang* elicitation was received
	release chan bool     // the answer of the hang* elicitation
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startElicitClient(t *testing.T, ctx context.Context, argv []string, answer bool) *elicitClient {
	return startElicitClientVersion(t, ctx, argv, answer, "")
}

// elicitWrap starts wrap recording into k.dir/b.trace with --policy,
// --approve-elicit and flags, and a Go SDK client that answers
// elicitation through its handler; ctx ends with the test (60 s at most).
func (k *approveKit) elicitWrap(t *testing.T, flags ...string) (ctx context.Context, bundle string, c *elicitClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	bundle = filepath.Join(k.dir, "b.trace")
	return ctx, bundle, startElicitClient(t, ctx, k.wrap(bundle, append([]string{"--policy", k.policy, "--approve-elicit"}, flags...)), true)
}

// startElicitClientVersion: version "" is the SDK's latest (the modern
// revision: each request declares the client's capabilities in _meta);
// a legacy one declares them in initialize.
func startElicitClientVersion(t *testing.T, ctx context.Context, argv []string, answer bool, version string) *elicitClient {
	t.Helper()
	c := &elicitClient{stderr: &syncBuffer{}, hanging: make(chan struct{}, 1), release: make(chan bool, 1)}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Stderr = c.stderr
	opts := &mcp.ClientOptions{}
	if answer {
		opts.ElicitationHandler = c.answer
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, opts).Connect(ctx, &mcp.CommandTransport{Command: c.cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.stderr)
	}
	c.cs = cs
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return c
}

func (c *elicitClient) answer(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c.mu.Lock()
	c.asked = append(c.asked, req.Params)
	c.mu.Unlock()
	msg := req.Params.Message
	switch {
	case strings.Contains(msg, `{"message":"ok`):
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "reason": "fine by me"}}, nil
	case strings.Contains(msg, `{"message":"no`):
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": false, "reason": "not today"}}, nil
	case strings.Contains(msg, `{"message":"decline`):
		return &mcp.ElicitResult{Action: "decline"}, nil
	case strings.Contains(msg, `{"message":"cancel`):
		return &mcp.ElicitResult{Action: "cancel"}, nil
	case strings.Contains(msg, `{"message":"hang`):
		c.hanging <- struct{}{}
		select {
		case ok := <-c.release:
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": ok}}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, errors.New("unexpected elicitation: " + msg)
}

func (c *elicitClient) call(ctx context.Context, msg string) error {
	_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	return err
}

// close ends the client's session and checks that wrap sealed.
func (c *elicitClient) close(t *testing.T, want string) {
	t.Helper()
	if err := c.cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if !strings.Contains(c.stderr.String(), want) {
		t.Fatalf("wrap did not seal (%s):\n%s", want, c.stderr)
	}
}

func transcriptOf(t *testing.T, bundle string) []byte {
	t.Helper()
	tr, err := os.ReadFile(filepath.Join(bundle, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestApprovalElicitGoSDK: with --approve-elicit alone, the Go SDK client
// is asked about each call the approve rule matched: what it approves
// executes (by "client:elicit-test"); a refusal in the form, a decline and
// a cancel deny the call (-32094 naming the rule and why) and it never
// executes; the call no rule matched is never asked about. The request
// names the tool, the rule and the arguments; the client's answers are
// committed as withheld client frames, never forwarded; the bundle
// verifies, every approval via elicitation. Both ways a client declares
// elicitation: in each request's _meta (the modern revision, the SDK's
// default) and in initialize (2025-06-18).
func TestApprovalElicitGoSDK(t *testing.T) {
	for _, version := range []string{"", "2025-06-18"} {
		t.Run("version "+version, func(t *testing.T) { testApprovalElicitGoSDK(t, version) })
	}
}

func testApprovalElicitGoSDK(t *testing.T, version string) {
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startElicitClientVersion(t, ctx, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-elicit"}), true, version)
	msgs := []string{"ok go", "free", "no thanks", "decline it", "cancel it"}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = c.call(ctx, m)
	}
	c.close(t, "signed")
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the approved call: %v; the call no approve rule matched: %v", errs[0], errs[1])
	}
	for i, want := range map[int]string{
		2: "tracectl: denied by policy rule needs-ok: approval refused: not today",
		3: "tracectl: denied by policy rule needs-ok: approval refused: the client declined",
		4: "tracectl: denied by policy rule needs-ok: approval refused: the client cancelled",
	} {
		if msg := deniedBy(t, errs[i], "needs-ok"); msg != want {
			t.Errorf("call %q: the client was told %q, want %q", msgs[i], msg, want)
		}
	}
	got := k.executed(t)
	for i, m := range msgs {
		if ran := strings.Contains(got, `"`+m); ran != (i < 2) {
			t.Errorf("the server executed %q: %v, want %v; its log:\n%s", m, ran, i < 2, got)
		}
	}
	if strings.Contains(got, "approve") || strings.Contains(got, "tracectl-approval") {
		t.Errorf("the server saw an elicitation answer:\n%s", got)
	}
	if len(c.asked) != 4 {
		t.Fatalf("the client was asked %d times, want 4", len(c.asked))
	}
	first := c.asked[0]
	if !strings.Contains(first.Message, `tool "echo" (policy rule "needs-ok", attempt "a1")`) || !strings.Contains(first.Message, `arguments: {"message":"ok go"}`) || !strings.Contains(first.Message, "arguments digest: sha256:") {
		t.Errorf("the client was shown %q", first.Message)
	}
	tr := transcriptOf(t, bundle)
	for _, want := range []string{
		`","by":"client:elicit-test","outcome":"approved","reason":"fine by me","via":"elicitation"}`,
		`"outcome":"refused","reason":"not today","via":"elicitation"}`,
		`"outcome":"refused","reason":"the client declined","via":"elicitation"}`,
		`"outcome":"refused","reason":"the client cancelled","via":"elicitation"}`,
		`"direction":"client_to_server","disposition":"withheld"`,
	} {
		if !bytes.Contains(tr, []byte(want)) {
			t.Errorf("transcript lacks %s:\n%s", want, tr)
		}
	}
	if n := bytes.Count(tr, []byte(`"direction":"client_to_server","disposition":"withheld"`)); n != 4 {
		t.Errorf("%d client frames withheld, want the 4 answers", n)
	}
	wantProto := `"source":"request_meta"`
	if version != "" {
		wantProto = `"source":"initialize_response"`
	}
	if !bytes.Contains(tr, []byte(wantProto)) {
		t.Errorf("transcript lacks %s: the session did not run the revision meant", wantProto)
	}
	rep := k.verified(t, bundle)
	for _, want := range []string{"decisions_verified: 5 decisions (0 deny)", "counts: 5 attempts (2 responses, 0 transport failures, 0 unknown, 3 denied)", "frames_accounted"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
}

// TestApprovalElicitUndeclared: a client that did not declare elicitation
// is not asked. With --approve-elicit alone its call is denied, the
// approval failed ("the client did not declare elicitation"), and never
// executes; with --approve-cmd too, the command is asked instead.
func TestApprovalElicitUndeclared(t *testing.T) {
	k := newApproveKit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bundle := filepath.Join(k.dir, "only.trace")
	c := startElicitClient(t, ctx, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-elicit"}), false)
	err := c.call(ctx, "ok go")
	c.close(t, "signed")
	if msg := deniedBy(t, err, "needs-ok"); msg != "tracectl: denied by policy rule needs-ok: approval failed: the client did not declare elicitation" {
		t.Errorf("the client was told %q", msg)
	}
	if got := k.executed(t); strings.Contains(got, "ok go") {
		t.Fatalf("the server executed:\n%s", got)
	}
	if tr := transcriptOf(t, bundle); !bytes.Contains(tr, []byte(`"outcome":"failed","reason":"the client did not declare elicitation","via":"elicitation"}`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	k.verified(t, bundle)

	both := filepath.Join(k.dir, "both.trace")
	c = startElicitClient(t, ctx, k.wrap(both, []string{"--key", k.key, "--policy", k.policy, "--approve-elicit", "--approve-cmd", k.approveCmd}), false)
	err = c.call(ctx, "ok both")
	c.close(t, "signed")
	if err != nil {
		t.Fatalf("the call the command approved: %v", err)
	}
	if len(k.requests(t)) != 1 || !strings.Contains(k.executed(t), "ok both") {
		t.Fatalf("the command was not asked, or the call not executed:\n%s", k.executed(t))
	}
	if tr := transcriptOf(t, both); !bytes.Contains(tr, []byte(`"outcome":"approved","reason":"looks fine","via":"command"}`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	k.verified(t, both)
}

// TestApprovalElicitAsync: while one call awaits the client's approval,
// the client's other frames are read and its other calls go on (the
// approval runs off the client reader); once approved, the waiting call
// executes. A second bundle: no answer within --approve-timeout is a
// timeout, the call denied and never executed, and the client is told the
// elicitation is no longer awaited.
func TestApprovalElicitAsync(t *testing.T) {
	k := newApproveKit(t)
	ctx, bundle, c := k.elicitWrap(t, "--key", k.key)
	held := make(chan error, 1)
	go func() { held <- c.call(ctx, "hang on") }()
	<-c.hanging // the client is being asked
	if err := c.call(ctx, "free"); err != nil {
		t.Fatalf("a call while another awaits approval: %v", err)
	}
	if err := c.call(ctx, "ok meanwhile"); err != nil {
		t.Fatalf("an approved call while another awaits approval: %v", err)
	}
	if got := k.executed(t); strings.Contains(got, "hang on") || !strings.Contains(got, `"free"`) || !strings.Contains(got, "ok meanwhile") {
		t.Fatalf("while a call awaits approval, the server executed:\n%s", got)
	}
	c.release <- true
	if err := <-held; err != nil {
		t.Fatalf("the call approved late: %v", err)
	}
	c.close(t, "signed")
	if got := k.executed(t); !strings.Contains(got, "hang on") {
		t.Fatalf("the approved call did not execute:\n%s", got)
	}
	if rep := k.verified(t, bundle); !strings.Contains(rep, "counts: 3 attempts (3 responses, 0 transport failures, 0 unknown)") {
		t.Errorf("report:\n%s", rep)
	}

	timed := filepath.Join(k.dir, "timeout.trace")
	c = startElicitClient(t, ctx, k.wrap(timed, []string{"--key", k.key, "--policy", k.policy, "--approve-elicit", "--approve-timeout", "300ms"}), true)
	err := c.call(ctx, "hang in there")
	if msg := deniedBy(t, err, "needs-ok"); msg != "tracectl: denied by policy rule needs-ok: approval timed out" {
		t.Errorf("the client was told %q", msg)
	}
	c.close(t, "signed")
	if got := k.executed(t); strings.Contains(got, "hang in there") {
		t.Fatalf("the server executed:\n%s", got)
	}
	if tr := transcriptOf(t, timed); !bytes.Contains(tr, []byte(`"outcome":"timeout","reason":"no answer from the client within 300ms","via":"elicitation"}`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	if rep := k.verified(t, timed); !strings.Contains(rep, "1 denied)") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestApprovalElicitSIGTERM: SIGTERM while the client is still being
// asked (the timeout is the default 60 s) gives the elicitation up: wrap
// exits 0 at once, the call is denied and never executed, the approval is
// failed, and the bundle verifies.
func TestApprovalElicitSIGTERM(t *testing.T) {
	k := newApproveKit(t)
	ctx, bundle, c := k.elicitWrap(t, "--key", k.key)
	held := make(chan error, 1)
	go func() { held <- c.call(ctx, "hang on") }()
	<-c.hanging
	t0 := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := <-held
	_ = c.cs.Close()
	if took := time.Since(t0); took >= 5*time.Second {
		t.Errorf("SIGTERM to the call's end took %s: the session waited for the client", took)
	}
	if msg := deniedBy(t, err, "needs-ok"); msg != "tracectl: denied by policy rule needs-ok: approval failed: the recording ended before the approver answered" {
		t.Errorf("the client was told %q", msg)
	}
	if !strings.Contains(c.stderr.String(), "signed") {
		t.Fatalf("wrap did not seal:\n%s", c.stderr)
	}
	if got := k.executed(t); strings.Contains(got, "hang") {
		t.Fatalf("the server executed:\n%s", got)
	}
	if tr := transcriptOf(t, bundle); !bytes.Contains(tr, []byte(`"outcome":"failed","reason":"the recording ended before the approver answered","via":"elicitation"}`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	k.verified(t, bundle)
}

// TestApprovalElicitHostileProducer: a producer holding the key rewrites
// an approval the client declined (via elicitation) as approved, and
// re-signs: the signature verifies, the approval does not fit the denied
// call, and verify fails with approval_mismatch on it.
func TestApprovalElicitHostileProducer(t *testing.T) {
	k := newApproveKit(t)
	ctx, bundle, c := k.elicitWrap(t)
	_ = c.call(ctx, "ok go")
	_ = c.call(ctx, "decline that")
	c.close(t, "unsigned")
	orig := transcriptOf(t, bundle)
	from := regexp.MustCompile(`"outcome":"refused","reason":"the client declined","via":"elicitation"`)
	loc := from.FindIndex(orig)
	if loc == nil {
		t.Fatalf("no declined approval:\n%s", orig)
	}
	tampered := append(append(bytes.Clone(orig[:loc[0]]), `"by":"client:elicit-test","outcome":"approved","via":"elicitation"`...), orig[loc[1]:]...)
	out := k.resignFails(t, bundle, tampered)
	if !strings.Contains(string(out), "signature_valid") || !strings.Contains(string(out), "fail        approval_mismatch [attempt a2]") || !strings.Contains(string(out), "although its approval approved it") {
		t.Fatalf("want a valid signature and approval_mismatch on a2:\n%s", out)
	}
}

// TestApprovalElicitProxyRefused: proxy does not elicit yet: the flag is a
// usage error (exit 2), as is --approve-elicit without a policy.
func TestApprovalElicitProxyRefused(t *testing.T) {
	k := newApproveKit(t)
	for _, argv := range [][]string{
		{k.bin, "proxy", "--bundle-dir", filepath.Join(k.dir, "p"), "--policy", k.policy, "--approve-elicit", "--upstream", "http://127.0.0.1:1/mcp"},
		k.wrap(filepath.Join(k.dir, "w.trace"), []string{"--approve-elicit"}),
	} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--approve-elicit") {
			t.Errorf("%v: %v, want exit 2 naming --approve-elicit:\n%s", argv[1:], err, out)
		}
	}
}

// TestApprovalElicitTypeScript: the TypeScript SDK v1 client, which
// declares elicitation in initialize and answers with its request
// handler: asked about each call, its approved call runs, its declined
// one is rejected with -32094 naming the rule; the bundle verifies.
func TestApprovalElicitTypeScript(t *testing.T) {
	sdk := tsclient.V1(t)
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	c := tsclient.Start(t, sdk, k.env(), "elicit", k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-elicit"})...)
	c.Expect(t, "connected", 30*time.Second)
	c.Expect(t, "listed", 10*time.Second)
	if e := c.Expect(t, "asked", 10*time.Second); !strings.Contains(e.Message, `arguments: {"message":"through tracectl"}`) {
		t.Errorf("the client was asked %q", e.Message)
	}
	c.Expect(t, "echo", 10*time.Second)
	c.Expect(t, "asked", 10*time.Second)
	e := c.Expect(t, "denied", 10*time.Second)
	if !strings.HasPrefix(e.Outcome, "rejected: code=-32094 ") || !strings.Contains(e.Outcome, `"rule":"needs-ok"`) || !strings.Contains(e.Outcome, `"detail":"approval refused: the client declined"`) {
		t.Fatalf("the declined call as the TypeScript client saw it: %s", e.Outcome)
	}
	c.Closed(t)
	if got := k.executed(t); !strings.Contains(got, "through tracectl") || strings.Contains(got, "forbidden") {
		t.Fatalf("the server executed:\n%s\nwant the approved call only", got)
	}
	if tr := transcriptOf(t, bundle); !bytes.Contains(tr, []byte(`"by":"client:tracectl-test-v1","outcome":"approved","reason":"the user said yes","via":"elicitation"}`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	if rep := k.verified(t, bundle); !strings.Contains(rep, "decisions_verified: 2 decisions (0 deny)") || !strings.Contains(rep, "1 denied)") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestApprovalElicitTypeScriptV2: the TypeScript SDK v2 client in auto
// negotiation speaks the 2026-07-28 revision, which has no server-to-client
// JSON-RPC request: it drops the recorder's elicitation/create by design
// (asking through an input_required result is not implemented; spec/policy.md,
// "Not done"). So its approve call waits out --approve-timeout and is denied,
// fail closed: the client gets -32094 saying the approval timed out, the
// server never sees the call, and the bundle (one per start: v2 probes
// first) records the timeout via elicitation and verifies.
func TestApprovalElicitTypeScriptV2(t *testing.T) {
	sdk := tsclient.V2(t)
	k := newApproveKit(t)
	dir := filepath.Join(k.dir, "bundles")
	argv := k.wrap("", []string{"--key", k.key, "--policy", k.policy, "--approve-elicit", "--approve-timeout", "1s"})
	argv[2], argv[3] = "--bundle-dir", dir
	c := tsclient.Start(t, sdk, k.env(), "elicit-dropped", argv...)
	c.Expect(t, "connected", 30*time.Second)
	c.Expect(t, "listed", 10*time.Second)
	e := c.Expect(t, "first", 20*time.Second)
	if !strings.HasPrefix(e.Outcome, "rejected: code=-32094 ") || !strings.Contains(e.Outcome, `"detail":"approval timed out"`) {
		t.Fatalf("the call as the TypeScript v2 client saw it: %s", e.Outcome)
	}
	c.Closed(t)
	if got := k.executed(t); strings.Contains(got, "through tracectl") {
		t.Fatalf("the server executed:\n%s", got)
	}
	bundles, _ := filepath.Glob(filepath.Join(dir, "*.trace"))
	n := 0
	for _, b := range bundles {
		if tr := transcriptOf(t, b); bytes.Contains(tr, []byte(`"outcome":"timeout"`)) && bytes.Contains(tr, []byte(`"via":"elicitation"}`)) {
			n++
			k.verified(t, b)
		}
	}
	if n != 1 {
		t.Fatalf("%d of the bundles %q record the timed-out approval, want 1", n, bundles)
	}
}
