// Package mcpsdk records a Go MCP client's traffic in process: Transport is
// an mcp.Transport (github.com/modelcontextprotocol/go-sdk) that puts
// tracectl's recording proxy between the SDK client and the server's byte
// stream. Every frame, in either direction, goes through the same gate
// (mcpwire.Read), the same session (session.New, the one tracectl wrap
// runs) and the same recorder as wrap, with the exact bytes the SDK wrote
// and the server sent: a tools/call is durable before the server sees it, a
// response before the client does.
//
// The client side is the SDK's own mcp.IOTransport over in-memory pipes;
// the server side is any byte stream: Command starts a stdio server (as
// mcp.CommandTransport does), and the Reader and Writer an mcp.IOTransport
// would be given are ServerOut and ServerIn. The recorder's signed
// checkpoints (producer.Recorder.StartCheckpoints) work here as in wrap.
package mcpsdk

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/snapshot"
)

// Transport is an mcp.Transport that records the session between an SDK
// client and the server reached over ServerIn and ServerOut. Connect it
// once (mcp.Client.Connect does); when the client closes the session, the
// server's input is closed, what it still sends is recorded, and Wait
// returns. Then seal the recorder.
type Transport struct {
	// Recorder is where the session is recorded; it must have been opened
	// with producer.Options.FramesCommitted (every frame is committed).
	Recorder *producer.Recorder
	// ServerIn is the server's input; it is closed when the client ends
	// the session. ServerOut is the server's output, read to its end.
	ServerIn  io.WriteCloser
	ServerOut io.Reader

	// CallTimeout records a timeout when a tools/call has no response
	// within it (0: never).
	CallTimeout time.Duration
	// Capture says when the session collects the server's complete
	// tools/list itself before forwarding a call: "auto" (default: when
	// no complete snapshot of the session is current), "always", "never".
	Capture string
	// SpoolDir is where a server frame too long to hold is spooled while it
	// is committed (default os.TempDir()).
	SpoolDir string
	// CaptureID mints snapshot capture ids (default: from crypto/rand).
	CaptureID func() (string, error)
	// MaxLineLength is the SDK client's mcp.IOTransport.MaxLineLength.
	MaxLineLength int

	once    sync.Once
	started chan struct{}
	done    chan struct{}
	sink    *session.RecordingSink
	res     *producer.SessionResult
	err     error
}

// ErrConnected reports a second Connect: a Transport is one session.
var ErrConnected = errors.New("mcpsdk: transport already connected")

// Connect starts the recording session and returns the SDK client's
// connection to it.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	switch {
	case t.Recorder == nil:
		return nil, errors.New("mcpsdk: Transport.Recorder is nil")
	case t.ServerIn == nil || t.ServerOut == nil:
		return nil, errors.New("mcpsdk: Transport.ServerIn and ServerOut are required")
	}
	first := false
	t.once.Do(func() { first = true; t.started, t.done = make(chan struct{}), make(chan struct{}) })
	if !first {
		return nil, ErrConnected
	}
	close(t.started)
	captureID := t.CaptureID
	if captureID == nil {
		captureID = func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }
	}
	t.sink = session.NewRecordingSink(t.Recorder, captureID, snapshot.Limits{})
	// The client writes its frames into one pipe and reads the server's
	// from the other: the session sits between them, byte for byte.
	fromClient, clientW := io.Pipe()
	clientR, toClient := io.Pipe()
	sess := session.New(session.Config{Sink: t.sink, CallTimeout: t.CallTimeout, SpoolDir: t.SpoolDir, Capture: t.Capture},
		session.Streams{ClientIn: fromClient, ClientOut: toClient, ServerIn: t.ServerIn, ServerOut: t.ServerOut})
	go func() {
		defer close(t.done)
		// The session lives as long as the client's connection, not as long
		// as the ctx that connected it.
		res, err := sess.Serve(context.WithoutCancel(ctx))
		// The client reads nothing more: unblock its reader.
		toClient.Close()
		fromClient.Close()
		t.res, t.err = res, errors.Join(err, t.sink.Finish())
	}()
	return (&mcp.IOTransport{Reader: clientR, Writer: clientW, MaxLineLength: t.MaxLineLength}).Connect(ctx)
}

// Wait waits until the session has ended (the client closed it, or the
// server's output ended: the client's connection is then closed, its calls
// in flight answered with a transport failure) and returns what the
// session observed. ctx bounds the wait only.
func (t *Transport) Wait(ctx context.Context) (*producer.SessionResult, error) {
	t.once.Do(func() { t.started, t.done = make(chan struct{}), make(chan struct{}) })
	select {
	case <-t.started:
	default:
		return nil, errors.New("mcpsdk: Wait before Connect")
	}
	select {
	case <-t.done:
		return t.res, t.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// RefusedFrames returns how many client frames the gate refused.
func (t *Transport) RefusedFrames() int64 {
	if t.sink == nil {
		return 0
	}
	return t.sink.RefusedFrames()
}

// defaultTerminate is how long Command's input Close waits for the server
// to exit before it is signalled.
const defaultTerminate = 5 * time.Second

// Command starts cmd (Stdin and Stdout unset) as a stdio server and returns
// its streams for a Transport. Closing in closes the server's stdin and
// waits for it to exit, up to terminate (0: defaultTerminate), then sends
// SIGTERM and, after terminate again, kills it; it returns the server's
// exit error, if any. out is read to its end by the session: it stays open
// when the process exits, so nothing the server wrote is lost.
func Command(cmd *exec.Cmd, terminate time.Duration) (in io.WriteCloser, out io.ReadCloser, err error) {
	if cmd.Stdin != nil || cmd.Stdout != nil {
		return nil, nil, errors.New("mcpsdk: Command: cmd.Stdin and cmd.Stdout must be unset")
	}
	if terminate <= 0 {
		terminate = defaultTerminate
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	// Our own pipe: Wait must never close the read end with bytes still
	// to be committed and delivered.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, nil, fmt.Errorf("mcpsdk: start server %q: %w", cmd.Path, err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return &serverStdin{WriteCloser: stdin, proc: cmd.Process, exited: exited, terminate: terminate}, pr, nil
}

// serverStdin is a stdio server's input; Close ends the server politely.
type serverStdin struct {
	io.WriteCloser
	proc      *os.Process
	exited    chan error
	terminate time.Duration
	once      sync.Once
	err       error
}

func (s *serverStdin) Close() error {
	s.once.Do(func() {
		cerr := s.WriteCloser.Close()
		wait := func() bool {
			t := time.NewTimer(s.terminate)
			defer t.Stop()
			select {
			case err := <-s.exited:
				s.err = err
				return true
			case <-t.C:
				return false
			}
		}
		if wait() {
			s.err = errors.Join(cerr, s.err)
			return
		}
		if s.proc.Signal(sigTerm) == nil && wait() {
			return
		}
		_ = s.proc.Kill()
		s.err = <-s.exited
	})
	return s.err
}
