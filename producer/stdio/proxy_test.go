package stdio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/producer/internal/session"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// memSink records what the proxy reports. It is a test double for the
// journal only; the proxy, the server process and the bytes are real.
type memSink struct {
	mu        sync.Mutex
	attempts  []session.Call
	responses []session.ResponseObs
	events    []string
	failNext  error
	next      map[string]int64 // per direction: the frame index expected next
	gaps      []string         // frame indexes out of order
	bodies    []bool           // per streamed frame: whether its spooled bytes came with it
}

type ref string

func (r ref) AttemptID() string { return string(r) }

func (s *memSink) Attempt(c session.Call) (session.AttemptRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext != nil {
		return nil, s.failNext
	}
	c.Line = append([]byte(nil), c.Line...)
	s.attempts = append(s.attempts, c)
	if s.next == nil {
		s.next = map[string]int64{}
	}
	if c.Index != s.next[transcript.ClientToServer] {
		s.gaps = append(s.gaps, fmt.Sprintf("attempt: frame %d, want %d", c.Index, s.next[transcript.ClientToServer]))
	}
	s.next[transcript.ClientToServer] = c.Index + 1
	id := fmt.Sprintf("a%d", len(s.attempts))
	s.events = append(s.events, "attempt "+id)
	return ref(id), nil
}
func (s *memSink) Response(a session.AttemptRef, r session.ResponseObs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext != nil {
		return s.failNext
	}
	r.Line = append([]byte(nil), r.Line...)
	s.responses = append(s.responses, r)
	if s.next == nil {
		s.next = map[string]int64{}
	}
	if r.Index != s.next[transcript.ServerToClient] {
		s.gaps = append(s.gaps, fmt.Sprintf("response: frame %d, want %d", r.Index, s.next[transcript.ServerToClient]))
	}
	s.next[transcript.ServerToClient] = r.Index + 1
	s.events = append(s.events, fmt.Sprintf("response %s %s late=%v", a.AttemptID(), r.ResultType, r.Late))
	return nil
}
func (s *memSink) add(e string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return nil
}
func (s *memSink) Timeout(a session.AttemptRef) error { return s.add("timeout " + a.AttemptID()) }
func (s *memSink) CancelSent(a session.AttemptRef, n session.NotificationObs) error {
	s.frame(transcript.ClientToServer, n.Index)
	return s.add("cancel " + a.AttemptID())
}
func (s *memSink) TransportFailure(a session.AttemptRef, d string) error {
	return s.add("transport_failure " + a.AttemptID())
}
func (s *memSink) Protocol(p session.ProtocolObs) error {
	return s.add("protocol " + string(p.Era) + " " + p.Version)
}
func (s *memSink) ListPage(req, resp []byte, isErr bool) error {
	return s.add(fmt.Sprintf("page %d %d", len(req), len(resp)))
}
func (s *memSink) ListChanged(n session.NotificationObs) error {
	s.frame(transcript.ServerToClient, n.Index)
	return s.add("list_changed")
}
func (s *memSink) Frame(f session.FrameObs) error {
	s.frame(f.Direction, f.Index)
	if f.Line == nil {
		s.mu.Lock()
		s.bodies = append(s.bodies, f.Body != nil)
		s.mu.Unlock()
	}
	switch {
	case f.Line == nil:
		return s.add(fmt.Sprintf("streamed %s %s %d", f.Direction, f.Disposition, f.Length))
	case f.Refusal != nil:
		return s.add(fmt.Sprintf("frame %s %s %s", f.Direction, f.Disposition, f.Refusal.Rule))
	}
	return s.add(fmt.Sprintf("frame %s %s %s", f.Direction, f.Disposition, f.Msg.Kind))
}

// frame notes a frame index; indexes must come in order, per direction.
func (s *memSink) frame(dir string, i int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = map[string]int64{}
	}
	if i != s.next[dir] {
		s.gaps = append(s.gaps, fmt.Sprintf("%s: frame %d, want %d", dir, i, s.next[dir]))
	}
	s.next[dir] = i + 1
}

