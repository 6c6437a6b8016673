package mediation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }

// The two readings the hostile server gives of one answer.
const (
	textA = "transferred 1"
	textB = "transferred 1000000"
)

// callTimeout bounds the client's wait for the tools/call answer. It is a
// backstop: the answer is written at once, and on stdio the hostile server
// follows it with a log message on which the TypeScript client gives up a
// call whose answer it dropped (testdata/client.cjs).
const callTimeout = 10 * time.Second

// cellTimeout bounds one cell's processes, so a hang is a harness error
// with the output so far rather than a test binary timeout.
const cellTimeout = 40 * time.Second

var (
	stdioClasses = []string{"id-twin", "dup-result", "case-variant", "bom", "second-response", "noncanonical-id", "batch"}
	httpClasses  = []string{"sse-event-name", "sse-bom", "sse-lone-cr", "sse-cr-only", "sse-id-twin", "json-dup-result", "json-array", "json-bom", "sse-second-response"}
	clients      = []string{"go-sdk", "ts-v1", "ts-v2"}
)

// kit is what every cell needs: the binaries and a key pair.
type kit struct {
	tracectl, hostile string
	key, pub          string
}

func newKit(t *testing.T) *kit {
	t.Helper()
	k := &kit{tracectl: mcptest.BuildTracectl(t), hostile: mcptest.Build(t, "hostile")}
	k.key = filepath.Join(t.TempDir(), "key.pem")
	k.pub = k.key + ".pub"
	if out, err := exec.Command(k.tracectl, "keygen", "--out", k.key).CombinedOutput(); err != nil {
		t.Fatalf("tracectl keygen: %v\n%s", err, out)
	}
	return k
}

// received is what the client's application got from its tools/call.
type received struct {
	OK      bool
	Text    string
	Code    string // the error's code as JSON (a number, or an SDK's string code)
	Message string
	Source  string // the error's data.source ("tracectl" for tracectl's own errors)
	Notes   []string
}

func (r received) String() string {
	if r.OK {
		return fmt.Sprintf("result %q", r.Text)
	}
	s := "error " + r.Code
	if r.Code == "" {
		s = "error (no code)"
	}
	if r.Source != "" {
		s += " (source " + r.Source + ")"
	}
	msg := r.Message
	if len(msg) > 60 {
		msg = msg[:60] + "..."
	}
	return s + ": " + msg
}

// recorded is what the bundle says about the call.
type recorded struct {
	Verdict  string   // of the bundle holding the attempt
	Others   []string // verdicts of the other bundles (HTTP), if any
	Attempts int      // tools/call attempts for transfer
	Kind     string   // the outcome kind of the (first) attempt, or "no attempt"
	Text     string   // tracectl's reading of the recorded result
	Readings []string // every result text the recorded response bytes hold
	Code     *int64
	Detail   string
	Late     string
	Response string // the recorded response bytes, escaped
}

func (r recorded) String() string {
	s := r.Kind
	if r.Kind == "result" || r.Kind == "tool_error" {
		s += fmt.Sprintf(" %q", r.Text)
		if len(r.Readings) > 1 {
			s += fmt.Sprintf(" (bytes also read as %q)", r.Readings)
		}
	}
	if r.Code != nil {
		s += fmt.Sprintf(" %d", *r.Code)
	}
	if r.Late != "" {
		s += " late:" + r.Late
	}
	if r.Attempts > 1 {
		s += fmt.Sprintf(" (%d attempts)", r.Attempts)
	}
	return s
}

// known says the bundle records a response from the server.
func (r recorded) known() bool {
	switch r.Kind {
	case "result", "tool_error", "jsonrpc_error":
		return true
	}
	return false
}

