//go:build unix

package stdio

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer/internal/session"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// requireUnknownOnly checks a report whose only departures from a clean
// pass are the info findings that say an outcome is unknown: the verdict
// is verified (an unknown outcome is honest evidence, not a failure of
// verification) and outcome_unknown names exactly the given attempts.
func requireUnknownOnly(t *testing.T, rep *verify.Report, attempts ...string) {
	t.Helper()
	requireVerified(t, rep)
	var got []string
	for _, f := range rep.Find(verify.CodeOutcomeUnknown) {
		got = append(got, f.Subject)
	}
	var want []string
	for _, a := range attempts {
		want = append(want, "attempt "+a)
	}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("outcome_unknown findings for %q, want %q", got, want)
	}
}

// TestWrapServerKilledMidCall: the server is SIGKILLed while a call runs.
// The attempt gets a transport_failure observation naming the signal, the
// client a JSON-RPC error for its id, and the bundle verifies with the
// outcome reported unknown.
func TestWrapServerKilledMidCall(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "sdkserver")
	w := startWrap(t, wrapOpts{}, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := w.connect(ctx, legacyVersion, nil)
	listAll(ctx, t, cs, nil)
	if _, err := callTool(ctx, cs, "echo", map[string]any{"before": true}); err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, cs, "slow", map[string]any{"ms": 60000})
		callErr <- err
	}()
	// Strict durability: the attempt is on disk before the request is
	// forwarded, so once it is there the call is (about to be) in the
	// server's hands.
	waitJournal(t, w.dir, "the slow attempt", isAttempt("slow"))
	time.Sleep(50 * time.Millisecond)
	if err := syscall.Kill(int(w.pid.Load()), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-callErr:
	case <-time.After(15 * time.Second):
		t.Fatal("the client got no answer for the call the server died with")
	}
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != mcpwire.CodeTransportFailure {
		t.Fatalf("client error %v (%T), want JSON-RPC error %d", err, err, mcpwire.CodeTransportFailure)
	}
	// Run ends on its own: the server is gone.
	res, runErr := w.wait()
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	if res.TransportFailures != 1 || len(res.InFlight) != 0 || res.ExitStatus != "signal: killed" {
		t.Errorf("Result %+v, want one transport failure, exit status signal: killed", res)
	}
	cs.Close()
	sealed := w.seal()

	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	echo, slow := j.attemptFor(t, "3"), j.attempt(t, "a2")
	if echo.Tool != "echo" || j.history(echo.AttemptID) != "response" {
		t.Errorf("the call before the kill: %s %q", echo.Tool, j.history(echo.AttemptID))
	}
	if slow.Tool != "slow" || j.history("a2") != transcript.ObsTransportFailure {
		t.Fatalf("the call the server died with: %s %q, want transport_failure", slow.Tool, j.history("a2"))
	}
	if d := j.observations("a2")[0].Detail; !strings.Contains(d, "signal: killed") {
		t.Errorf("transport failure detail %q does not name the signal", d)
	}
	if c := sealed.Seal; c.Attempts != 2 || c.Responses != 1 || c.TransportFailures != 1 || c.Unknown != 0 {
		t.Errorf("seal %+v", c)
	}
	requireUnknownOnly(t, verifyBundle(t, w.dir, w.signer.Public()), "a2")
}

