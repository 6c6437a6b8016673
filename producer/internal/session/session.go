// Package session is tracectl's recording session core: the reference
// monitor between one MCP client and one server that every transport
// adapts (stdio for tracectl wrap, package stdio; Streamable HTTP for
// tracectl proxy, package httpproxy; in process for the Go SDK, package
// mcpsdk). The transports only move bytes and framing; what is read,
// committed, forwarded, refused and answered is decided here, the same way
// for all of them (spec/transcript.md, "The gate", "Frames").
//
// # Client to server
//
// Every client frame is read once by the gate (mcpwire.Read) and committed
// through a [Sink] (in production [RecordingSink], over the producer's
// durable journal) before it is forwarded, unchanged. A frame the gate does
// not understand exactly is never forwarded: it is committed as refused and
// answered with a JSON-RPC error naming the rule. A tools/call is forwarded
// only after its attempt is durable; if that fails, the client gets a
// JSON-RPC error (fail closed, [ErrAuditUnavailable]).
//
// # Server to client
//
// A server frame is delivered only if every real client reads it as the
// gate did, and only once it is committed: a frame the gate refuses, a
// response whose id a client would match to another request (an id twin,
// mcpwire.ResponseKeys), and a second answer to a request already answered
// are committed as refused and never delivered. When a client could have
// taken such a frame as the answer to a request it waits on, the session
// answers that request itself (a transport failure for a call, JSON-RPC
// error -32093 to the client), so what the client acts on is what the
// evidence says. A response to an attempt is durable before it is
// delivered. [Rule] is that order of decisions, once: this session applies
// it to its table of open requests, the HTTP proxy to each exchange's
// request (an [Open] each).
//
// # Ordering
//
// Frames are delivered in the order they were read, in each direction. In
// strict durability with the RecordingSink the durable waits are pipelined
// (pipeline.go): the reader goes on once a frame's line is written, and a
// forwarder waits for its durability before writing it, so calls in flight
// share fsyncs. When the server goes away with calls in flight, each gets a
// transport-failure observation and the client a JSON-RPC error.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
)

// Config configures a session's recording.
type Config struct {
	Sink        Sink
	CallTimeout time.Duration // 0: none
	// Event, optional, is told each lifecycle step as it happens ("stdin
	// closed", "done"), so tests synchronize on events rather than on
	// sleeps.
	Event func(step string)
	// Changed, optional, is called after every observation that can close
	// or cancel an open call (a process adapter's grace loop waits on it).
	Changed func()
	// MaxInterpret bounds the bytes of one frame held in memory to read it
	// (default, and at most, maxInterpretBytes). A longer client frame is
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
	// MaxServerFrame bounds a server frame the session spools to deliver
	// (default defaultMaxServerFrame). A longer one is committed by digest
	// and length and withheld: it cannot be committed before delivery
	// without holding it whole.
	MaxServerFrame int64
	// MaxLargeResponse bounds a server frame over MaxInterpret that the
	// session still reads, in memory, because it begins as the answer to a
	// call waiting for it (default defaultMaxLargeResponse, never past
	// MaxServerFrame): spooled whole first, then read by the gate
	// (mcpwire.ReadLarge) with every rule of a shorter frame, recorded as
	// the call's response and delivered when mediation delivers it. Any
	// other frame over MaxInterpret is committed by digest and withheld.
	MaxLargeResponse int64
	// Capture says when the session collects the server's complete
	// tools/list itself before forwarding a call (CaptureAuto, the
	// default; CaptureAlways; CaptureNever), so every call binds a
	// complete snapshot of the server it went to (capture.go).
	Capture string
	// CaptureTimeout bounds the wait for each page of that collection
	// (default 30 s).
	CaptureTimeout time.Duration
	// policy is the Sink's policy side (a RecordingSink over a recorder
	// with a policy: policy.go), taken before withDefaults wraps the Sink.
	policy *RecordingSink
}

// defaultMaxServerFrame is the default Config.MaxServerFrame.
const defaultMaxServerFrame = 1 << 30

// defaultMaxLargeResponse is the default Config.MaxLargeResponse: a
// response this long is held twice at most while it is read (the spool's
// copy and the gate's parse of it).
const defaultMaxLargeResponse = 256 << 20

// Result summarizes a run.
type Result = producer.SessionResult

// Why a session ended (Result.Ended).
const (
	EndClientEOF    = "client_eof"           // the client closed its side
	EndCanceled     = "canceled"             // ctx was cancelled (SIGTERM, SIGINT)
	EndServerExit   = "server_exit"          // the server exited on its own
	EndServerStdout = "server_stdout_closed" // the server closed its stdout on its own
)

