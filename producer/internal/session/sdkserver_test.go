package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// sdkServer starts the Go SDK test server (killed at the test's end): its
// path, its stdin and its stdout.
func sdkServer(t *testing.T) (srv string, stdin io.WriteCloser, stdout *os.File) {
	t.Helper()
	srv = mcptest.Build(t, "sdkserver")
	cmd := exec.Command(srv)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); pr.Close() })
	return srv, stdin, pr
}

// openSDKRecorder opens a recorder of the Go SDK test server at srv, the
// options adjusted by mutate (nil: as they are).
func openSDKRecorder(t *testing.T, srv, name string, mutate func(*producer.Options)) *producer.Recorder {
	t.Helper()
	o := producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: name, Version: "0"}, Server: transcript.Server{Transport: transcript.TransportStdio, Executable: srv}}
	if mutate != nil {
		mutate(&o)
	}
	rec, err := producer.Open(filepath.Join(t.TempDir(), "run.trace"), o)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// rawClient is a session core recording rec between a client written and
// read by hand and the Go SDK test server.
type rawClient struct {
	server  *teeWriter // what the session wrote to the server
	clientW *io.PipeWriter
	lines   *bufio.Reader // what the session wrote to the client
	done    chan error    // Serve's error, once it returned
}

func serveRaw(rec *producer.Recorder, stdin io.WriteCloser, stdout *os.File) *rawClient {
	c := &rawClient{server: &teeWriter{w: stdin}, done: make(chan error, 1)}
	fromClient, clientW := io.Pipe()
	clientR, toClient := io.Pipe()
	c.clientW, c.lines = clientW, bufio.NewReader(clientR)
	sink := NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }, snapshot.Limits{})
	sess := New(Config{Sink: sink}, Streams{ClientIn: fromClient, ClientOut: toClient, ServerIn: c.server, ServerOut: stdout})
	go func() {
		_, err := sess.Serve(context.Background())
		toClient.Close()
		c.done <- err
	}()
	return c
}
