//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

// These tests run the real tracectl binary the way MCP hosts do: behind the
// TypeScript SDK clients (v1 and v2) in front of npm's server-everything,
// and in front of small shell servers that end in every way a server can.
// They assert what a user gets: record.json, a verified verdict, the exit
// status, no process left in the server's group.

// lifecycleKit is one test's tracectl binary, key and bundle directory.
type lifecycleKit struct {
	bin, dir, key, bundles string
}

func newKit(t *testing.T) *lifecycleKit {
	t.Helper()
	k := &lifecycleKit{bin: mcptest.BuildTracectl(t), dir: t.TempDir()}
	k.key = filepath.Join(k.dir, "key.pem")
	k.bundles = filepath.Join(k.dir, "bundles")
	if out, err := exec.Command(k.bin, "keygen", "--out", k.key).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	return k
}

// snippet is the README's client configuration: a fresh bundle per start.
func (k *lifecycleKit) snippet(server ...string) []string {
	return append([]string{k.bin, "wrap", "--bundle-dir", k.bundles, "--key", k.key}, server...)
}

// bundleList is every bundle in the bundle directory.
func (k *lifecycleKit) bundleList(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(k.bundles, "tracectl-*.trace"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// verified runs tracectl verify with the trusted key: the bundle must hold
// record.json and verify.
func (k *lifecycleKit) verified(t *testing.T, bundle string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(bundle, "record.json")); err != nil {
		t.Fatalf("bundle %s: %v", bundle, err)
	}
	out, err := exec.Command(k.bin, "verify", "--trusted-key", k.key+".pub", bundle).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "verdict: verified") {
		t.Fatalf("verify %s: %v\n%s", bundle, err, out)
	}
	return string(out)
}

func (k *lifecycleKit) env() []string {
	return append(serverEnv(os.Environ()), "XDG_STATE_HOME="+filepath.Join(k.dir, "state"))
}

// TestTSv1CancelThenClose: the TypeScript SDK v1 client cancels a long
// call, then closes (stdin close; SIGTERM after 2 s; SIGKILL after 4 s).
// The cancelled call does not hold the grace: wrap seals, signs and exits
// before the client's SIGTERM, and the close returns in under 2.5 s.
func TestTSv1CancelThenClose(t *testing.T) {
	sdk := tsclient.V1(t)
	everything := mcptest.EverythingBin(t)
	k := newKit(t)
	c := tsclient.Start(t, sdk, k.env(), "cancel-close", k.snippet(everything)...)
	c.Expect(t, "connected", 30*time.Second)
	c.Expect(t, "listed", 10*time.Second)
	c.Expect(t, "echo", 10*time.Second)
	if e := c.Expect(t, "cancelled", 30*time.Second); !strings.HasPrefix(e.Outcome, "rejected") {
		t.Fatalf("the cancelled call: %s", e.Outcome)
	}
	closed := c.Expect(t, "closed", 10*time.Second)
	t.Logf("client close took %.0f ms", closed.CloseMs)
	if closed.CloseMs >= 2500 {
		t.Errorf("client close took %.0f ms, want < 2500", closed.CloseMs)
	}
	if err := c.Wait(t, 10*time.Second); err != nil {
		t.Fatalf("client: %v\n%s", err, c.Stderr())
	}
	b := k.bundleList(t)
	if len(b) != 1 {
		t.Fatalf("bundles %q, want 1", b)
	}
	rep := k.verified(t, b[0])
	if !strings.Contains(rep, "2 attempts (1 responses, 0 transport failures, 1 unknown)") {
		t.Errorf("report: want the echo answered and the cancelled call unknown:\n%s", rep)
	}
}

