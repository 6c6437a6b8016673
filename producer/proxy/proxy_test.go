package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// memSink records what the proxy reports. It is a test double for the
// journal only; the proxy, the server process and the bytes are real.
type memSink struct {
	mu        sync.Mutex
	attempts  []Call
	responses []ResponseObs
	events    []string
	failNext  error
}

type ref string

func (r ref) AttemptID() string { return string(r) }

func (s *memSink) Attempt(c Call) (AttemptRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext != nil {
		return nil, s.failNext
	}
	c.Line = append([]byte(nil), c.Line...)
	s.attempts = append(s.attempts, c)
	id := fmt.Sprintf("a%d", len(s.attempts))
	s.events = append(s.events, "attempt "+id)
	return ref(id), nil
}
func (s *memSink) Response(a AttemptRef, r ResponseObs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext != nil {
		return s.failNext
	}
	r.Line = append([]byte(nil), r.Line...)
	s.responses = append(s.responses, r)
	s.events = append(s.events, fmt.Sprintf("response %s %s late=%v", a.AttemptID(), r.ResultType, r.Late))
	return nil
}
func (s *memSink) add(e string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return nil
}
func (s *memSink) Timeout(a AttemptRef) error { return s.add("timeout " + a.AttemptID()) }
func (s *memSink) CancelSent(a AttemptRef, _ []byte) error {
	return s.add("cancel " + a.AttemptID())
}
func (s *memSink) TransportFailure(a AttemptRef, d string) error {
	return s.add("transport_failure " + a.AttemptID())
}
func (s *memSink) Protocol(p ProtocolObs) error { return s.add("protocol " + p.Era + " " + p.Version) }
func (s *memSink) ListPage(req, resp []byte, isErr bool) error {
	return s.add(fmt.Sprintf("page %d %d", len(req), len(resp)))
}
func (s *memSink) ListChanged([]byte) error { return s.add("list_changed") }
func (s *memSink) Oversized(dir, digest string, n int64) error {
	return s.add(fmt.Sprintf("oversized %s %d", dir, n))
}

func (s *memSink) ClientGone(detail string) error { return s.add("client_gone") }

func (s *memSink) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// TestByteTransparencyThroughCat runs `cat` as the "server": every line the
// client sends comes back, so the client must receive exactly the bytes it
// sent, including lines no JSON parser accepts.
func TestByteTransparencyThroughCat(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("cat not found: cannot run the transparency peer")
	}
	big := bytes.Repeat([]byte("x"), 20<<20)
	const interpret = 21 << 20 // holds the 20 MiB line; the next one is streamed
	huge := bytes.Repeat([]byte("y"), interpret+10)
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}` + "\n")
	in.WriteString(`{not json at all` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}` + "\r\n")
	in.WriteString("{\"bad\":\"\xff\xfe\"}\n")
	in.WriteString(`{"jsonrpc":"2.0","id":2,"id":3,"method":"x"}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"note","params":{"s":"`)
	in.Write(big)
	in.WriteString(`"}` + "\n")
	in.Write(huge)
	in.WriteString("\n")
	in.WriteString(`{"jsonrpc":"2.0","id":-0,"method":"ping"}`) // no terminator at EOF
	want := append([]byte(nil), in.Bytes()...)

	var out bytes.Buffer
	sink := &memSink{}
	res, err := Run(context.Background(), Config{
		Command: cat, ClientIn: &in, ClientOut: &out, ServerErr: io.Discard, Sink: sink,
		Grace: time.Second, KillAfter: time.Second, MaxInterpret: interpret,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("client received %d bytes (sha256 %x), sent %d (sha256 %x)", out.Len(), sha256.Sum256(out.Bytes()), len(want), sha256.Sum256(want))
	}
	if len(res.InFlight) != 0 || res.TransportFailures != 0 {
		t.Errorf("in flight at end = %d, transport failures %d, want 0, 0", len(res.InFlight), res.TransportFailures)
	}
	// The over-limit line was streamed in both directions and committed by
	// digest and length only.
	var oversized []string
	for _, e := range sink.log() {
		if strings.HasPrefix(e, "oversized") {
			oversized = append(oversized, e)
		}
	}
	wantOver := []string{fmt.Sprintf("oversized client_to_server %d", len(huge)+1), fmt.Sprintf("oversized server_to_client %d", len(huge)+1)}
	if strings.Join(oversized, ";") != strings.Join(wantOver, ";") {
		t.Errorf("oversized records = %q, want %q", oversized, wantOver)
	}
}
