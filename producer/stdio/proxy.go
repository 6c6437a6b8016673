// Package stdio is tracectl wrap's transport: it starts an MCP server as a
// process and puts the recording session core (package session) between
// the client's stdio and the server's. It moves bytes and manages the
// process's lifecycle (the grace period for open calls, SIGTERM and
// SIGKILL to the server's process group, the drain of what the server
// wrote); what is read, committed, forwarded, refused and answered is the
// session core's (spec/transcript.md, "The gate", "Frames";
// spec/wrap.md).
package stdio

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/snapshot"
)

// Config configures a proxy run.
type Config struct {
	Command string
	Args    []string
	Env     []string // nil: inherit
	Dir     string

	ClientIn  io.Reader // the MCP client's requests (our stdin)
	ClientOut io.Writer // to the MCP client (our stdout)
	ServerErr io.Writer // where the server's stderr goes (our stderr)

	// Recorder is where the session is recorded; it must have been opened
	// with producer.Options.FramesCommitted (every frame is committed).
	Recorder *producer.Recorder
	// CaptureID mints snapshot capture ids (nil: from crypto/rand).
	CaptureID func() (string, error)
	// SnapshotLimits bound the collection of tools/list pages (zero:
	// snapshot's defaults).
	SnapshotLimits snapshot.Limits
	// Capture says when the session collects the server's complete
	// tools/list itself before forwarding a call: "auto" (the default:
	// when no complete snapshot of the session is current), "always" or
	// "never". CaptureTimeout bounds the wait for each page (default
	// 30 s).
	Capture        string
	CaptureTimeout time.Duration

	CallTimeout time.Duration // 0: none
	Grace       time.Duration // how long open calls may finish after client EOF (0: DefaultGrace; negative: none)
	KillAfter   time.Duration // after closing the server's stdin: wait this long, then SIGTERM, then SIGKILL after this again
	Started     func(pid int) // optional: called once the server runs
	// After is the timer of every lifecycle wait (grace, shutdown steps,
	// drain); default time.After. Tests inject one to decide when a wait
	// ends instead of sleeping.
	After func(time.Duration) <-chan time.Time
	// Event, optional, is told each lifecycle step as it happens ("ended
	// client_eof", "grace", "grace over", "stdin closed", "sigterm",
	// "sigkill", "group sigterm", "group sigkill", "drain cut", "done"),
	// so tests synchronize on events rather than on sleeps.
	Event func(step string)
	// MaxInterpret bounds the bytes of one frame held in memory to read it
	// (default, and at most, 64 MiB: the gate's limit). A longer client frame is
	// refused; a longer server frame is spooled, committed and withheld.
	MaxInterpret int
	// SpoolDir is where a server frame over MaxInterpret is spooled while
	// it is hashed and committed (default os.TempDir()). The spool file is
	// created exclusively, mode 0600, and removed once delivered.
	SpoolDir string
	// MaxRetain bounds how much of a refused oversized client frame is
	// spooled so the recorder can retain it (default
	// producer.DefaultMaxFrameBytes; set it to the recorder's
	// MaxFrameBytes): past it the frame is only hashed.
	MaxRetain int64
	// MaxServerFrame bounds a server frame the proxy spools to deliver
	// (default 1 GiB). A longer one is committed by digest
	// and length and withheld: it cannot be committed before delivery
	// without holding it whole.
	MaxServerFrame int64
	// MaxLargeResponse bounds a server frame over MaxInterpret that is
	// still read (in memory, from its spool) because it begins as the
	// answer to a call waiting for it: bound as that call's response and
	// delivered as mediation decides (default 256 MiB, never past
	// MaxServerFrame). A longer one is committed by digest and withheld.
	MaxLargeResponse int64

	// sink replaces the recorder in tests (a fault, or nothing recorded).
	sink session.Sink
}

// Default lifecycle durations (Config.Grace, Config.KillAfter). They are
// short on purpose: real MCP clients end a server on their own clock (the
// TypeScript SDK closes stdin, sends SIGTERM after 2 s and SIGKILL after
// 4 s), and evidence that is sealed after the client's SIGKILL is lost.
const (
	DefaultGrace     = 5 * time.Second
	DefaultKillAfter = 400 * time.Millisecond
	// signalStep bounds each shutdown step once ctx is cancelled (the
	// operator or the client signalled tracectl): open calls are no longer
	// waited for and the whole shutdown fits in well under 0.5 s.
	signalStep = 120 * time.Millisecond
)