// TestTSv1InventedToolWarns: an agent calls a tool name the server never
// declared, through wrap, from the TypeScript SDK v1 client, against npm's
// server-everything (which answers with an error the client sees). The
// bundle is sound evidence of it: verified, with one warning that names the
// tool, and --fail-on warning turns it into exit 4.
func TestTSv1InventedToolWarns(t *testing.T) {
	sdk := tsclient.V1(t)
	everything := mcptest.EverythingBin(t)
	k := newKit(t)
	c := tsclient.Start(t, sdk, k.env(), "invented-tool", k.snippet(everything)...)
	c.Expect(t, "connected", 30*time.Second)
	c.Expect(t, "listed", 10*time.Second)
	c.Expect(t, "echo", 10*time.Second)
	e := c.Expect(t, "invented", 10*time.Second)
	t.Logf("the client got: %s", e.Outcome)
	c.Closed(t)
	b := k.bundleList(t)
	if len(b) != 1 {
		t.Fatalf("bundles %q, want 1", b)
	}
	rep := k.verified(t, b[0])
	if !strings.HasPrefix(rep, "verdict: verified (bundle, 1 warning)\n") {
		t.Fatalf("want verified with one warning:\n%s", rep)
	}
	var warn []string
	for _, l := range strings.Split(rep, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "warning ") {
			warn = append(warn, l)
		}
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "tool_not_declared") || !strings.Contains(warn[0], `"get_weather_forecast"`) {
		t.Fatalf("want one tool_not_declared warning naming get_weather_forecast, got %q\n%s", warn, rep)
	}
	// README.md quotes this line as the example of a warning.
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// (its line number may differ with the server's own notifications)
	seq := regexp.MustCompile(`seq [0-9]+`)
	if !strings.Contains(seq.ReplaceAllString(string(readme), "seq N"), "\n"+seq.ReplaceAllString(warn[0], "seq N")+"\n") {
		t.Errorf("README.md does not quote the warning as verify prints it:\n%s", warn[0])
	}
	cmd := exec.Command(k.bin, "verify", "--trusted-key", k.key+".pub", "--fail-on", "warning", b[0])
	if out, err := cmd.CombinedOutput(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 4 {
		t.Fatalf("verify --fail-on warning: %v, want exit 4\n%s", err, out)
	}
}

// setSubreaper makes this test process the reaper of orphaned descendants,
// so a test can wait for tracectl after killing the client that started it.
func setSubreaper(t *testing.T) {
	t.Helper()
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Skipf("prctl(PR_SET_CHILD_SUBREAPER): %v", e)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

// TestTSv1KilledWhileServerWrites: the client is killed (SIGKILL) while a
// long call is sending progress. tracectl survives the broken pipe (no
// SIGPIPE death), records what still comes, and seals a bundle that
// verifies; it exits 0 (the client ended the session).
func TestTSv1KilledWhileServerWrites(t *testing.T) {
	sdk := tsclient.V1(t)
	everything := mcptest.EverythingBin(t)
	k := newKit(t)
	setSubreaper(t)
	args := append([]string{k.bin, "wrap", "--bundle-dir", k.bundles, "--key", k.key, "--grace", "1s"}, everything)
	c := tsclient.Start(t, sdk, k.env(), "hang", args...)
	pid := c.Expect(t, "connected", 30*time.Second).PID
	c.Expect(t, "listed", 10*time.Second)
	c.Expect(t, "echo", 10*time.Second)
	c.Expect(t, "progress", 10*time.Second)
	if err := c.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.Wait(t, 20*time.Second)
	// tracectl is now this process's child: wait for it and read its status.
	var ws syscall.WaitStatus
	done := make(chan error, 1)
	go func() { _, err := syscall.Wait4(pid, &ws, 0, nil); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait for tracectl (pid %d): %v", pid, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tracectl did not exit after its client was killed")
	}
	if ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("tracectl ended with %v (signal %v), want exit 0; stderr:\n%s", ws.ExitStatus(), ws.Signal(), c.Stderr())
	}
	b := k.bundleList(t)
	if len(b) != 1 {
		t.Fatalf("bundles %q, want 1", b)
	}
	k.verified(t, b[0])
	if !strings.Contains(c.Stderr(), "client gone before the end") {
		t.Errorf("the summary does not say the client went away:\n%s", c.Stderr())
	}
}