// What a pending request is, so its response is routed to the right record.
const (
	reqCall     = iota // tools/call: an attempt
	reqList            // tools/list: a snapshot page
	reqInit            // initialize: the legacy negotiated version
	reqDiscover        // server/discover: the modern server's self-description
	reqOther           // any other request: tracked so its response is never taken for a call's
	reqCapture         // the session's own tools/list page request (capture.go)
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
	unattributed int         // responses still expected for a conflicted id
	ambiguous    bool        // another request (not a call) shares this call's id in flight
	token        string      // the key of the call's _meta.progressToken, or ""
	match        string      // mcpwire.MatchKey of the request's id: what a client matches answers by
	capture      chan []byte // reqCapture: receives the response line, or is closed when the session gives up
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
	clientIn   *countingReader
	clientOut  io.Writer
	serverIn   io.WriteCloser
	era        mcpwire.Era
	modernVer  string
	sinkErr    error
	stopped    bool // the session is over: late client input is not interpreted
	// busy counts client frames being handled, and calls awaiting their
	// approval (guarded by mu; idle is broadcast when it drops to 0): a
	// lifecycle waits for them before it settles what is in flight
	// (waitIdle), so a call held for the session's own collection, or for
	// its approval, is settled before the session ends.
	busy int
	idle *sync.Cond
	// serverEnded: the server's output ended (guarded by mu); captures
	// waiting on it were given up (abortCaptures).
	serverEnded bool
	lastRead    atomic.Int64 // unix nanoseconds of the last bytes read from the server
	// pipe is the Sink's split durable wait, when pipelining (pipeline.go);
	// wake tells the grace loop an open call may have closed.
	pipe pipelineSink
	wake func()
	// capt is the Sink's own collection, when it can record one.
	capt capturer
	// cq delivers what client frames cause (the frames to the server, the
	// proxy's answers to the client), sq what server frames cause, each in
	// read order.
	cq, sq *outQueue
	// ending is cancelled when the session stops (stop): an approver
	// still deciding then is given up, so a session ending (the client
	// gone, SIGTERM) never waits out the approval timeout (approve.go).
	ending    context.Context
	endAsking context.CancelFunc
	// asking counts the calls awaiting their approval off the reader
	// (approveAsync); el is the client's elicitation (elicit.go).
	asking sync.WaitGroup
	el     elicitState
}

func (s *session) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	if s.endAsking != nil { // nil only for a session a test built by hand
		s.endAsking()
	}
}

// waitIdle waits until no client frame is being handled; after stop no
// new one starts. A frame held for the session's own collection ends once
// the server answers or its output ends (abortCaptures).
func (s *session) waitIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.busy > 0 {
		s.idle.Wait()
	}
}

// abortCaptures gives up the session's own page requests: the server's
// output ended, so no answer will come. Later answers (none) would be
// withheld.
func (s *session) abortCaptures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serverEnded = true
	for key, p := range s.inflight {
		if p.what == reqCapture {
			close(p.capture)
			delete(s.inflight, key)
			s.answered[key] = true
		}
	}
}

func (s *session) sinkError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.sinkErr
}

// errUnrecordable marks a tools/call the recorder refuses to record
// (RecordingSink.Attempt: the producer says it is no tools/call it can
// record). After the gate read the frame this cannot happen; if it does,
// the call is not forwarded and the proxy treats it as an audit failure.
var errUnrecordable = errors.New("tools/call cannot be recorded exactly")

// ErrAuditUnavailable is the producer's (producer.ErrAuditUnavailable):
// the one sentinel, wrapped with %w from the journal to the client's error
// and Run's, so errors.Is finds it, and the cause under it (ENOSPC), at
// every layer.
var ErrAuditUnavailable = producer.ErrAuditUnavailable

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

// notifySink tells Config.Changed after every observation that can close
// or cancel an open call.
type notifySink struct {
	Sink
	changed func()
}

func (n notifySink) wake() { n.changed() }

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
	if _, err := s.clientOut.Write(b); err != nil {
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
		if errors.Is(err, ErrAuditUnavailable) {
			s.sinkErr = err
		} else {
			s.sinkErr = fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
		}
	}
}

// errorLine is mcpwire.ErrorResponse as a line.
func errorLine(idText string, code int, msg string) []byte {
	return append(mcpwire.ErrorResponse(idText, code, msg), '\n')
}

// The codes of the session's own answers (spec/wrap.md).
const (
	codeAuditUnavailable = mcpwire.CodeAuditUnavailable
	codeTransportFailure = mcpwire.CodeTransportFailure
	codeResponseRefused  = mcpwire.CodeResponseRefused
	codeRefused          = mcpwire.CodeInvalidRequest // a frame the gate refused, not forwarded
)

// abandonInflight returns the attempts the proxy stops waiting for.
func (s *session) abandonInflight() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for key, p := range s.inflight {
		if p.timer != nil {
			p.timer.Stop()
		}
		if p.what == reqCapture {
			close(p.capture)
		}
		if p.what == reqCall {
			ids = append(ids, p.ref.AttemptID())
			for _, c := range p.conflict {
				ids = append(ids, c.AttemptID())
			}
		}
		delete(s.inflight, key)
	}
	return ids
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
			if p.what == reqCapture {
				close(p.capture)
			}
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
