// Package proxy is tracectl's byte-transparent stdio MCP proxy: it sits
// between an MCP client and a stdio server, forwards every byte unchanged in
// both directions, and records what it observes through a Sink (in
// production, the producer's durable journal).
//
// Ordering guarantees (spec/transcript.md, "Durability"):
//   - a tools/call request is forwarded only after Sink.Attempt returned,
//     i.e. after the attempt is durable; if it fails, the request is not
//     forwarded and the client receives a JSON-RPC error (fail closed);
//   - a tools/call response is forwarded only after Sink.Response returned;
//   - when the server goes away with calls in flight, each gets a
//     transport-failure observation and the client a JSON-RPC error.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tracectl/tracectl/producer"
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
	Grace       time.Duration // how long in-flight calls may finish after client EOF or ctx cancel
	KillAfter   time.Duration // after closing the server's stdin: wait, then SIGTERM, then SIGKILL after this
	Started     func(pid int) // optional: called once the server runs
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
	token        string // exact text of the call's _meta.progressToken, or ""
}

type session struct {
	cfg        Config
	mu         sync.Mutex // guards inflight, answered, era; never held across an attempt's durable wait
	errMu      sync.Mutex // guards sinkErr
	clientGone bool       // a write to the client failed: keep recording, stop writing (guarded by outMu)
	outMu      sync.Mutex // serializes whole lines written to the client; never held while taking mu
	inflight   map[string]*pending
	answered   map[string]bool       // ids the proxy answered itself (late responses are then not forwarded)
	progress   map[string]AttemptRef // progress token text -> the in-flight call that carries it
	clientOut  io.Writer
	serverIn   io.WriteCloser
	era        string
	modernVer  string
	sinkErr    error
	stopped    bool         // the session is over: late client input is not interpreted
	lastRead   atomic.Int64 // unix nanoseconds of the last bytes read from the server
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

// ErrUnrecordable marks a tools/call the recorder cannot record exactly
// (its envelope is not strict JSON, or its id or method is ambiguous). The
// proxy refuses to forward it: a call that reaches the server must be in
// the evidence. It is not an audit failure: the session goes on.
var ErrUnrecordable = errors.New("tools/call cannot be recorded exactly")

// ErrAuditUnavailable is returned to the client (as a JSON-RPC error) and
// from Run when the Sink cannot make evidence durable.
var ErrAuditUnavailable = errors.New("audit unavailable: evidence could not be made durable")

// Run starts the server and proxies until the client closes its input (or
// ctx is cancelled, or the server goes away) and the server has been shut
// down. Every byte the server wrote before it closed stdout is forwarded
// before Run returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Grace == 0 {
		cfg.Grace = 5 * time.Second
	}
	if cfg.KillAfter == 0 {
		cfg.KillAfter = 2 * time.Second
	}
	if cfg.MaxInterpret <= 0 || cfg.MaxInterpret > MaxInterpretBytes {
		cfg.MaxInterpret = MaxInterpretBytes
	}
	if cfg.MaxRetain <= 0 {
		cfg.MaxRetain = producer.DefaultMaxFrameBytes
	}
	if cfg.MaxServerFrame <= 0 {
		cfg.MaxServerFrame = DefaultMaxServerFrame
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env, cmd.Dir = cfg.Env, cfg.Dir
	cmd.Stderr = cfg.ServerErr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
		return nil, fmt.Errorf("start server %q: %w", cfg.Command, err)
	}
	pw.Close()
	if cfg.Started != nil {
		cfg.Started(cmd.Process.Pid)
	}
	s := &session{cfg: cfg, inflight: map[string]*pending{}, answered: map[string]bool{}, progress: map[string]AttemptRef{}, clientOut: cfg.ClientOut, serverIn: serverIn}

	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	serverDone := make(chan error, 1)
	go func() { serverDone <- s.serverToClient(pr) }()
	clientDone := make(chan error, 1)
	go func() { clientDone <- s.clientToServer() }()

	var clientErr error
	stdoutClosed := false
	select {
	case clientErr = <-clientDone:
	case <-ctx.Done():
	case <-serverDone:
		stdoutClosed = true
	case <-exited:
	}
	// Stop taking client input into account; let in-flight calls finish for
	// a grace period while the server can still answer.
	if !stdoutClosed {
		deadline := time.NewTimer(cfg.Grace)
		tick := time.NewTicker(5 * time.Millisecond)
	wait:
		for s.inflightCalls() > 0 {
			select {
			case <-deadline.C:
				break wait
			case <-serverDone:
				stdoutClosed = true
				break wait
			case <-tick.C:
			}
		}
		deadline.Stop()
		tick.Stop()
	}
	serverGone := stdoutClosed || isClosed(exited)
	s.stop()
	serverIn.Close()
	terminate(cmd, exited, cfg.KillAfter)
	if !stdoutClosed {
		// The server has exited; drain what it wrote, however long that
		// takes while bytes keep coming. A grandchild that still holds the
		// pipe open but writes nothing must not hold us forever: after
		// KillAfter without a byte, the pipe is closed.
		s.lastRead.Store(max(s.lastRead.Load(), time.Now().UnixNano()))
		tick := time.NewTicker(cfg.KillAfter / 4)
	drain:
		for {
			select {
			case <-serverDone:
				break drain
			case <-tick.C:
				if time.Since(time.Unix(0, s.lastRead.Load())) > cfg.KillAfter {
					pr.Close()
					<-serverDone
					break drain
				}
			}
		}
		tick.Stop()
	}
	pr.Close()
	status := exitStatus(cmd, waitErr)
	res := &Result{ExitStatus: status}
	if serverGone {
		detail := "server exited: " + status
		if stdoutClosed {
			detail = "server closed stdout; then " + detail
		}
		res.TransportFailures = s.failInflight(detail)
	} else {
		res.InFlight = s.abandonInflight()
	}
	if err := s.sinkError(); err != nil {
		return res, err
	}
	if clientErr != nil && !errors.Is(clientErr, io.EOF) {
		return res, clientErr
	}
	return res, nil
}

// terminate stops the server politely: stdin is closed already; wait, then
// SIGTERM, then SIGKILL to its process group.
func terminate(cmd *exec.Cmd, exited chan struct{}, after time.Duration) {
	select {
	case <-exited:
		return
	case <-time.After(after):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return
	case <-time.After(after):
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

func exitStatus(cmd *exec.Cmd, err error) string {
	if cmd.ProcessState != nil {
		return cmd.ProcessState.String()
	}
	if err != nil {
		return err.Error()
	}
	return "unknown"
}

func (s *session) inflightCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.inflight {
		if p.what == reqCall {
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
	}
	return nil
}

func (s *session) noteSinkErr(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if err != nil && errors.Is(err, ErrUnrecordable) {
		return // refused to the client, not an audit failure
	}
	if err != nil && s.sinkErr == nil {
		s.sinkErr = fmt.Errorf("%w: %v", ErrAuditUnavailable, err)
	}
}

// errorLine builds a JSON-RPC error response for the exact id text.
func errorLine(idText string, code int, msg string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + idText + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + strconv.Quote(msg) + `}}` + "\n")
}

// JSON-RPC error codes the proxy synthesizes (implementation-defined range).
const (
	codeAuditUnavailable = -32001 // not forwarded: evidence could not be made durable
	codeTransportFailure = -32002 // the server went away with the call in flight
	codeRefused          = -32600 // Invalid Request: a frame the gate refused, not forwarded
)

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
		}
		delete(s.inflight, key)
	}
	return n
}