// TestTSv2AutoNegotiation: the TypeScript SDK v2 client in auto version
// negotiation starts the README's snippet twice (a server/discover probe on
// a sibling process, then the session). Both starts work, each gets its own
// bundle, and every bundle verifies.
func TestTSv2AutoNegotiation(t *testing.T) {
	sdk := tsclient.V2(t)
	everything := mcptest.EverythingBin(t)
	k := newKit(t)
	c := tsclient.Start(t, sdk, k.env(), "session", k.snippet(everything)...)
	c.Expect(t, "connected", 30*time.Second)
	c.Expect(t, "listed", 10*time.Second)
	if e := c.Expect(t, "echo", 10*time.Second); e.Text != "Echo: through tracectl" {
		t.Fatalf("echo: %q", e.Text)
	}
	c.Closed(t)
	b := k.bundleList(t)
	if len(b) == 0 || len(b) > 2 {
		t.Fatalf("bundles %q, want the session's (and the probe's, if it sent anything)", b)
	}
	calls := 0
	for _, x := range b {
		if strings.Contains(k.verified(t, x), "1 attempts (1 responses") {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("%d bundles hold the echo call, want 1", calls)
	}
}

// TestSnippetFiveLaunches: the README's snippet started five times, two of
// them at once, by the TypeScript SDK v1 client: five bundles, all verify.
func TestSnippetFiveLaunches(t *testing.T) {
	sdk := tsclient.V1(t)
	everything := mcptest.EverythingBin(t)
	k := newKit(t)
	run := func() error {
		c := tsclient.Start(t, sdk, k.env(), "session", k.snippet(everything)...)
		for _, e := range []string{"connected", "listed", "echo", "closed"} {
			c.Expect(t, e, 30*time.Second)
		}
		return c.Wait(t, 10*time.Second)
	}
	for range 3 {
		if err := run(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() { errs <- run() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b := k.bundleList(t)
	if len(b) != 5 {
		t.Fatalf("bundles %q, want 5", b)
	}
	for _, x := range b {
		k.verified(t, x)
	}
}

// wrapRun is tracectl wrap as a child with its stdio in the test's hands.
type wrapRun struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr *lineLog
	done   chan struct{}
	err    error
}

func (k *lifecycleKit) start(t *testing.T, stdout io.Writer, args ...string) *wrapRun {
	t.Helper()
	cmd := exec.Command(k.bin, append([]string{"wrap", "--bundle-dir", k.bundles, "--key", k.key}, args...)...)
	cmd.Env = k.env()
	cmd.Stdout = stdout
	w := &wrapRun{cmd: cmd, stderr: newLineLog(), done: make(chan struct{})}
	var err error
	if w.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go w.stderr.read(errR)
	go func() { <-w.stderr.eof; w.err = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-w.done })
	return w
}

func (w *wrapRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("tracectl wrap did not exit; stderr:\n%s", w.stderr)
	}
	var ee *exec.ExitError
	if errors.As(w.err, &ee) {
		return ee.ExitCode()
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	return 0
}

// lineLog keeps stderr lines and lets a test wait for one.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
	eof   chan struct{}
}

func newLineLog() *lineLog { return &lineLog{more: make(chan struct{}, 1), eof: make(chan struct{})} }

func (l *lineLog) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		l.mu.Unlock()
		select {
		case l.more <- struct{}{}:
		default:
		}
	}
	close(l.eof)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *lineLog) waitFor(t *testing.T, sub string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(l.String(), sub) {
		select {
		case <-l.more:
		case <-l.eof:
			if !strings.Contains(l.String(), sub) {
				t.Fatalf("stderr ended without %q:\n%s", sub, l)
			}
		case <-deadline:
			t.Fatalf("no %q on stderr:\n%s", sub, l)
		}
	}
}

// TestWrapSIGTERMDuringGrace: the client closed with a call still running
// at the server (5 s of grace by default); SIGTERM (or SIGINT, SIGHUP)
// stops waiting: the open call is resolved unknown, the bundle sealed and
// signed, exit 0.
func TestWrapSIGTERMDuringGrace(t *testing.T) {
	k := newKit(t)
	raw := mcptest.Build(t, "rawserver")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			before := k.bundleList(t)
			out, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			w := k.start(t, outW, raw, "-script", "never-answer", "-pages", "1")
			outW.Close()
			listed(t, w, out)
			io.WriteString(w.in, callLine(7)+"\n")
			w.stderr.waitFor(t, "never-answer: holding tools/call id 7")
			w.in.Close()
			t0 := time.Now()
			if err := w.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := w.wait(t); code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, w.stderr)
			}
			took := time.Since(t0)
			t.Logf("%s to exit: %s", sig, took)
			if took >= 2*time.Second {
				t.Errorf("%s to exit took %s: the grace period was not cut", sig, took)
			}
			if rep := k.verified(t, added(t, before, k.bundleList(t))); !strings.Contains(rep, "1 attempts (0 responses, 0 transport failures, 1 unknown)") {
				t.Errorf("report:\n%s", rep)
			}
		})
	}
}

// listed lists the tools and reads the answer, so the calls that follow
// are bound to the snapshot.
func listed(t *testing.T, w *wrapRun, out io.Reader) {
	t.Helper()
	io.WriteString(w.in, listLine)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, `"tools"`) {
		t.Fatalf("tools/list answer %q, %v; stderr:\n%s", line, err, w.stderr)
	}
}

// listLine lists the tools (one page) the calls are then bound to.
const listLine = `{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{}}` + "\n"

