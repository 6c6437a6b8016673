package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// frameSignal tells the test each frame the session committed, with its
// disposition and rule.
type frameSignal struct {
	Sink
	frames chan FrameObs
}

func (f frameSignal) Frame(o FrameObs) error {
	err := f.Sink.Frame(o)
	f.frames <- o
	return err
}

// TestUnsolicitedResponse: a server that answers a request id ahead of the
// proxy's reading of the request (ids are sequential: a client has already
// registered its handler) gets its answer refused, never delivered; the
// call the client then sends gets the server's real answer, which is what
// the transcript binds. A second answer to it, in another spelling of the
// id, is refused too.
func TestUnsolicitedResponse(t *testing.T) {
	rec, err := producer.Open(filepath.Join(t.TempDir(), "run.trace"), producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "mediate-test", Version: "0"}, Server: transcript.Server{Transport: transcript.TransportInProcess}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	sink := frameSignal{NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }, snapshot.Limits{}), make(chan FrameObs, 8)}
	fromClient, clientW := io.Pipe()
	clientR, toClient := io.Pipe()
	serverR, serverIn := io.Pipe()
	serverOut, serverW := io.Pipe()
	sess := New(Config{Sink: sink}, Streams{ClientIn: fromClient, ClientOut: toClient, ServerIn: serverIn, ServerOut: serverOut})
	done := make(chan struct{})
	go func() { defer close(done); _, _ = sess.Serve(context.Background()); toClient.Close() }()
	client, server := bufio.NewReader(clientR), bufio.NewReader(serverR)

	write := func(w io.Writer, s string) {
		t.Helper()
		if _, err := io.WriteString(w, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(rule mcpwire.Rule) {
		t.Helper()
		o := <-sink.frames
		if o.Disposition != transcript.FrameRefused || o.Refusal == nil || o.Refusal.Rule != rule {
			t.Fatalf("server frame committed %s (%v), want refused %s", o.Disposition, o.Refusal, rule)
		}
	}
	write(serverW, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"EVIL"}]}}`)
	refused(mcpwire.RuleUnsolicited)

	write(clientW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if l, err := server.ReadString('\n'); err != nil || !strings.Contains(l, `"tools/call"`) {
		t.Fatalf("the server read %q, %v", l, err)
	}
	write(serverW, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"BENIGN"}]}}`)
	if l, err := client.ReadString('\n'); err != nil || !strings.Contains(l, "BENIGN") {
		t.Fatalf("the client read %q, %v; want the answer after its request", l, err)
	}
	write(serverW, `{"jsonrpc":"2.0","id":"1","result":{"content":[{"type":"text","text":"EVIL"}]}}`)
	refused(mcpwire.RuleSettledResponse)

	clientW.Close()
	serverW.Close()
	if rest, _ := io.ReadAll(client); strings.Contains(string(rest), "EVIL") {
		t.Fatalf("a refused answer reached the client: %s", rest)
	}
	<-done
}
