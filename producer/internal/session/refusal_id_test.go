package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// The session's answer to a client frame the gate refuses was an error
// under the frame's id. When that frame is the client's *response* to a
// server request, its id is in the server's id space, which overlaps the
// client's own (both count from small integers): the error was, to the
// client, an answer to its own open call with that id, while the server's
// real answer was bound as the call's response (found by review). Now a
// response-shaped frame is not answered, and a refusal whose id the client
// may match to a request still open goes under null.
func TestRefusedClientResponseNotAnswered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	rec, err := producer.Open(dir, producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "review", Version: "0"}, Server: transcript.Server{Transport: transcript.TransportInProcess}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	sink := NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }, snapshot.Limits{})
	fromClient, clientW := io.Pipe()
	clientR, toClient := io.Pipe()
	serverR, serverIn := io.Pipe()
	serverOut, serverW := io.Pipe()
	sess := New(Config{Sink: sink, Capture: CaptureNever}, Streams{ClientIn: fromClient, ClientOut: toClient, ServerIn: serverIn, ServerOut: serverOut})
	done := make(chan struct{})
	go func() { defer close(done); _, _ = sess.Serve(context.Background()); toClient.Close() }()
	client, server := bufio.NewReader(clientR), bufio.NewReader(serverR)
	write := func(w io.Writer, s string) {
		t.Helper()
		if _, err := io.WriteString(w, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func(r *bufio.Reader) string {
		t.Helper()
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	write(clientW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if l := read(server); !strings.Contains(l, `"tools/call"`) {
		t.Fatalf("server read %q", l)
	}
	write(serverW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if l := read(client); !strings.Contains(l, `"ping"`) {
		t.Fatalf("client read %q", l)
	}
	// the client's answer to the ping, a frame the gate refuses: nothing
	// answers it, so the next line the client reads is its call's answer
	write(clientW, `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`)
	write(serverW, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"BENIGN"}]}}`)
	first := read(client)
	// a malformed request under the id of a call still open: refused
	// under null, which no client takes for the call's answer
	write(clientW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if l := read(server); !strings.Contains(l, `"id":2`) {
		t.Fatalf("server read %q", l)
	}
	write(clientW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"},"Method":"x"}`)
	second := read(client)
	write(serverW, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"TWO"}]}}`)
	if l := read(client); !strings.Contains(l, "TWO") {
		t.Fatalf("call 2's answer: %q", l)
	}
	clientW.Close()
	serverW.Close()
	<-done
	journal, _ := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if !strings.Contains(first, "BENIGN") || !strings.Contains(string(journal), `"kind":"response"`) {
		t.Fatalf("the client read %q first: want its call's answer, the one the transcript binds", first)
	}
	if !strings.Contains(second, `"id":null,"error"`) {
		t.Fatalf("the refusal of a request under an id the client may still have open: %q, want it under null", second)
	}
}