// TestWrapTimeoutNeverAnswered: a server that never answers a call. With a
// call timeout the attempt gets a timeout observation while the session goes
// on; at the end of the session (grace over) it is still unknown, and the
// seal counts it so. The client is never sent an invented answer.
func TestWrapTimeoutNeverAnswered(t *testing.T) {
	t.Parallel()
	raw := mcptest.Build(t, "rawserver")
	w := startWrap(t, wrapOpts{callTimeout: 100 * time.Millisecond, grace: 300 * time.Millisecond}, raw, "-script", "never-answer")
	c := w.raw()
	c.legacyHandshake()
	c.listPaged()
	c.send(callLine("5", "raw-0000"))
	waitJournal(t, w.dir, "the timeout", isObservation(transcript.ObsTimeout))
	c.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if r := c.recv(); string(r.ID) != "6" {
		t.Fatalf("after the timeout the client got %s, want the ping's answer", r.raw)
	}
	res := w.end()
	if len(res.InFlight) != 1 || res.InFlight[0] != "a1" || res.TransportFailures != 0 {
		t.Errorf("Result %+v, want a1 left in flight", res)
	}
	sealed := w.seal()
	for _, l := range splitWire(t, w.got.Bytes()) {
		if string(l.ID) == "5" {
			t.Errorf("the client was sent %s for the unanswered call", l.raw)
		}
	}
	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	// A timeout already makes the outcome unknown: the seal adds no
	// resolution for it (only attempts with no observation at all get one).
	if h := j.history("a1"); h != transcript.ObsTimeout {
		t.Errorf("history %q, want timeout", h)
	}
	if c := sealed.Seal; c.Attempts != 1 || c.Unknown != 1 {
		t.Errorf("seal %+v", c)
	}
	requireUnknownOnly(t, verifyBundle(t, w.dir, w.signer.Public()), "a1")
}