// judge applies the property and returns a status and, unless the status
// starts with "ok", why not:
//
//	ok          the client acted on result R; the verified bundle records R
//	            (and its response bytes read no other way)
//	ok-refused  the client got tracectl's own error (data.source
//	            "tracectl"); the verified bundle records a transport
//	            failure (or tracectl's error as the response)
//	SILENT      the client got an error of its own SDK, or the bundle
//	            records no transport failure: the monitor let the client
//	            find out alone (the issue asks for the injected error)
//	VIOLATION   the client acted on a result the verified bundle does not
//	            record as the call's response
//	MISMATCH    the client got an error; the verified bundle records a
//	            response
//	FAIL        otherwise (the bundle does not verify, or has no attempt)
func judge(got received, rec recorded) (status, why string) {
	if got.OK {
		unambiguous := len(rec.Readings) <= 1
		if rec.Verdict == "verified" && rec.Kind == "result" && rec.Text == got.Text && unambiguous {
			return "ok", ""
		}
		if rec.Verdict == "verified" {
			return "VIOLATION", fmt.Sprintf("the client acted on result %q; the verified bundle records %s", got.Text, rec)
		}
		return "FAIL", fmt.Sprintf("the client acted on result %q; the bundle (verdict %s) records %s", got.Text, rec.Verdict, rec)
	}
	if rec.Attempts == 0 {
		return "FAIL", "the bundle has no attempt for the call"
	}
	if rec.Verdict != "verified" {
		return "FAIL", fmt.Sprintf("the client got %s; the bundle's verdict is %s", got, rec.Verdict)
	}
	if !rec.known() || rec.Kind == "jsonrpc_error" && rec.Code != nil && got.Code == fmt.Sprint(*rec.Code) {
		if got.Source == "tracectl" && (rec.Kind == "transport_failure" || rec.Kind == "jsonrpc_error") {
			return "ok-refused", ""
		}
		return "SILENT", fmt.Sprintf("the client got %s; the bundle records %s: not the proxy's error and a transport failure", got, rec)
	}
	return "MISMATCH", fmt.Sprintf("the client got %s; the verified bundle records a response: %s", got, rec)
}

type cell struct {
	client, transport, class string
}

func (c cell) name() string { return c.client + "/" + c.transport + "/" + c.class }

type row struct {
	cell
	got          received
	rec          recorded
	status, why  string
	skip, harnes string
}

// matrix collects the rows of one test and prints them when it ends.
type matrix struct {
	mu   sync.Mutex
	rows []row
}

func (m *matrix) add(r row) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, r)
}

