package proxy

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/tracectl/tracectl/producer"
)

// withDefaults fills the zero members of the settings every session uses.
func (cfg Config) withDefaults() Config {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.KillAfter == 0 {
		cfg.KillAfter = DefaultKillAfter
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
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Event == nil {
		cfg.Event = func(string) {}
	}
	return cfg
}

// newSession is the one constructor of a proxy session: wrap's (Run), the
// stream session's (NewSession), whatever carries the bytes.
func newSession(cfg Config, serverIn io.WriteCloser) *session {
	s := &session{cfg: cfg, inflight: map[string]*pending{}, answered: map[string]bool{}, progress: map[string]AttemptRef{},
		clientOut: cfg.ClientOut, serverIn: serverIn}
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

// Session is a recording proxy session between a client and a server
// reached over byte streams (an in-process SDK client and its transport's
// connection, a socket): the same gate, the same Sink calls, the same
// ordering as Run, without a process to start or end.
type Session struct {
	s   *session
	in  *countingReader
	out io.Reader
}

// NewSession returns a session over st, recording through cfg.Sink with
// cfg's recording settings (CallTimeout, MaxInterpret, SpoolDir,
// MaxRetain, MaxServerFrame, Event). cfg's process members (Command, Args,
// Env, Dir, Grace, KillAfter, Started, ClientIn, ClientOut, ServerErr) are
// not used.
func NewSession(cfg Config, st Streams) *Session {
	cfg = cfg.withDefaults()
	in := &countingReader{r: st.ClientIn}
	cfg.ClientIn, cfg.ClientOut = in, st.ClientOut
	return &Session{s: newSession(cfg, st.ServerIn), in: in, out: st.ServerOut}
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
	serverDone := make(chan error, 1)
	go func() { serverDone <- s.serverToClient(x.out) }()
	clientDone := make(chan error, 1)
	go func() { clientDone <- s.clientToServer() }()
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
		res.TransportFailures = s.failInflight("server closed its output")
	case <-ctx.Done():
		res.Ended = EndCanceled
		s.stop()
		s.serverIn.Close()
		res.InFlight = s.abandonInflight()
	}
	res.ClientBytes = x.in.n.Load()
	s.outMu.Lock()
	res.ClientGone = s.clientGone
	s.outMu.Unlock()
	s.cfg.Event("done")
	if err := s.sinkError(); err != nil {
		return res, err
	}
	if clientErr != nil && !errors.Is(clientErr, io.EOF) {
		return res, clientErr
	}
	return res, nil
}