// Run starts the server and proxies until the client closes its input (or
// ctx is cancelled, or the server goes away) and the server has been shut
// down. Every frame the server wrote before it closed stdout is committed,
// and delivered unless withheld, before Run returns.
//
// Shutdown follows the client's clock: after client EOF, tools/call
// requests still open at the server may finish for Grace (a call the
// client cancelled does not hold it); cancelling ctx at any point stops
// waiting. Then the server's stdin is closed, and after KillAfter its
// process group gets SIGTERM, and after KillAfter again SIGKILL (steps of
// at most signalStep once ctx is cancelled). Processes the server started
// in its group are ended too, even when the server exits on its own.
//
// Run installs no signal handlers: a caller writing to a pipe (fd 1) must
// handle SIGPIPE itself (signal.Notify), or a client that goes away kills
// the process before anything is sealed. A failed write to the client is
// reported once as a client_gone session event; recording goes on.
//
// Before it returns, Run records a tools/list collection the session left
// unfinished (incomplete); then seal the recorder.
func Run(ctx context.Context, cfg Config) (*producer.SessionResult, error) {
	if cfg.sink != nil {
		return run(ctx, cfg)
	}
	if cfg.Recorder == nil {
		return nil, errors.New("stdio: Config.Recorder is nil")
	}
	switch cfg.Capture {
	case "", session.CaptureAuto, session.CaptureAlways, session.CaptureNever:
	default:
		return nil, fmt.Errorf("stdio: Config.Capture %q: want auto, always or never", cfg.Capture)
	}
	captureID := cfg.CaptureID
	if captureID == nil {
		captureID = func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }
	}
	rs := session.NewRecordingSink(cfg.Recorder, captureID, cfg.SnapshotLimits)
	cfg.sink = rs
	res, err := run(ctx, cfg)
	err = errors.Join(err, rs.Finish())
	if res != nil {
		res.RefusedFrames, res.OversizedFrames, res.UnreadableListRequests = rs.RefusedFrames(), rs.OversizedFrames(), rs.UnreadableListRequests()
	}
	return res, err
}

func run(ctx context.Context, cfg Config) (*producer.SessionResult, error) {
	cfg = cfg.withDefaults()
	changed := make(chan struct{}, 1)

	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env, cmd.Dir = cfg.Env, cfg.Dir
	// The server's stderr through a pipe of our own too, so that Wait
	// does not wait for a grandchild holding it: only the server itself.
	var errR, errW *os.File
	errDone := make(chan struct{})
	if _, ok := cfg.ServerErr.(*os.File); ok || cfg.ServerErr == nil {
		cmd.Stderr = cfg.ServerErr
		close(errDone)
	} else {
		var err error
		if errR, errW, err = os.Pipe(); err != nil {
			return nil, err
		}
		cmd.Stderr = errW
	}
	ownGroup(cmd)
	serverIn, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe for stdout, so that Wait (on exit) never closes the read
	// end while bytes are still to be forwarded.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if errR != nil {
			errR.Close()
			errW.Close()
		}
		return nil, fmt.Errorf("start server %q: %w", cfg.Command, err)
	}
	pw.Close()
	if errR != nil {
		errW.Close()
		go func() { _, _ = io.Copy(cfg.ServerErr, errR); close(errDone) }()
	}
	if cfg.Started != nil {
		cfg.Started(cmd.Process.Pid)
	}
	sess := session.New(session.Config{
		Sink: cfg.sink, CallTimeout: cfg.CallTimeout, Event: cfg.Event,
		MaxInterpret: cfg.MaxInterpret, SpoolDir: cfg.SpoolDir, MaxRetain: cfg.MaxRetain, MaxServerFrame: cfg.MaxServerFrame,
		MaxLargeResponse: cfg.MaxLargeResponse,
		Capture:          cfg.Capture, CaptureTimeout: cfg.CaptureTimeout,
		Changed: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	}, session.Streams{ClientIn: cfg.ClientIn, ClientOut: cfg.ClientOut, ServerIn: serverIn, ServerOut: pr})
	s := &lifecycle{cfg: cfg}

	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	clientDone, serverDone := sess.Start()

	var clientErr error
	stdoutClosed := false
	ended := ""
	select {
	case clientErr = <-clientDone:
		ended = session.EndClientEOF
	case <-ctx.Done():
		ended = session.EndCanceled
	case <-serverDone:
		stdoutClosed = true
		ended = session.EndServerStdout
	case <-exited:
		ended = session.EndServerExit
	}
	cfg.Event("ended " + ended)
	// Stop taking client input into account; let open calls finish for a
	// grace period while the server can still answer. Every change to the
	// open calls goes through the Sink, which wakes this loop.
	if cfg.Grace > 0 && !stdoutClosed && !isClosed(exited) && ctx.Err() == nil && sess.OpenCalls() > 0 {
		cfg.Event("grace")
		deadline := cfg.After(cfg.Grace)
	wait:
		for sess.OpenCalls() > 0 {
			select {
			case <-deadline:
				cfg.Event("grace over")
				break wait
			case <-ctx.Done():
				cfg.Event("grace canceled")
				break wait
			case <-serverDone:
				stdoutClosed = true
				break wait
			case <-exited:
				break wait
			case <-changed:
			}
		}
	}
	// The server ended on its own when it went away before the proxy asked
	// it to (by closing its stdin).
	onItsOwn := stdoutClosed || isClosed(exited)
	serverGone := onItsOwn
	sess.Stop()
	serverIn.Close()
	cfg.Event("stdin closed")
	s.terminate(ctx, cmd, exited)
	s.endGroup(ctx, cmd.Process.Pid)
	if !stdoutClosed {
		// The server has exited; drain what it wrote, however long that
		// takes while bytes keep coming. A process outside its group that
		// still holds the pipe open but writes nothing must not hold us
		// forever: after a step without a byte, the pipe is closed.
		last := sess.LastRead()
	drain:
		for {
			select {
			case <-serverDone:
				break drain
			case <-cfg.After(s.step(ctx)):
				if now := sess.LastRead(); now != last {
					last = now
					continue
				}
				cfg.Event("drain cut")
				pr.Close()
				<-serverDone
				break drain
			}
		}
	}
	pr.Close()
	if errR != nil {
		// The group is ended: stderr is at EOF unless a process outside it
		// holds it; that one gets a step, then the pipe is closed.
		select {
		case <-errDone:
		case <-cfg.After(s.step(ctx)):
			errR.Close()
			<-errDone
		}
		errR.Close()
	}
	// A call the client sent while the session collected its list is
	// settled before what is in flight is.
	sess.WaitIdle()
	status := exitStatus(cmd, waitErr)
	res := &producer.SessionResult{ExitStatus: status, ExitCode: exitCode(cmd), EndedOnItsOwn: onItsOwn, Ended: ended}
	if serverGone {
		detail := "server exited: " + status
		if stdoutClosed {
			detail = "server closed stdout; then " + detail
		}
		res.TransportFailures = sess.FailInflight(detail)
	} else {
		res.InFlight = sess.AbandonInflight()
	}
	sess.Finish(res)
	if err := sess.Err(); err != nil {
		return res, err
	}
	if clientErr != nil && !errors.Is(clientErr, io.EOF) {
		return res, clientErr
	}
	return res, nil
}