func (m *matrix) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	sort.Slice(m.rows, func(i, j int) bool { return m.rows[i].name() < m.rows[j].name() })
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-9s %-5s %-20s %-10s %-55s %-9s %s\n", "CLIENT", "TRANS", "CLASS", "STATUS", "CLIENT RECEIVED", "VERDICT", "BUNDLE RECORDS")
	for _, r := range m.rows {
		switch {
		case r.skip != "":
			fmt.Fprintf(&b, "%-9s %-5s %-20s %-10s %s\n", r.client, r.transport, r.class, "skip", r.skip)
		case r.harnes != "":
			fmt.Fprintf(&b, "%-9s %-5s %-20s %-10s %s\n", r.client, r.transport, r.class, "HARNESS", firstLine(r.harnes))
		default:
			fmt.Fprintf(&b, "%-9s %-5s %-20s %-10s %-55s %-9s %s\n", r.client, r.transport, r.class, r.status, r.got, r.rec.Verdict, r.rec)
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// TestHostileStdio runs one tools/call from each client through `tracectl
// wrap` to the hostile server in each stdio class, and checks the bundle
// against what the client received.
func TestHostileStdio(t *testing.T) {
	runMatrix(t, "stdio", stdioClasses)
}

// TestHostileHTTP does the same through `tracectl proxy` in front of the
// hostile Streamable HTTP server.
func TestHostileHTTP(t *testing.T) {
	runMatrix(t, "http", httpClasses)
}

func runMatrix(t *testing.T, transport string, classes []string) {
	k := newKit(t)
	m := &matrix{}
	t.Cleanup(func() { t.Log(m) })
	for _, client := range clients {
		for _, class := range classes {
			c := cell{client: client, transport: transport, class: class}
			t.Run(c.name(), func(t *testing.T) {
				t.Parallel()
				r := row{cell: c}
				defer func() {
					if t.Skipped() && r.skip == "" {
						r.skip = "skipped"
					}
					m.add(r)
				}()
				var sdk tsclient.SDK
				switch client {
				case "ts-v1":
					sdk = skipUnless(t, &r, tsclient.V1)
				case "ts-v2":
					sdk = skipUnless(t, &r, tsclient.V2)
				}
				got, rec, log, err := runCell(k, c, sdk, t.TempDir())
				if err != nil {
					r.harnes = err.Error()
					t.Fatalf("harness: %v\nhostile server sent:\n%s", err, log)
				}
				r.got, r.rec = got, rec
				r.status, r.why = judge(got, rec)
				if !strings.HasPrefix(r.status, "ok") {
					t.Errorf("%s: %s\nhostile server sent:\n%s\nrecorded response bytes: %s\nrecorded detail: %q\nclient notes: %q", r.status, r.why, log, rec.Response, rec.Detail, got.Notes)
				}
			})
		}
	}
}

// skipUnless finds an SDK, noting in the row why the cell skips if none.
func skipUnless(t *testing.T, r *row, find func(testing.TB) tsclient.SDK) tsclient.SDK {
	t.Helper()
	rec := &skipRecorder{TB: t}
	var sdk tsclient.SDK
	done := make(chan struct{})
	// find calls Skip (runtime.Goexit) when the SDK or its node is absent:
	// run it where that ends only its own goroutine, and keep the reason.
	go func() {
		defer close(done)
		sdk = find(rec)
		rec.found = true
	}()
	<-done
	switch {
	case rec.fatal:
		r.harnes = rec.reason
		t.Fatal(rec.reason)
	case !rec.found:
		r.skip = rec.reason
		t.Skip(rec.reason)
	}
	return sdk
}

type skipRecorder struct {
	testing.TB
	reason string
	found  bool
	fatal  bool
}

func (s *skipRecorder) Skip(args ...any) { s.reason = fmt.Sprint(args...); runtime.Goexit() }
func (s *skipRecorder) Skipf(format string, args ...any) {
	s.reason = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (s *skipRecorder) Fatalf(format string, args ...any) {
	s.reason, s.fatal = fmt.Sprintf(format, args...), true
	runtime.Goexit()
}
func (s *skipRecorder) Helper() {}

// runCell plays one cell; log is what the hostile server sent, for failure
// messages.
func runCell(k *kit, c cell, sdk tsclient.SDK, dir string) (got received, rec recorded, log string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), cellTimeout)
	defer cancel()
	logPath := filepath.Join(dir, "hostile.log")
	defer func() { log = sentLog(logPath) }()
	var bundles []string
	if c.transport == "stdio" {
		bundle := filepath.Join(dir, "run.trace")
		// --grace: a call whose answer tracectl did not match is still open
		// at the server when the client closes; the hostile server sends
		// nothing more, so waiting the default 5 s for it only slows the cell.
		wrap := []string{k.tracectl, "wrap", "--bundle", bundle, "--key", k.key, "--grace", "10ms", "--", k.hostile, "--mode", "stdio", "--class", c.class, "--log", logPath}
		if c.client == "go-sdk" {
			got, err = goStdio(ctx, wrap)
		} else {
			got, err = tsCall(ctx, sdk, append([]string{"stdio"}, wrap...))
		}
		if err != nil {
			return got, rec, log, err
		}
		bundles = []string{bundle}
	} else {
		bundleDir := filepath.Join(dir, "bundles")
		up, stopUp, err := startHostileHTTP(ctx, k, c.class, logPath)
		if err != nil {
			return got, rec, log, err
		}
		defer stopUp()
		p, err := startProxy(ctx, k, up, bundleDir)
		if err != nil {
			return got, rec, log, err
		}
		url := "http://" + p.addr + "/mcp"
		if c.client == "go-sdk" {
			got, err = goHTTP(ctx, url)
		} else {
			got, err = tsCall(ctx, sdk, []string{"http", url})
		}
		if stopErr := p.stop(); err == nil && stopErr != nil {
			err = stopErr
		}
		if err != nil {
			return got, rec, log, err
		}
		bundles, _ = filepath.Glob(filepath.Join(bundleDir, "*"))
		if len(bundles) == 0 {
			return got, rec, log, fmt.Errorf("tracectl proxy left no bundle in %s; its stderr:\n%s", bundleDir, p.stderr.String())
		}
	}
	rec, err = readBundles(ctx, k, bundles)
	return got, rec, log, err
}

// goStdio runs the Go SDK client over stdio with wrap as its server command.
func goStdio(ctx context.Context, wrap []string) (received, error) {
	cmd := exec.Command(wrap[0], wrap[1:]...)
	var stderr mcptest.LockedBuffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "tracectl-mediation-go", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return received{}, fmt.Errorf("go-sdk connect through tracectl wrap: %v\nstderr:\n%s", err, stderr.String())
	}
	got, err := goCall(ctx, cs)
	if cerr := cs.Close(); cerr != nil {
		got.Notes = append(got.Notes, "close: "+cerr.Error())
	}
	// Close waited for tracectl to exit: the bundle is sealed.
	if err != nil {
		err = fmt.Errorf("%v\nstderr:\n%s", err, stderr.String())
	}
	return got, err
}

