package session

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/tracectl/tracectl/producer"
)

// withDefaults fills the zero members of the settings every session uses.
func (cfg Config) withDefaults() Config {
	if cfg.MaxInterpret <= 0 || cfg.MaxInterpret > maxInterpretBytes {
		cfg.MaxInterpret = maxInterpretBytes
	}
	if cfg.MaxRetain <= 0 {
		cfg.MaxRetain = producer.DefaultMaxFrameBytes
	}
	if cfg.MaxServerFrame <= 0 {
		cfg.MaxServerFrame = defaultMaxServerFrame
	}
	if cfg.MaxLargeResponse <= 0 {
		cfg.MaxLargeResponse = defaultMaxLargeResponse
	}
	cfg.MaxLargeResponse = min(cfg.MaxLargeResponse, cfg.MaxServerFrame)
	if cfg.Event == nil {
		cfg.Event = func(string) {}
	}
	if rs, ok := cfg.Sink.(*RecordingSink); ok && rs.engine != nil {
		cfg.policy = rs
	}
	if cfg.Changed != nil {
		cfg.Sink = notifySink{Sink: cfg.Sink, changed: cfg.Changed}
	}
	return cfg
}

// newSession is the one constructor of a session core, whatever carries
// the bytes.
func newSession(cfg Config, st Streams) *session {
	s := &session{cfg: cfg, inflight: map[string]*pending{}, answered: map[string]bool{}, progress: map[string]AttemptRef{},
		clientIn: &countingReader{r: st.ClientIn}, clientOut: st.ClientOut, serverIn: st.ServerIn, el: newElicitState()}
	s.idle = sync.NewCond(&s.mu)
	s.ending, s.endAsking = context.WithCancel(context.Background())
	s.pipeline() // pipeline.go
	return s
}

// Streams are the byte streams of a session without a process: the
// client's side and the server's.
type Streams struct {
	ClientIn  io.Reader      // the client's frames
	ClientOut io.Writer      // to the client
	ServerIn  io.WriteCloser // to the server; closed when the client's input ends
	ServerOut io.Reader      // the server's frames
}

// Session is a recording session between a client and a server reached
// over byte streams. In process (an SDK client and its transport's
// connection, a socket) Serve runs it whole; a process adapter (package
// stdio) runs it with Start and ends it with its own lifecycle through
// Stop, OpenCalls, FailInflight and AbandonInflight.
type Session struct {
	s   *session
	out io.Reader
}

// New returns a session over st, recording through cfg.Sink.
func New(cfg Config, st Streams) *Session {
	cfg = cfg.withDefaults()
	return &Session{s: newSession(cfg, st), out: st.ServerOut}
}

// Serve proxies until both directions end and returns what happened:
//   - the client's input ends (EndClientEOF): ServerIn is closed and the
//     server's output is read, committed and delivered to its end; calls
//     still without an answer then are Result.InFlight (unknown).
//   - the server's output ends first (EndServerStdout): ServerIn is closed,
//     each call in flight gets a transport failure and the client a
//     JSON-RPC error, and later client input is not interpreted.
//   - ctx is cancelled (EndCanceled): ServerIn is closed and the calls in
//     flight are Result.InFlight.
//
// Unless the client's input ended, Serve returns without waiting for it:
// close ClientIn (and whatever the client reads ClientOut from) to end the
// client's side.
func (x *Session) Serve(ctx context.Context) (*Result, error) {
	s := x.s
	clientDone, serverDone := x.Start()
	res := &Result{ExitCode: -1, ExitStatus: "not a process"}
	var clientErr error
	select {
	case clientErr = <-clientDone:
		res.Ended = EndClientEOF
		s.stop()
		s.serverIn.Close()
		s.cfg.Event("stdin closed")
		select {
		case <-serverDone:
		case <-ctx.Done():
			res.Ended = EndCanceled
		}
		res.InFlight = s.abandonInflight()
	case <-serverDone:
		res.Ended, res.EndedOnItsOwn = EndServerStdout, true
		s.stop()
		s.serverIn.Close()
		s.waitIdle()
		res.TransportFailures = s.failInflight("server closed its output")
	case <-ctx.Done():
		res.Ended = EndCanceled
		s.stop()
		s.serverIn.Close()
		s.abortCaptures()
		s.waitIdle()
		res.InFlight = s.abandonInflight()
	}
	x.Finish(res)
	if err := s.sinkError(); err != nil {
		return res, err
	}
	if clientErr != nil && !errors.Is(clientErr, io.EOF) {
		return res, clientErr
	}
	return res, nil
}

// Start runs both directions: clientDone receives the client side's end
// (io.EOF when its input ended), serverDone the server side's, once
// everything it read is committed and delivered.
func (x *Session) Start() (clientDone, serverDone <-chan error) {
	sd := make(chan error, 1)
	go func() { sd <- x.s.serverToClient(x.out) }()
	cd := make(chan error, 1)
	go func() { cd <- x.s.clientToServer() }()
	return cd, sd
}

// Stop ends the interpretation of client input: what the client sends
// after it is not read as frames.
func (x *Session) Stop() { x.s.stop() }

// OpenCalls counts the tools/call requests the client still waits for (a
// cancelled call is not one).
func (x *Session) OpenCalls() int { return x.s.openCalls() }

// WaitIdle waits until no client frame is being handled (after Stop no new
// one starts; a call held for the session's own collection is settled once
// the server's output has ended): call it before FailInflight or
// AbandonInflight, once the server is gone.
func (x *Session) WaitIdle() { x.s.abortCaptures(); x.s.waitIdle() }

// FailInflight records a transport failure for every call in flight (the
// server went away: detail says how), answers the client for each with a
// JSON-RPC error, and returns how many there were.
func (x *Session) FailInflight(detail string) int { return x.s.failInflight(detail) }

// AbandonInflight forgets the calls in flight and returns them: their
// outcome is unknown (the recorder resolves them at seal).
func (x *Session) AbandonInflight() []string { return x.s.abandonInflight() }

// LastRead is when bytes last came from the server (unix nanoseconds): a
// drain of a server that has exited waits while it moves.
func (x *Session) LastRead() int64 { return x.s.lastRead.Load() }

// Finish fills what the session knows into res (client bytes, client gone)
// and reports the step "done".
func (x *Session) Finish(res *Result) {
	s := x.s
	res.ClientBytes = s.clientIn.n.Load()
	s.outMu.Lock()
	res.ClientGone = s.clientGone
	s.outMu.Unlock()
	s.cfg.Event("done")
}

// Err is the session's audit failure (wrapping ErrAuditUnavailable), if
// any: evidence that could not be made durable.
func (x *Session) Err() error { return x.s.sinkError() }
