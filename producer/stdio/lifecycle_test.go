//go:build unix

package stdio

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"
)

// events collects Config.Event steps; wait blocks until one arrives, so
// tests synchronize on what the proxy did, never on sleeps.
type events struct {
	mu    sync.Mutex
	steps []string
	seen  map[string]chan struct{}
	on    map[string]func()
}

func newEvents() *events {
	return &events{seen: map[string]chan struct{}{}, on: map[string]func(){}}
}

func (e *events) ch(step string) chan struct{} {
	c, ok := e.seen[step]
	if !ok {
		c = make(chan struct{})
		e.seen[step] = c
	}
	return c
}

func (e *events) event(step string) {
	e.mu.Lock()
	e.steps = append(e.steps, step)
	c := e.ch(step)
	f := e.on[step]
	e.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
	if f != nil {
		f()
	}
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.steps)
}

func (e *events) has(step string) bool { return slices.Contains(e.list(), step) }

func (e *events) wait(t *testing.T, step string) {
	t.Helper()
	e.mu.Lock()
	c := e.ch(step)
	e.mu.Unlock()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q event; events so far %q", step, e.list())
	}
}

// pingLine is a frame the gate forwards (the servers here only read a line).
const pingLine = `{"jsonrpc":"2.0","id":1,"method":"ping"}`

// never is a grace period no test waits out: a Run that returns while it
// is pending was released by something else.
const never = 24 * time.Hour