// goHTTP runs the Go SDK's Streamable HTTP client against url.
func goHTTP(ctx context.Context, url string) (received, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "tracectl-mediation-go", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return received{}, fmt.Errorf("go-sdk connect through tracectl proxy: %v", err)
	}
	got, err := goCall(ctx, cs)
	if cerr := cs.Close(); cerr != nil {
		got.Notes = append(got.Notes, "close: "+cerr.Error())
	}
	return got, err
}

// goCall lists the tools (a harness error if that fails: the server is
// honest there) and makes the call.
func goCall(ctx context.Context, cs *mcp.ClientSession) (received, error) {
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return received{}, fmt.Errorf("go-sdk tools/list: %v", err)
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"amount": 1}})
	if err != nil {
		got := received{Message: err.Error()}
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			got.Code = fmt.Sprint(we.Code)
			got.Message = we.Message
			got.Source = sourceOf(we.Data)
		} else if errors.Is(err, context.DeadlineExceeded) {
			got.Code = "timeout"
		}
		return got, nil
	}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return received{OK: true, Text: tc.Text}, nil
		}
	}
	b, _ := json.Marshal(res)
	return received{OK: true, Text: string(b)}, nil
}

func sourceOf(data json.RawMessage) string {
	var d struct {
		Source string `json:"source"`
	}
	if json.Unmarshal(data, &d) == nil {
		return d.Source
	}
	return ""
}

// tsCall runs testdata/client.cjs with sdk and returns what its call got.
func tsCall(ctx context.Context, sdk tsclient.SDK, args []string) (received, error) {
	script, err := filepath.Abs(filepath.Join("testdata", "client.cjs"))
	if err != nil {
		return received{}, err
	}
	cmd := exec.CommandContext(ctx, sdk.Node, append([]string{script, sdk.Dir, fmt.Sprint(callTimeout.Milliseconds())}, args...)...)
	var stderr mcptest.LockedBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.Output()
	var got received
	var call, closed bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Event   string          `json:"event"`
			OK      bool            `json:"ok"`
			Text    string          `json:"text"`
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch e.Event {
		case "call":
			call = true
			got.OK, got.Text, got.Message = e.OK, e.Text, e.Message
			got.Code = strings.Trim(string(e.Code), `"`)
			got.Source = sourceOf(e.Data)
		case "note":
			got.Notes = append(got.Notes, e.Message)
		case "closed":
			closed = true
		case "fatal":
			return got, fmt.Errorf("the TypeScript client failed: %s\nstderr:\n%s", e.Message, stderr.String())
		}
	}
	if err != nil || !call || !closed {
		return got, fmt.Errorf("the TypeScript client (%s): exit %v, call reported %v, closed %v\nstdout:\n%s\nstderr:\n%s", sdk.Dir, err, call, closed, out, stderr.String())
	}
	return got, nil
}

