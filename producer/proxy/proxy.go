// Package proxy is tracectl's stdio MCP proxy, a reference monitor between
// an MCP client and a stdio server: every frame, in either direction, is
// read once by the gate (mcpwire.Read) and committed through a Sink (in
// production, the producer's durable journal) before it is passed on,
// unchanged. A client frame the gate does not understand exactly is never
// forwarded: it is committed as refused and answered with a JSON-RPC error
// naming the rule (spec/transcript.md, "The gate", "Frames").
//
// Ordering guarantees (spec/transcript.md, "Durability"):
//   - a tools/call request is forwarded only after Sink.Attempt returned,
//     i.e. after the attempt is durable; if it fails, the request is not
//     forwarded and the client receives a JSON-RPC error (fail closed);
//   - a tools/call response is delivered only after Sink.Response returned;
//   - any other frame is forwarded only after Sink.Frame (or CancelSent,
//     ListChanged) returned: its line is written, durable with the next
//     group commit;
//   - frames are forwarded in the order they were read, in each direction.
//     In strict durability with the RecordingSink the durable waits are
//     pipelined (pipeline.go): the reader goes on once a frame's line is
//     written, and a forwarder waits for its durability before writing it,
//     so calls in flight share fsyncs;
//   - when the server goes away with calls in flight, each gets a
//     transport-failure observation and the client a JSON-RPC error.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
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

	Sink        Sink
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
	// (default, and at most, MaxInterpretBytes). A longer client frame is
	// refused; a longer server frame is spooled, committed, then delivered.
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
	// (default DefaultMaxServerFrame). A longer one is committed by digest
	// and length and withheld: it cannot be committed before delivery
	// without holding it whole.
	MaxServerFrame int64
}

// DefaultMaxServerFrame is the default Config.MaxServerFrame.
const DefaultMaxServerFrame = 1 << 30

// Result summarizes a run.
type Result struct {
	ExitStatus string // the server's exit status as observed
	// ExitCode is the server's exit code, 128+signal when a signal ended
	// it, -1 when unknown.
	ExitCode int
	// EndedOnItsOwn: the server exited or closed its stdout before the
	// proxy asked it to end (by closing its stdin). Its exit code is then
	// the server's own verdict; otherwise the proxy ended it.
	EndedOnItsOwn bool
	// Ended says what ended the session first (EndClientEOF, ...).
	Ended string
	// ClientBytes is how many bytes the client sent: 0 for a start that
	// never became a session.
	ClientBytes int64
	// ClientGone: a write to the client failed; what came after was
	// recorded but not delivered.
	ClientGone bool
	// TransportFailures counts attempts the server abandoned: it exited or
	// closed stdout on its own with them in flight.
	TransportFailures int
	// InFlight are attempts still without an answer when the proxy itself
	// ended the session (client gone, grace period over). Their outcome is
	// unknown: the recorder resolves those with no observation at all when
	// it seals; one with a timeout or cancellation already says unknown.
	InFlight []AttemptRef
}

// What a pending request is, so its response is routed to the right record.
const (
	reqCall     = iota // tools/call: an attempt
	reqList            // tools/list: a snapshot page
	reqInit            // initialize: the legacy negotiated version
	reqDiscover        // server/discover: the modern server's self-description
	reqOther           // any other request: tracked so its response is never taken for a call's
)

type pending struct {
	// mu orders this attempt's observations: held across each Sink call
	// for it, taken while holding session.mu (never the reverse), so a
	// timeout and a response racing for one attempt reach the journal in
	// the order the proxy decided them.
	mu       sync.Mutex
	what     int
	ref      AttemptRef
	listReq  []byte
	timer    *time.Timer
	timedOut bool
	canceled bool
	// conflict holds further attempts sent under this id while it was in
	// flight: responses to the id are then not attributed to any of them.
	conflict     []AttemptRef
	unattributed int    // responses still expected for a conflicted id
	ambiguous    bool   // another request (not a call) shares this call's id in flight
	token        string // the key of the call's _meta.progressToken, or ""
	match        string // mcpwire.MatchKey of the request's id: what a client matches answers by
}

// conflicted: responses to this call's id cannot be attributed to it.
func (p *pending) conflicted() bool { return len(p.conflict) > 0 || p.ambiguous }

type session struct {
	cfg        Config
	mu         sync.Mutex // guards inflight, answered, era; never held across an attempt's durable wait
	errMu      sync.Mutex // guards sinkErr
	clientGone bool       // a write to the client failed: keep recording, stop writing (guarded by outMu)
	outMu      sync.Mutex // serializes whole lines written to the client; never held while taking mu
	inflight   map[string]*pending
	answered   map[string]bool       // ids the proxy answered itself (late responses are then not forwarded)
	settled    settledSet            // requests answered, by match key: a later answer a client could match is refused (mediate.go)
	progress   map[string]AttemptRef // progress token text -> the in-flight call that carries it
	clientOut  io.Writer
	serverIn   io.WriteCloser
	era        string
	modernVer  string
	sinkErr    error
	stopped    bool         // the session is over: late client input is not interpreted
	lastRead   atomic.Int64 // unix nanoseconds of the last bytes read from the server
	// pipe is the Sink's split durable wait, when pipelining (pipeline.go);
	// wake tells the grace loop an open call may have closed.
	pipe pipelineSink
	wake func()
	// cq delivers what client frames cause (the frames to the server, the
	// proxy's answers to the client), sq what server frames cause, each in
	// read order.
	cq, sq *outQueue
}