// TestWrapTimeoutLateResponse: a call slower than the call timeout. The
// timeout is recorded; the response that comes later is recorded as a late
// response and still reaches the client, which was never answered.
func TestWrapTimeoutLateResponse(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "sdkserver")
	w := startWrap(t, wrapOpts{callTimeout: 100 * time.Millisecond}, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := w.connect(ctx, legacyVersion, nil)
	listAll(ctx, t, cs, nil)
	res, err := callTool(ctx, cs, "slow", map[string]any{"ms": 600})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "slept 600 ms" {
		t.Fatalf("slow call: %v %v, want its real result", res, err)
	}
	cs.Close()
	w.end()
	sealed := w.seal()
	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	if h := j.history("a1"); h != "timeout,late_response" {
		t.Errorf("history %q, want timeout,late_response", h)
	}
	if c := sealed.Seal; c.Responses != 1 || c.Unknown != 0 {
		t.Errorf("seal %+v: a late response is a response", c)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// TestWrapServerClosesStdout: the server closes its stdout on a call but
// keeps running. The proxy cannot get an answer any more: transport failure,
// an error to the client, and the server is shut down politely (its stdin
// closed: it exits 0).
func TestWrapServerClosesStdout(t *testing.T) {
	t.Parallel()
	raw := mcptest.Build(t, "rawserver")
	w := startWrap(t, wrapOpts{}, raw, "-script", "close-stdout-unanswered")
	c := w.raw()
	c.legacyHandshake()
	c.listPaged()
	c.send(callLine(`"call-1"`, "raw-0000"))
	r := c.recv()
	if string(r.ID) != `"call-1"` || r.Error == nil || r.Error.Code != mcpwire.CodeTransportFailure {
		t.Fatalf("client got %s, want error %d for id \"call-1\"", r.raw, mcpwire.CodeTransportFailure)
	}
	res, err := w.wait() // ends on its own
	if err != nil {
		t.Fatal(err)
	}
	if res.TransportFailures != 1 || res.ExitStatus != "exit status 0" {
		t.Errorf("Result %+v, want one transport failure and a polite exit", res)
	}
	w.seal()
	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	if h := j.history("a1"); h != transcript.ObsTransportFailure {
		t.Fatalf("history %q", h)
	}
	if d := j.observations("a1")[0].Detail; !strings.Contains(d, "closed stdout") {
		t.Errorf("detail %q does not say the server closed stdout", d)
	}
	requireUnknownOnly(t, verifyBundle(t, w.dir, w.signer.Public()), "a1")
}

// TestWrapInputRequiredContinuation: a call answered input_required and its
// continuation (a new id with requestState and inputResponses) are two
// attempts, the second linked to the first as a continuation.
func TestWrapInputRequiredContinuation(t *testing.T) {
	t.Parallel()
	raw := mcptest.Build(t, "rawserver")
	w := startWrap(t, wrapOpts{}, raw, "-script", "input-required")
	c := w.raw()
	c.legacyHandshake()
	c.listPaged()
	c.send(callLine("1", "greet"))
	if r := c.recv(); !strings.Contains(string(r.Result), `"input_required"`) {
		t.Fatalf("first call: %s", r.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","requestState":"step=1",` +
		`"inputResponses":{"who":{"action":"accept","content":{"name":"Ada"}}}}}`)
	if r := c.recv(); !strings.Contains(string(r.Result), `"hello Ada"`) {
		t.Fatalf("continuation: %s", r.raw)
	}
	w.end()
	w.seal()
	j := readJournal(t, w.dir)
	w.checkTraffic(j)
	first, second := j.attemptFor(t, "1"), j.attemptFor(t, "2")
	if o := j.observations(first.AttemptID); len(o) != 1 || o[0].ResultType != "input_required" {
		t.Errorf("first attempt observations %+v, want one input_required result", o)
	}
	if second.RetryOf != first.AttemptID || second.RetryBasis != transcript.BasisContinuation {
		t.Errorf("continuation: retry_of %q basis %q, want %s continuation", second.RetryOf, second.RetryBasis, first.AttemptID)
	}
	if o := j.observations(second.AttemptID); len(o) != 1 || o[0].ResultType != "complete" {
		t.Errorf("second attempt observations %+v", o)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// fullDisk is the one fake here: a file system where one file (the
// journal, or the payload spool) fails with ENOSPC once it would grow past
// limit bytes, after writing what fits (as a real full disk does), so the
// producer's roll-back is exercised too.
type fullDisk struct {
	producer.FS
	target string       // base name of the file that hits the limit
	limit  atomic.Int64 // its size allowed; < 0: no limit
	size   atomic.Int64 // its size written through this FS
}

func (d *fullDisk) OpenFile(name string, flag int, perm fs.FileMode) (producer.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != d.target || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return f, err
	}
	if st, err := f.Stat(); err == nil {
		d.size.Store(st.Size())
	}
	return &fullFile{File: f, d: d, name: name}, nil
}

type fullFile struct {
	producer.File
	d    *fullDisk
	name string
}

func (f *fullFile) Write(p []byte) (int, error) {
	cur, lim := f.d.size.Load(), f.d.limit.Load()
	if lim >= 0 && cur+int64(len(p)) > lim {
		n, _ := f.File.Write(p[:max(0, lim-cur)])
		f.d.size.Add(int64(n))
		return n, &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	n, err := f.File.Write(p)
	f.d.size.Add(int64(n))
	return n, err
}

func (f *fullFile) Truncate(size int64) error {
	err := f.File.Truncate(size)
	if err == nil {
		f.d.size.Store(size)
	}
	return err
}

// TestWrapDiskFull: the bundle's disk fills up, while writing the journal
// line of an attempt or the payload bytes packed before it. The call that
// cannot be recorded is not forwarded (the server, logging every line it
// reads, never sees it), the client gets -32091 (audit unavailable) for it, the session goes on,
// the failure is sticky, and the journal on disk stays a valid transcript:
// it can be recovered and sealed once there is space, and then verifies.
func TestWrapDiskFull(t *testing.T) {
	t.Parallel()
	for _, target := range []string{transcript.TranscriptFile, transcript.PackFile} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			testDiskFull(t, target)
		})
	}
}

func testDiskFull(t *testing.T, target string) {
	raw := mcptest.Build(t, "rawserver")
	disk := &fullDisk{FS: producer.OS, target: target}
	disk.limit.Store(-1)
	w := startWrap(t, wrapOpts{fs: disk}, raw, "-v", "-script", "paged")
	c := w.raw()
	c.legacyHandshake()
	c.listPaged()
	c.send(callLine("3", "raw-0000"))
	if r := c.recv(); string(r.ID) != "3" || r.Error != nil {
		t.Fatalf("call before the disk filled: %s", r.raw)
	}
	before, err := os.ReadFile(filepath.Join(w.dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	if disk.size.Load() == 0 {
		t.Fatalf("nothing was written to %s: the fault would never fire", target)
	}
	disk.limit.Store(disk.size.Load() + 10) // room for 10 bytes of the next write

	for _, id := range []string{"4", "6"} {
		c.send(callLine(id, "raw-0001"))
		r := c.recv()
		if string(r.ID) != id || r.Error == nil || r.Error.Code != mcpwire.CodeAuditUnavailable || !strings.Contains(r.Error.Message, "audit unavailable") {
			t.Fatalf("call %s on a full disk: client got %s, want error %d", id, r.raw, mcpwire.CodeAuditUnavailable)
		}
		if id == "4" {
			// Every frame is committed before it is forwarded: with the
			// audit unavailable, a ping is not forwarded either.
			c.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
			if r := c.recv(); string(r.ID) != "5" || r.Error == nil || r.Error.Code != mcpwire.CodeAuditUnavailable {
				t.Fatalf("ping after the refused call: %s", r.raw)
			}
		}
	}
	c.w.clientW.Close()
	_, runErr := w.wait()
	if !errors.Is(runErr, session.ErrAuditUnavailable) {
		t.Fatalf("Run error %v, want session.ErrAuditUnavailable", runErr)
	}
	// The server read exactly one tools/call: the one recorded.
	var calls []string
	for _, l := range strings.Split(w.stderr.String(), "\n") {
		if strings.Contains(l, "<- ") && strings.Contains(l, `"tools/call"`) {
			calls = append(calls, l)
		}
	}
	if len(calls) != 1 || !strings.Contains(calls[0], `"id":3,`) {
		t.Fatalf("the server read these tools/call lines: %q, want only id 3", calls)
	}
	// The torn 10 bytes were rolled back: the journal is exactly what it
	// was, a valid transcript read to its end.
	after, err := os.ReadFile(filepath.Join(w.dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("journal changed on a failed write: %d bytes before, %d after", len(before), len(after))
	}
	j := readJournal(t, w.dir)
	if a := j.attempts(); len(a) != 1 || a[0].RPCID.Text != "3" {
		t.Fatalf("attempts %+v, want only id 3's", a)
	}
	// Sealing needs the journal: it fails closed too.
	if _, err := w.rec.Seal(context.Background(), recordSigner{w.signer}); !errors.Is(err, producer.ErrAuditUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Seal on a full disk: %v, want session.ErrAuditUnavailable wrapping ENOSPC", err)
	}
	// Space again: the bundle recovers and seals as it was.
	disk.limit.Store(-1)
	rec, err := recoverBundle(w.dir, producer.Options{Clock: time.Now, FS: disk})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep := rec.Recovery(); len(rep.Torn) != 0 || len(rep.Resolved) != 0 {
		t.Errorf("recovery %+v: want no torn journal line, nothing in flight", rep)
	}
	if _, err := rec.Seal(context.Background(), recordSigner{w.signer}); err != nil {
		t.Fatal(err)
	}
	j = readJournal(t, w.dir)
	if s := j.seal(t); s.Attempts != 1 || s.Responses != 1 || !s.Recovered {
		t.Errorf("seal %+v", s)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// recoverBundle is producer.Recover for a bundle this test process just
// closed. The journal's lock is a flock on its open file description, and
// a parallel test of this package that forks a server process at that
// moment holds a copy of the descriptor, and with it the lock, until its
// child execs (the descriptor is close-on-exec). The kernel says nothing
// when that happens, so a locked bundle is tried again for a bounded while;
// a separate seal process, as in production, never meets this.
func recoverBundle(dir string, opts producer.Options) (*producer.Recorder, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := producer.Recover(dir, opts)
		if !errors.Is(err, producer.ErrLocked) || time.Now().After(deadline) {
			return rec, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