func callLine(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"raw-0000","arguments":{}}}`, id)
}

// TestWrapClientGone: the client closes its reading end before the answer
// comes. tracectl is not killed by SIGPIPE: the answer is recorded, the
// bundle sealed and verified, and the summary says the client went away.
func TestWrapClientGone(t *testing.T) {
	k := newKit(t)
	raw := mcptest.Build(t, "rawserver")
	r, wpipe, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w := k.start(t, wpipe, raw, "-script", "paged", "-pages", "1", "-call-delay", "50ms")
	wpipe.Close()
	listed(t, w, r)
	r.Close() // nobody reads any more: the next write to the client fails with EPIPE
	io.WriteString(w.in, callLine(1)+"\n")
	w.in.Close()
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, w.stderr)
	}
	if !strings.Contains(w.stderr.String(), "client gone before the end") {
		t.Errorf("summary:\n%s", w.stderr)
	}
	b := k.bundleList(t)
	if len(b) != 1 {
		t.Fatalf("bundles %q", b)
	}
	if rep := k.verified(t, b[0]); !strings.Contains(rep, "1 attempts (1 responses") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestWrapServerEndings: wrap's exit status and cleanup for each way a
// server ends; every bundle is sealed, signed and verifies.
func TestWrapServerEndings(t *testing.T) {
	k := newKit(t)
	for _, tc := range []struct {
		name  string
		body  string
		close bool // the client closes stdin (else the server ends first)
		code  int
	}{
		{"exits 3 on its own", "read line; exit 3", false, 3},
		{"killed by SIGKILL", "read line; kill -9 $$", false, 137},
		{"exits 1 when asked to stop", "cat >/dev/null; exit 1", true, 0},
		{"ignores stdin close and SIGTERM", "trap '' TERM; while :; do sleep 1; done", true, 0},
		{"leaves a grandchild", "sleep 1000 & cat >/dev/null", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "pid")
			script := filepath.Join(dir, "server.sh")
			os.WriteFile(script, []byte("echo $$ > "+pidfile+"\n"+tc.body+"\n"), 0o700)
			before := k.bundleList(t)
			w := k.start(t, io.Discard, "--shutdown-timeout", "100ms", "sh", script)
			io.WriteString(w.in, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
			if tc.close {
				w.in.Close()
			}
			t0 := time.Now()
			code := w.wait(t)
			t.Logf("exit %d after %s; stderr:\n%s", code, time.Since(t0), w.stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, w.stderr)
			}
			k.verified(t, added(t, before, k.bundleList(t)))
			pgid := readPid(t, pidfile)
			if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) && liveInGroup(pgid) {
				t.Errorf("process group %d still has a live process", pgid)
			}
		})
	}
}

// added is the one bundle in after that is not in before.
func added(t *testing.T, before, after []string) string {
	t.Helper()
	var n []string
	for _, x := range after {
		if !slices.Contains(before, x) {
			n = append(n, x)
		}
	}
	if len(n) != 1 {
		t.Fatalf("new bundles %q, want exactly one", n)
	}
	return n[0]
}

func readPid(t *testing.T, f string) int {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// liveInGroup: a process of the group that is not a zombie waiting for
// init to reap it.
func liveInGroup(pgid int) bool {
	m, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range m {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(s[i+1:])
		if len(fs) >= 3 && fs[2] == strconv.Itoa(pgid) && fs[0] != "Z" {
			return true
		}
	}
	return false
}

// TestWrapServerFailsAtStart: a server that exits with a failure before
// any client byte arrives gives wrap its status, whether the client is
// still connected or already at EOF (the race a launcher's probe makes);
// nothing was recorded, so no bundle is left. A server that exits 0 at the
// same point leaves wrap at 0.
func TestWrapServerFailsAtStart(t *testing.T) {
	k := newKit(t)
	for _, tc := range []struct {
		name      string
		body      string
		clientEOF bool
		code      int
	}{
		{"exit 3, client connected", "exit 3", false, 3},
		{"exit 3, client at EOF", "exit 3", true, 3},
		{"exit 0, client at EOF", "exit 0", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := k.bundleList(t)
			w := k.start(t, io.Discard, "sh", "-c", tc.body)
			if tc.clientEOF {
				w.in.Close()
			}
			code := w.wait(t)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, w.stderr)
			}
			if after := k.bundleList(t); len(after) != len(before) {
				t.Errorf("bundles %q after a start with no client byte, want none added", after)
			}
			if !tc.clientEOF {
				w.in.Close()
			}
		})
	}
}