func (s *session) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

func (s *session) sinkError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.sinkErr
}

// ErrUnrecordable marks a tools/call the recorder refuses to record
// (RecordingSink.Attempt: the producer says it is no tools/call it can
// record). After the gate read the frame this cannot happen; if it does,
// the call is not forwarded and the proxy treats it as an audit failure.
var ErrUnrecordable = errors.New("tools/call cannot be recorded exactly")

// ErrAuditUnavailable is returned to the client (as a JSON-RPC error) and
// from Run when the Sink cannot make evidence durable.
var ErrAuditUnavailable = errors.New("audit unavailable: evidence could not be made durable")

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

// Why a session ended (Result.Ended).
const (
	EndClientEOF    = "client_eof"           // the client closed its side
	EndCanceled     = "canceled"             // ctx was cancelled (SIGTERM, SIGINT)
	EndServerExit   = "server_exit"          // the server exited on its own
	EndServerStdout = "server_stdout_closed" // the server closed its stdout on its own
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
// reported once through Sink.ClientGone; recording goes on.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults() // stream.go
	counted := &countingReader{r: cfg.ClientIn}
	cfg.ClientIn = counted
	changed := make(chan struct{}, 1)
	cfg.Sink = notifySink{Sink: cfg.Sink, changed: changed}

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
	s := newSession(cfg, serverIn) // stream.go

	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	serverDone := make(chan error, 1)
	go func() { serverDone <- s.serverToClient(pr) }()
	clientDone := make(chan error, 1)
	go func() { clientDone <- s.clientToServer() }()

	var clientErr error
	stdoutClosed := false
	ended := ""
	select {
	case clientErr = <-clientDone:
		ended = EndClientEOF
	case <-ctx.Done():
		ended = EndCanceled
	case <-serverDone:
		stdoutClosed = true
		ended = EndServerStdout
	case <-exited:
		ended = EndServerExit
	}
	cfg.Event("ended " + ended)
	// Stop taking client input into account; let open calls finish for a
	// grace period while the server can still answer. Every change to the
	// open calls goes through the Sink, which wakes this loop.
	if cfg.Grace > 0 && !stdoutClosed && !isClosed(exited) && ctx.Err() == nil && s.openCalls() > 0 {
		cfg.Event("grace")
		deadline := cfg.After(cfg.Grace)
	wait:
		for s.openCalls() > 0 {
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
	s.stop()
	serverIn.Close()
	cfg.Event("stdin closed")
	s.terminate(ctx, cmd, exited)
	s.endGroup(ctx, cmd.Process.Pid)
	if !stdoutClosed {
		// The server has exited; drain what it wrote, however long that
		// takes while bytes keep coming. A process outside its group that
		// still holds the pipe open but writes nothing must not hold us
		// forever: after a step without a byte, the pipe is closed.
		last := s.lastRead.Load()
	drain:
		for {
			select {
			case <-serverDone:
				break drain
			case <-cfg.After(s.step(ctx)):
				if now := s.lastRead.Load(); now != last {
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
	status := exitStatus(cmd, waitErr)
	res := &Result{ExitStatus: status, ExitCode: exitCode(cmd), EndedOnItsOwn: onItsOwn, Ended: ended, ClientBytes: counted.n.Load()}
	if serverGone {
		detail := "server exited: " + status
		if stdoutClosed {
			detail = "server closed stdout; then " + detail
		}
		res.TransportFailures = s.failInflight(detail)
	} else {
		res.InFlight = s.abandonInflight()
	}
	s.outMu.Lock()
	res.ClientGone = s.clientGone
	s.outMu.Unlock()
	cfg.Event("done")
	if err := s.sinkError(); err != nil {
		return res, err
	}
	if clientErr != nil && !errors.Is(clientErr, io.EOF) {
		return res, clientErr
	}
	return res, nil
}

// step is how long one shutdown step waits: KillAfter, or at most
// signalStep once ctx is cancelled.
func (s *session) step(ctx context.Context) time.Duration {
	if ctx.Err() != nil {
		return min(s.cfg.KillAfter, signalStep)
	}
	return s.cfg.KillAfter
}

// waitExit waits up to one step for the server to exit; a ctx cancelled
// meanwhile shortens the wait.
func (s *session) waitExit(ctx context.Context, exited chan struct{}) bool {
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
func (s *session) terminate(ctx context.Context, cmd *exec.Cmd, exited chan struct{}) {
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
func (s *session) endGroup(ctx context.Context, pgid int) {
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

// countingReader counts the client's bytes: a start that never received
// any is not a session (a launcher's probe, a health check).
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// notifySink wakes the grace loop after every observation that can close
// or cancel an open call.
type notifySink struct {
	Sink
	changed chan struct{}
}

func (n notifySink) wake() {
	select {
	case n.changed <- struct{}{}:
	default:
	}
}

func (n notifySink) Response(a AttemptRef, r ResponseObs) error {
	defer n.wake()
	return n.Sink.Response(a, r)
}

func (n notifySink) CancelSent(a AttemptRef, o NotificationObs) error {
	defer n.wake()
	return n.Sink.CancelSent(a, o)
}

func (n notifySink) TransportFailure(a AttemptRef, detail string) error {
	defer n.wake()
	return n.Sink.TransportFailure(a, detail)
}

// openCalls counts the tools/call requests still running at the server
// that the client still waits for: a cancelled call does not hold the
// grace period (the server owes it nothing, and the client ignores a late
// answer).
func (s *session) openCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.inflight {
		if p.what == reqCall && !p.canceled {
			n++
		}
	}
	return n
}

// writeClient writes whole lines to the client, so lines from the server
// and lines the proxy synthesizes never interleave. Never called with mu held:
// a client that is slow to read must not stall the recording of the other
// direction.
//
// A client that stops reading is not the server's failure: after the first
// failed write the proxy stops writing to the client but goes on reading
// and recording what the server sends, so nothing in flight is blamed on a
// transport failure that did not happen.
func (s *session) writeClient(b []byte) error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.writeClientLocked(b)
}

func (s *session) writeClientLocked(b []byte) error {
	if s.clientGone {
		return nil
	}
	if _, err := s.cfg.ClientOut.Write(b); err != nil {
		s.clientGone = true
		// Once, under outMu only: the Sink takes none of the proxy's locks.
		s.noteSinkErr(s.cfg.Sink.ClientGone("write to client: " + err.Error()))
	}
	return nil
}

func (s *session) noteSinkErr(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if err != nil && s.sinkErr == nil {
		s.sinkErr = fmt.Errorf("%w: %v", ErrAuditUnavailable, err)
	}
}

// errorLine builds a JSON-RPC error response for the exact id text. Its
// data names tracectl and the reason, so a client (and a person reading its
// log) can tell the proxy's answer from the server's.
func errorLine(idText string, code int, msg string) []byte {
	// encoding/json, not strconv.Quote: the message must be a JSON string
	// whatever it holds (Go's \x escapes are not JSON).
	m, _ := json.Marshal(msg)
	return []byte(`{"jsonrpc":"2.0","id":` + idText + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(m) +
		`,"data":{"source":"tracectl","reason":"` + reasonOf(code) + `"}}}` + "\n")
}

// JSON-RPC error codes the proxy synthesizes (spec/wrap.md). They sit in
// JSON-RPC's implementation-defined range, clear of every code the MCP
// specification and the Go and TypeScript SDKs assign (-32000 connection
// closed, -32001 request timeout, -32002 resource not found, -32020..-32022,
// -32042).
const (
	codeAuditUnavailable = -32091 // not forwarded: evidence could not be made durable
	codeTransportFailure = -32092 // the server went away with the call in flight
	codeResponseRefused  = -32093 // the server's answer was refused by the gate or mediation: not delivered, the outcome unknown
	codeRefused          = -32600 // Invalid Request: a frame the gate refused, not forwarded
)

func reasonOf(code int) string {
	switch code {
	case codeAuditUnavailable:
		return "audit_unavailable"
	case codeTransportFailure:
		return "transport_failure"
	case codeResponseRefused:
		return "response_refused"
	case codeRefused:
		return "refused"
	}
	return "other"
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// abandonInflight returns the attempts the proxy stops waiting for.
func (s *session) abandonInflight() []AttemptRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []AttemptRef
	for key, p := range s.inflight {
		if p.timer != nil {
			p.timer.Stop()
		}
		if p.what == reqCall {
			refs = append(refs, p.ref)
			refs = append(refs, p.conflict...)
		}
		delete(s.inflight, key)
	}
	return refs
}

func (s *session) failInflight(detail string) int {
	s.mu.Lock()
	var synth [][]byte
	defer func() {
		s.mu.Unlock()
		for _, b := range synth {
			_ = s.writeClient(b)
		}
	}()
	n := 0
	for key, p := range s.inflight {
		if p.timer != nil {
			p.timer.Stop()
		}
		if p.what != reqCall {
			delete(s.inflight, key)
			continue
		}
		n++
		p.mu.Lock()
		for _, ref := range append([]AttemptRef{p.ref}, p.conflict...) {
			s.noteSinkErr(s.cfg.Sink.TransportFailure(ref, detail))
		}
		p.mu.Unlock()
		if !p.canceled {
			synth = append(synth, errorLine(key, codeTransportFailure, "tracectl: transport failure: "+detail))
			s.answered[key] = true
			s.settled.add(p.match)
		}
		delete(s.inflight, key)
	}
	return n
}