// startHostileHTTP starts the hostile server in http mode and returns its
// URL and a function that stops it (closing its stdin) and waits for it.
func startHostileHTTP(ctx context.Context, k *kit, class, logPath string) (string, func(), error) {
	cmd := exec.CommandContext(ctx, k.hostile, "--mode", "http", "--class", class, "--log", logPath)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	var stderr mcptest.LockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		stdin.Close()
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		stop()
		return "", nil, fmt.Errorf("hostile http server: first line %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	return url, stop, nil
}

// proxy is a running `tracectl proxy`.
type proxy struct {
	cmd    *exec.Cmd
	addr   string
	stderr mcptest.LockedBuffer
	done   chan struct{} // closed when stderr is drained
}

func startProxy(ctx context.Context, k *kit, upstream, bundleDir string) (*proxy, error) {
	p := &proxy{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, k.tracectl, "proxy", "--upstream", upstream, "--listen", "127.0.0.1:0",
		"--bundle-dir", bundleDir, "--key", k.key, "--grace", "1s")
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.Write([]byte(line + "\n"))
			if rest, ok := strings.CutPrefix(line, "tracectl: proxying http://"); ok {
				a, _, _ := strings.Cut(rest, " ")
				addr <- a
			}
		}
		close(addr)
	}()
	a, ok := <-addr
	if !ok {
		p.cmd.Wait()
		return nil, fmt.Errorf("tracectl proxy did not start; stderr:\n%s", p.stderr.String())
	}
	p.addr = a
	return p, nil
}

// stop sends SIGTERM (the proxy seals every bundle) and waits for the exit.
func (p *proxy) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal tracectl proxy: %w", err)
	}
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("tracectl proxy: %v; stderr:\n%s", err, p.stderr.String())
	}
	return nil
}

// readBundles verifies every bundle and reads the transfer call's outcome
// from the one that holds it.
func readBundles(ctx context.Context, k *kit, bundles []string) (recorded, error) {
	rec := recorded{Kind: "no attempt"}
	found := false
	for _, b := range bundles {
		verdict, err := verifyBundle(ctx, k, b)
		if err != nil {
			return rec, err
		}
		attempts, err := exportBundle(ctx, k, b)
		if err != nil {
			return rec, err
		}
		var mine []exported
		for _, a := range attempts {
			if a.Tool == "transfer" {
				mine = append(mine, a)
			}
		}
		if len(mine) == 0 || found {
			rec.Others = append(rec.Others, verdict)
			rec.Attempts += len(mine)
			continue
		}
		found = true
		rec.Verdict, rec.Attempts = verdict, rec.Attempts+len(mine)
		a := mine[0]
		rec.Kind, rec.Code, rec.Detail, rec.Late = a.Outcome, a.ErrorCode, a.Detail, a.LateResponse
		if len(a.Result) > 0 {
			rec.Text = contentText(a.Result)
		}
		resp, err := responseBytes(ctx, k, b, a.AttemptID)
		if err != nil {
			return rec, err
		}
		rec.Response = fmt.Sprintf("%q", resp)
		rec.Readings = readings(resp)
	}
	if !found {
		rec.Verdict = strings.Join(rec.Others, ",")
	}
	return rec, nil
}