// lifecycle runs the server process's shutdown steps.
type lifecycle struct{ cfg Config }

// withDefaults fills the zero members of the process settings.
func (cfg Config) withDefaults() Config {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.KillAfter == 0 {
		cfg.KillAfter = DefaultKillAfter
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Event == nil {
		cfg.Event = func(string) {}
	}
	return cfg
}

// step is how long one shutdown step waits: KillAfter, or at most
// signalStep once ctx is cancelled.
func (s *lifecycle) step(ctx context.Context) time.Duration {
	if ctx.Err() != nil {
		return min(s.cfg.KillAfter, signalStep)
	}
	return s.cfg.KillAfter
}

// waitExit waits up to one step for the server to exit; a ctx cancelled
// meanwhile shortens the wait.
func (s *lifecycle) waitExit(ctx context.Context, exited chan struct{}) bool {
	t := s.cfg.After(s.step(ctx))
	done := ctx.Done()
	if ctx.Err() != nil {
		done = nil
	}
	for {
		select {
		case <-exited:
			return true
		case <-t:
			return false
		case <-done:
			done = nil
			t = s.cfg.After(signalStep)
		}
	}
}

// terminate stops the server politely: stdin is closed already; wait, then
// SIGTERM, then SIGKILL to its process group.
func (s *lifecycle) terminate(ctx context.Context, cmd *exec.Cmd, exited chan struct{}) {
	if s.waitExit(ctx, exited) {
		return
	}
	s.cfg.Event("sigterm")
	_ = signalGroup(cmd.Process, sigTerm)
	if s.waitExit(ctx, exited) {
		return
	}
	s.cfg.Event("sigkill")
	_ = signalGroup(cmd.Process, sigKill)
	<-exited
}

// endGroup ends what the server left running in its process group (a
// grandchild that outlives it): SIGTERM, then SIGKILL after a step.
func (s *lifecycle) endGroup(ctx context.Context, pgid int) {
	if !groupAlive(pgid) {
		return
	}
	s.cfg.Event("group sigterm")
	_ = killGroup(pgid, sigTerm)
	deadline := s.cfg.After(s.step(ctx))
	for groupAlive(pgid) {
		select {
		case <-deadline:
			s.cfg.Event("group sigkill")
			_ = killGroup(pgid, sigKill)
			return
		case <-s.cfg.After(groupPoll):
		}
	}
}

// groupPoll is how often endGroup looks whether the group is empty: the
// kernel gives no event for it.
const groupPoll = 5 * time.Millisecond

func exitStatus(cmd *exec.Cmd, err error) string {
	if cmd.ProcessState != nil {
		return cmd.ProcessState.String()
	}
	if err != nil {
		return err.Error()
	}
	return "unknown"
}

// exitCode is the server's exit code as a shell reports it: the code, or
// 128+signal for a server ended by a signal; -1 when unknown.
func exitCode(cmd *exec.Cmd) int {
	if cmd.ProcessState == nil {
		return -1
	}
	if sig, ok := termSignal(cmd.ProcessState); ok {
		return 128 + sig
	}
	return cmd.ProcessState.ExitCode()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