func (s *memSink) ClientGone(detail string) error { return s.add("client_gone") }

func (s *memSink) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// TestGateThroughCat runs `cat` as the "server": every line forwarded comes
// straight back. Frames the gate understood reach the server (and so come
// back) byte for byte, in order; frames it refused never reach it and are
// answered with an error naming the rule; a frame over the limit is refused
// from the client, and a server frame over the limit is spooled, committed
// and delivered byte for byte.
func TestGateThroughCat(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("cat not found: cannot run the transparency peer")
	}
	const interpret = 1 << 20
	big := bytes.Repeat([]byte("x"), interpret-200)
	huge := bytes.Repeat([]byte("y"), interpret+10)
	accepted := []string{
		`{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}` + "\r\n",
		`{"jsonrpc":"2.0","method":"note","params":{"s":"` + string(big) + `"}}` + "\n",
	}
	refused := []struct {
		line string
		rule mcpwire.Rule
	}{
		{`{not json at all` + "\n", "invalid_json"},
		{"{\"jsonrpc\":\"2.0\",\"bad\":\"\xff\xfe\"}\n", "invalid_json"},
		{`{"jsonrpc":"2.0","id":2,"id":3,"method":"x"}` + "\n", "duplicate_member"},
		{string(huge) + "\n", mcpwire.RuleTooLarge},
		{`{"jsonrpc":"2.0","id":0,"method":"ping"}`, "unterminated"}, // no terminator at EOF
	}
	var in bytes.Buffer
	var want []byte
	for i := range max(len(accepted), len(refused)) {
		if i < len(accepted) {
			in.WriteString(accepted[i])
			want = append(want, accepted[i]...)
		}
		if i < len(refused) {
			in.WriteString(refused[i].line)
		}
	}

	var out lockedBuf
	sink := &memSink{}
	res, err := Run(context.Background(), Config{
		Command: cat, ClientIn: &in, ClientOut: &out, ServerErr: io.Discard, sink: sink,
		Grace: time.Second, KillAfter: time.Second, MaxInterpret: interpret,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Split what the client got into the proxy's refusals and the echo.
	var echo []byte
	var refusals []string
	for _, l := range bytes.SplitAfter(out.Bytes(), []byte("\n")) {
		if bytes.Contains(l, []byte("frame refused by the recorder's gate")) {
			refusals = append(refusals, string(l))
			continue
		}
		echo = append(echo, l...)
	}
	if !bytes.Equal(echo, want) {
		t.Fatalf("server echoed %d bytes (sha256 %x), want the %d accepted bytes (sha256 %x)", len(echo), sha256.Sum256(echo), len(want), sha256.Sum256(want))
	}
	if len(refusals) != len(refused) {
		t.Fatalf("%d refusals, want %d: %q", len(refusals), len(refused), refusals)
	}
	for i, r := range refused {
		if !strings.Contains(refusals[i], "("+string(r.rule)+")") || !strings.Contains(refusals[i], `"code":-32600`) {
			t.Errorf("refusal %d = %q, want rule %s", i, refusals[i], r.rule)
		}
	}
	if len(res.InFlight) != 0 || res.TransportFailures != 0 {
		t.Errorf("in flight at end = %d, transport failures %d, want 0, 0", len(res.InFlight), res.TransportFailures)
	}
	if len(sink.gaps) != 0 {
		t.Errorf("frame indexes out of order: %q", sink.gaps)
	}
	var frames []string
	for _, e := range sink.log() {
		if strings.HasPrefix(e, "frame client") || strings.HasPrefix(e, "streamed") {
			frames = append(frames, e)
		}
	}
	wantFrames := []string{
		"frame client_to_server forwarded request", "frame client_to_server refused invalid_json",
		"frame client_to_server forwarded request", "frame client_to_server refused invalid_json",
		"frame client_to_server forwarded notification", "frame client_to_server refused duplicate_member",
		fmt.Sprintf("streamed client_to_server refused %d", len(huge)),
		"frame client_to_server refused unterminated",
	}
	if strings.Join(frames, "; ") != strings.Join(wantFrames, "; ") {
		t.Errorf("client frames committed:\n%s\nwant\n%s", strings.Join(frames, "\n"), strings.Join(wantFrames, "\n"))
	}
}

// TestStreamedServerFrame: a server frame over the limit is spooled and
// committed by digest and length (of the bytes without the terminator),
// never delivered: no client may receive what the gate did not read. The
// frame after it is delivered.
func TestStreamedServerFrame(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh not found")
	}
	const interpret = 1 << 20
	// The "server" writes one line of interpret+5000 bytes and a normal
	// notification after it.
	script := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' 'z'; printf '\r\n{"jsonrpc":"2.0","method":"notifications/message"}\n'`, interpret+5000)
	var out lockedBuf
	sink := &memSink{}
	_, err = Run(context.Background(), Config{
		Command: sh, Args: []string{"-c", script}, ClientIn: strings.NewReader(""), ClientOut: &out, ServerErr: io.Discard, sink: sink,
		Grace: time.Second, KillAfter: time.Second, MaxInterpret: interpret, SpoolDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	body := bytes.Repeat([]byte("z"), interpret+5000)
	want := []byte(`{"jsonrpc":"2.0","method":"notifications/message"}` + "\n")
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("client got %d bytes, want only the notification's %d", len(out.Bytes()), len(want))
	}
	log := strings.Join(sink.log(), "; ")
	if !strings.Contains(log, fmt.Sprintf("streamed server_to_client withheld %d", len(body))) || !strings.Contains(log, "frame server_to_client forwarded notification") {
		t.Errorf("committed: %s", log)
	}
	if len(sink.gaps) != 0 {
		t.Errorf("frame indexes out of order: %q", sink.gaps)
	}
}

// TestSpoolLimits: a refused client frame is spooled only up to MaxRetain
// (past it, only hashed: the disk is not the client's to fill), and a
// server frame over MaxServerFrame is committed and withheld, never
// delivered uncommitted.
func TestSpoolLimits(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh not found")
	}
	const interpret = 1 << 20
	spoolDir := t.TempDir()
	script := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' 'z'; printf '\n{"jsonrpc":"2.0","method":"notifications/message"}\n'; cat >/dev/null`, 3<<20)
	var in bytes.Buffer
	in.Write(bytes.Repeat([]byte("q"), 4<<20))
	in.WriteString("\n")
	var out lockedBuf
	sink := &memSink{}
	_, err = Run(context.Background(), Config{
		Command: sh, Args: []string{"-c", script}, ClientIn: &in, ClientOut: &out, ServerErr: io.Discard, sink: sink,
		Grace: time.Second, KillAfter: time.Second, MaxInterpret: interpret, SpoolDir: spoolDir,
		MaxRetain: 2 << 20, MaxServerFrame: 2 << 20,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	log := strings.Join(sink.log(), "; ")
	if !strings.Contains(log, fmt.Sprintf("streamed client_to_server refused %d", 4<<20)) || !strings.Contains(log, fmt.Sprintf("streamed server_to_client withheld %d", 3<<20)) {
		t.Fatalf("committed: %s", log)
	}
	for i, kept := range sink.bodies {
		if kept {
			t.Errorf("streamed frame %d came with its bytes, past the spool limit", i)
		}
	}
	if got := out.String(); strings.Contains(got, "zzzz") || !strings.Contains(got, "notifications/message") {
		t.Errorf("the client got %d bytes: the withheld frame must not reach it, the next frame must", len(got))
	}
	if ents, _ := os.ReadDir(spoolDir); len(ents) != 0 {
		t.Errorf("%d spool files left behind", len(ents))
	}
}

// TestSpoolFailureWithholds: a server frame over the limit whose spool
// cannot be created is committed withheld (never claimed forwarded), not
// delivered, and the session ends with the failure.
func TestSpoolFailureWithholds(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh not found")
	}
	const interpret = 1 << 20
	script := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' 'z'; printf '\n'`, 2<<20)
	var out lockedBuf
	sink := &memSink{}
	_, err = Run(context.Background(), Config{
		Command: sh, Args: []string{"-c", script}, ClientIn: strings.NewReader(""), ClientOut: &out, ServerErr: io.Discard, sink: sink,
		Grace: time.Second, KillAfter: time.Second, MaxInterpret: interpret, SpoolDir: filepath.Join(t.TempDir(), "missing"),
	})
	if !errors.Is(err, session.ErrAuditUnavailable) {
		t.Errorf("Run: %v, want session.ErrAuditUnavailable (the frame could not be retained)", err)
	}
	if log := strings.Join(sink.log(), "; "); !strings.Contains(log, fmt.Sprintf("streamed server_to_client withheld %d", 2<<20)) {
		t.Errorf("committed: %s", log)
	}
	if n := len(out.Bytes()); n != 0 {
		t.Errorf("the client got %d bytes of a frame that was never spooled", n)
	}
}

// TestLargeResponse: a server frame over the interpret limit that begins
// as the answer to the call waiting for it is read whole from its spool by
// the gate and bound as that call's response, then delivered byte for
// byte; one over MaxLargeResponse is still withheld and the call settled
// by the proxy (-32093).
func TestLargeResponse(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh not found")
	}
	const interpret = 1 << 20
	for _, tc := range []struct {
		name    string
		size    int
		maxLarg int64
		bound   bool
	}{
		{"bound", 3 << 20, 0, true},
		{"over-max-large-response", 3 << 20, 2 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := fmt.Sprintf(`read l; printf '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"'; head -c %d /dev/zero | tr '\0' 'z'; printf '"}]}}\n'; cat >/dev/null`, tc.size)
			out := &lineBuf{line: make(chan struct{})}
			sink := &memSink{}
			cin, cw := io.Pipe()
			go func() {
				_, _ = io.WriteString(cw, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}`+"\n")
			}()
			done := make(chan error, 1)
			go func() {
				_, err := Run(context.Background(), Config{
					Command: sh, Args: []string{"-c", script}, ClientIn: cin, ClientOut: out, ServerErr: io.Discard, sink: sink,
					Grace: time.Second, KillAfter: time.Second, MaxInterpret: interpret, SpoolDir: t.TempDir(),
					MaxLargeResponse: tc.maxLarg, Capture: session.CaptureNever,
				})
				done <- err
			}()
			<-out.line // the answer, the server's or the proxy's: one line
			cw.Close()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			log := strings.Join(sink.log(), "; ")
			if tc.bound {
				want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"%s"}]}}`+"\n", bytes.Repeat([]byte("z"), tc.size))
				if out.String() != want {
					t.Fatalf("client got %d bytes, want the %d-byte response", len(out.Bytes()), len(want))
				}
				if !strings.Contains(log, "response a1 complete late=false") {
					t.Fatalf("committed: %s", log)
				}
				return
			}
			if !strings.Contains(out.String(), "-32093") || strings.Contains(out.String(), "zzzz") || !strings.Contains(log, "streamed server_to_client withheld") {
				t.Fatalf("client got %.200q; committed: %s", out.String(), log)
			}
		})
	}
}

// lineBuf keeps what is written and closes line at the first LF.
type lineBuf struct {
	lockedBuf
	line chan struct{}
	once sync.Once
}

func (l *lineBuf) Write(p []byte) (int, error) {
	n, err := l.lockedBuf.Write(p)
	if bytes.IndexByte(p, '\n') >= 0 {
		l.once.Do(func() { close(l.line) })
	}
	return n, err
}