func cancelLine(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"test"}}`
}

// TestCancelledCallDoesNotHoldGrace: a call the client cancelled before
// closing is not waited for (the TypeScript SDK cancels, closes, and sends
// SIGTERM 2 s later): Run returns with it abandoned as unknown.
func TestCancelledCallDoesNotHoldGrace(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	ev := newEvents()
	c := startProxy(t, sink, Config{Grace: never, Event: ev.event}, raw, "-script", "never-answer")
	c.send(callLine("1", "raw-0000"))
	c.send(cancelLine("1"))
	res, err := c.finish()
	if err != nil {
		t.Fatal(err)
	}
	if ev.has("grace") || len(res.InFlight) != 1 || res.Ended != session.EndClientEOF || res.EndedOnItsOwn {
		t.Fatalf("events %q, result %+v: want no grace, the cancelled call abandoned, ended by the client", ev.list(), res)
	}
	if got := strings.Join(sink.log(), ";"); got != "attempt a1;cancel a1" {
		t.Errorf("sink log %q", got)
	}
}

// TestSignalCutsGrace: cancelling ctx (what SIGTERM does in wrap) during
// the grace period stops waiting at once; the open call stays unknown.
func TestSignalCutsGrace(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := newEvents()
	ev.on["grace"] = cancel
	sink := &memSink{}
	inR, inW := io.Pipe()
	done := make(chan struct{})
	var res *producer.SessionResult
	var runErr error
	go func() {
		res, runErr = Run(ctx, Config{Command: raw, Args: []string{"-script", "never-answer"}, ClientIn: inR, ClientOut: io.Discard,
			ServerErr: io.Discard, sink: sink, Grace: never, Event: ev.event})
		close(done)
	}()
	io.WriteString(inW, callLine("1", "raw-0000")+"\n")
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return after the signal; events %q", ev.list())
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	want := []string{"ended client_eof", "grace", "grace canceled", "stdin closed"}
	if got := ev.list(); !slices.Equal(got[:min(len(got), 4)], want) || got[len(got)-1] != "done" {
		t.Errorf("events %q, want %q first, done last", got, want)
	}
	if len(res.InFlight) != 1 || res.TransportFailures != 0 {
		t.Errorf("result %+v: want the open call abandoned in flight", res)
	}
}

// TestGraceEnds: an open call the client did not cancel holds the grace
// period until its timer fires (the timer is the test's).
func TestGraceEnds(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	fire := make(chan time.Time)
	after := func(d time.Duration) <-chan time.Time {
		if d == never {
			return fire
		}
		return time.After(d)
	}
	ev := newEvents()
	c := startProxy(t, &memSink{}, Config{Grace: never, After: after, Event: ev.event}, raw, "-script", "never-answer")
	c.send(callLine("1", "raw-0000"))
	c.in.Close()
	ev.wait(t, "grace")
	select {
	case <-c.done:
		t.Fatalf("Run returned during the grace period; events %q", ev.list())
	default:
	}
	close(fire)
	res, err := c.finish()
	if err != nil {
		t.Fatal(err)
	}
	if !ev.has("grace over") || len(res.InFlight) != 1 {
		t.Errorf("events %q, result %+v", ev.list(), res)
	}
}

// shServer writes a shell script the test runs as the "server"; it writes
// its pid (its process group) to pidfile first.
func shServer(t *testing.T, body string) (script, pidfile string) {
	t.Helper()
	dir := t.TempDir()
	pidfile = filepath.Join(dir, "pid")
	script = filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte("cd "+dir+"\necho $$ > "+pidfile+"\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return script, pidfile
}

func groupOf(t *testing.T, pidfile string) int {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// groupGone: no process of the server's group is left (zombies of an
// exited parent are reaped by init, so allow it a moment).
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) || !liveMember(pgid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has processes (kill 0: %v)", pgid, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServerLifecycle: how each kind of server ends, what Run reports, and
// that nothing of its process group is left behind.
func TestServerLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		client string // what the client sends before closing ("" = close at once)
		code   int
		own    bool
		ended  string
		steps  []string // events that must appear
		absent []string // events that must not
		// slow: a server expected to exit by itself gets 5 s per shutdown
		// step, so a loaded machine cannot turn its exit into a SIGTERM.
		slow bool
	}{
		{name: "exits 3 on its own", body: "read line; exit 3", client: pingLine, code: 3, own: true, ended: session.EndServerExit, absent: []string{"sigterm"}},
		{name: "killed by a signal", body: "read line; kill -9 $$", client: pingLine, code: 128 + 9, own: true, ended: session.EndServerExit},
		{name: "exits on stdin close", body: "cat >/dev/null; exit 1", code: 1, own: false, ended: session.EndClientEOF, absent: []string{"sigterm"}, slow: true},
		{name: "ignores stdin close, obeys SIGTERM", body: "while :; do sleep 1; done", code: 128 + 15, ended: session.EndClientEOF, steps: []string{"sigterm"}},
		{name: "ignores stdin close and SIGTERM", body: "trap '' TERM; while :; do sleep 1; done", code: 128 + 9, ended: session.EndClientEOF, steps: []string{"sigterm", "sigkill"}},
		{name: "leaves a grandchild holding stdout", body: "sleep 1000 & cat >/dev/null", code: 0, ended: session.EndClientEOF, steps: []string{"group sigterm"}, absent: []string{"drain cut", "sigterm"}, slow: true},
		{name: "exits on its own, grandchild ignoring SIGTERM", body: "mkfifo ready; (trap '' TERM; echo > ready; exec sleep 1000) & read x < ready; read line; exit 0", client: pingLine, code: 0, own: true, ended: session.EndServerExit, steps: []string{"group sigterm", "group sigkill"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, pidfile := shServer(t, tc.body)
			ev := newEvents()
			step := 50 * time.Millisecond
			if tc.slow {
				step = 5 * time.Second
			}
			c := startProxy(t, &memSink{}, Config{KillAfter: step, Event: ev.event}, "/bin/sh", script)
			if tc.client != "" {
				c.send(tc.client)
			}
			if tc.ended == session.EndServerExit {
				ev.wait(t, "done")
			}
			res, err := c.finish()
			if err != nil {
				t.Fatal(err)
			}
			ended := res.Ended
			if ended == session.EndServerStdout {
				ended = session.EndServerExit // which of the two the proxy saw first is the scheduler's choice
			}
			if res.ExitCode != tc.code || res.EndedOnItsOwn != tc.own || ended != tc.ended {
				t.Errorf("result %+v, want exit code %d, on its own %v, ended %s", res, tc.code, tc.own, tc.ended)
			}
			for _, s := range tc.steps {
				if !ev.has(s) {
					t.Errorf("no %q event: %q", s, ev.list())
				}
			}
			for _, s := range tc.absent {
				if ev.has(s) {
					t.Errorf("unexpected %q event: %q", s, ev.list())
				}
			}
			groupGone(t, groupOf(t, pidfile))
		})
	}
}

// TestNoGrace: a negative Grace (wrap's --grace 0) does not wait for open
// calls at all.
func TestNoGrace(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	ev := newEvents()
	c := startProxy(t, &memSink{}, Config{Grace: -1, Event: ev.event}, raw, "-script", "never-answer")
	c.send(callLine("1", "raw-0000"))
	res, err := c.finish()
	if err != nil {
		t.Fatal(err)
	}
	if ev.has("grace") || len(res.InFlight) != 1 {
		t.Errorf("events %q, result %+v: want no grace, the call abandoned", ev.list(), res)
	}
}