func verifyBundle(ctx context.Context, k *kit, bundle string) (string, error) {
	out, stderr, err := run(ctx, k.tracectl, "verify", "--trusted-key", k.pub, "--format", "json", bundle)
	var rep struct {
		Verdict string `json:"verdict"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil || rep.Verdict == "" {
		return "", fmt.Errorf("tracectl verify %s: %v (exit %v)\nstdout: %s\nstderr: %s", bundle, jerr, err, out, stderr)
	}
	return rep.Verdict, nil
}

// exported is a line of `tracectl export --format jsonl`.
type exported struct {
	AttemptID    string          `json:"attempt_id"`
	Tool         string          `json:"tool"`
	Outcome      string          `json:"outcome"`
	ErrorCode    *int64          `json:"error_code"`
	Detail       string          `json:"detail"`
	LateResponse string          `json:"late_response"`
	Result       json.RawMessage `json:"result"`
}

func exportBundle(ctx context.Context, k *kit, bundle string) ([]exported, error) {
	out, stderr, err := run(ctx, k.tracectl, "export", "--format", "jsonl", "--include-arguments", bundle)
	if err != nil {
		return nil, fmt.Errorf("tracectl export %s: %v\nstderr: %s", bundle, err, stderr)
	}
	var recs []exported
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var r exported
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("tracectl export %s: line %q: %v", bundle, sc.Bytes(), err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// responseBytes is the attempt's recorded response, as `tracectl show`
// prints it ("" when none is recorded).
func responseBytes(ctx context.Context, k *kit, bundle, id string) (string, error) {
	out, stderr, err := run(ctx, k.tracectl, "show", "--attempt", id, "--format", "json", "--max-bytes", "1048576", bundle)
	if err != nil {
		return "", fmt.Errorf("tracectl show --attempt %s %s: %v\nstderr: %s", id, bundle, err, stderr)
	}
	var shown struct {
		Response *struct {
			Text string `json:"text"`
		} `json:"response_bytes"`
	}
	if err := json.Unmarshal(out, &shown); err != nil {
		return "", fmt.Errorf("tracectl show --attempt %s: %v\n%s", id, err, out)
	}
	if shown.Response == nil {
		return "", nil
	}
	return shown.Response.Text, nil
}

// contentText is the first text content of a tools/call result.
func contentText(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil || len(r.Content) == 0 {
		return string(result)
	}
	return r.Content[0].Text
}

// readings returns the distinct result texts a JSON-RPC response's bytes
// hold for some reader: every member named "result" in any letter case,
// repeated members included, in an object or in an array of them (a leading
// BOM skipped). A response that holds one answer has one reading.
func readings(resp string) []string {
	dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(resp, "\uFEFF")))
	seen := map[string]bool{}
	var out []string
	var walk func(depth int) error
	walk = func(depth int) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['):
			for dec.More() {
				if err := walk(depth); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('{'):
			for dec.More() {
				name, err := dec.Token()
				if err != nil {
					return err
				}
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return err
				}
				if s, ok := name.(string); ok && depth == 0 && strings.EqualFold(s, "result") {
					if t := contentText(v); !seen[t] {
						seen[t] = true
						out = append(out, t)
					}
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	_ = walk(0)
	return out
}

func run(ctx context.Context, name string, args ...string) (stdout []byte, stderr string, err error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	out, err := cmd.Output()
	return out, eb.String(), err
}

// sentLog renders the hostile server's log of what it sent: one quoted
// string per write.
func sentLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var b strings.Builder
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var e struct {
			Dir         string `json:"dir"`
			ContentType string `json:"content_type"`
			B64         string `json:"b64"`
		}
		if err := dec.Decode(&e); err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(&b, "(bad log line: %v)\n", err)
			}
			break
		}
		raw, _ := base64.StdEncoding.DecodeString(e.B64)
		if e.Dir == "sent" && len(raw) > 0 {
			ct := ""
			if e.ContentType != "" {
				ct = "[" + e.ContentType + "] "
			}
			fmt.Fprintf(&b, "  %s%q\n", ct, raw)
		}
	}
	return b.String()
}
