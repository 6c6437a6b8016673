package session

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// attemptSignal tells the test each attempt the session committed (it
// records through the real RecordingSink).
type attemptSignal struct {
	Sink
	attempts chan string
}

func (a attemptSignal) Attempt(c Call) (AttemptRef, error) {
	ref, err := a.Sink.Attempt(c)
	if err == nil {
		a.attempts <- ref.AttemptID()
	}
	return ref, err
}

// streamSession runs a Session between raw client lines and the Go SDK
// server process.
type streamSession struct {
	clientW  *io.PipeWriter
	lines    *bufio.Reader
	attempts chan string
	rec      *producer.Recorder
	done     chan struct{}
	res      *Result
	err      error
}

func startStream(t *testing.T, ctx context.Context) *streamSession {
	t.Helper()
	srv, serverIn, pr := sdkServer(t)
	rec := openSDKRecorder(t, srv, "stream-test", nil)
	x := &streamSession{attempts: make(chan string, 8), rec: rec, done: make(chan struct{})}
	sink := attemptSignal{NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }, snapshot.Limits{}), x.attempts}
	fromClient, clientW := io.Pipe()
	clientR, toClient := io.Pipe()
	x.clientW, x.lines = clientW, bufio.NewReader(clientR)
	sess := New(Config{Sink: sink}, Streams{ClientIn: fromClient, ClientOut: toClient, ServerIn: serverIn, ServerOut: pr})
	go func() {
		defer close(x.done)
		x.res, x.err = sess.Serve(ctx)
		toClient.Close()
	}()
	return x
}

const streamMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestStreamSessionClientEOF: a call answered through the stream session
// is delivered byte for byte as recorded; the client's EOF closes the
// server's input, and Serve returns once the server's output ended.
func TestStreamSessionClientEOF(t *testing.T) {
	x := startStream(t, context.Background())
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},` + streamMeta + `}}` + "\n"
	if _, err := io.WriteString(x.clientW, req); err != nil {
		t.Fatal(err)
	}
	<-x.attempts
	line, err := x.lines.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("response %q, %v", line, err)
	}
	x.clientW.Close()
	<-x.done
	if x.err != nil || x.res.Ended != EndClientEOF || x.res.ClientBytes != int64(len(req)) || len(x.res.InFlight) != 0 {
		t.Fatalf("Serve: %+v, %v", x.res, x.err)
	}
	if _, err := x.rec.Seal(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The bytes the client got are the bytes the response observation
	// commits to.
	b := readBundleLines(t, x.rec.Dir())
	got := []byte(strings.TrimSuffix(line, "\n"))
	found := false
	for _, d := range regexp.MustCompile(`"kind":"response","response":\{"digest":"(sha256:[0-9a-f]{64})"`).FindAllStringSubmatch(b, -1) {
		if p, err := transcript.OpenPayloads(os.DirFS(x.rec.Dir())); err == nil {
			kept, err := p.Read(d[1], 1<<20)
			p.Close()
			found = found || err == nil && bytes.Equal(kept, got)
		}
	}
	if !found {
		t.Errorf("no response observation commits to the bytes the client got (%q):\n%s", got, b)
	}
}

// TestStreamSessionCanceled: cancelling Serve's ctx with a call running
// at the server ends the session at once; the call is in flight (unknown),
// never a transport failure.
func TestStreamSessionCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	x := startStream(t, ctx)
	req := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000},` + streamMeta + `}}` + "\n"
	if _, err := io.WriteString(x.clientW, req); err != nil {
		t.Fatal(err)
	}
	id := <-x.attempts
	// The attempt is recorded before the session registers it in flight
	// and forwards it; a ping after it is read only once the call's frame
	// was handled, so its answer says the call is in flight.
	if _, err := io.WriteString(x.clientW, `{"jsonrpc":"2.0","id":"after","method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := x.lines.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for the ping's answer: %v", err)
		}
		if strings.Contains(line, `"id":"after"`) {
			break
		}
	}
	cancel()
	<-x.done
	if x.err != nil || x.res.Ended != EndCanceled || len(x.res.InFlight) != 1 || x.res.InFlight[0] != id || x.res.TransportFailures != 0 {
		t.Fatalf("Serve: %+v, %v", x.res, x.err)
	}
}

func readBundleLines(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
