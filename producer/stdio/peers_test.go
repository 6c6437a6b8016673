package stdio

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"

	"github.com/tracectl/tracectl/internal/mcptest"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }

// pipeClient is the MCP client side of an in-process proxy run.
type pipeClient struct {
	t     *testing.T
	in    *io.PipeWriter // client -> proxy
	out   *bufio.Reader  // proxy -> client
	lines chan []byte
	done  chan struct{}
	res   *producer.SessionResult
	err   error
}

func startProxy(t *testing.T, sink session.Sink, cfg Config, server string, args ...string) *pipeClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg.Command, cfg.Args = server, args
	cfg.ClientIn, cfg.ClientOut, cfg.ServerErr, cfg.sink = inR, outW, io.Discard, sink
	if cfg.Grace == 0 {
		cfg.Grace = 500 * time.Millisecond
	}
	if cfg.KillAfter == 0 {
		cfg.KillAfter = 500 * time.Millisecond
	}
	c := &pipeClient{t: t, in: inW, out: bufio.NewReader(outR), lines: make(chan []byte, 100), done: make(chan struct{})}
	go func() {
		c.res, c.err = Run(context.Background(), cfg)
		outW.Close()
		close(c.done)
	}()
	go func() {
		for {
			l, err := c.out.ReadBytes('\n')
			if len(l) > 0 {
				c.lines <- l
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	t.Cleanup(func() { inW.Close(); <-c.done })
	return c
}

func (c *pipeClient) send(line string) {
	c.t.Helper()
	if _, err := c.in.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *pipeClient) recv() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("recv: proxy closed the client's stdout")
		}
		return string(l)
	case <-time.After(10 * time.Second):
		c.t.Fatal("recv: timeout")
	}
	return ""
}

func (c *pipeClient) finish() (*producer.SessionResult, error) {
	c.in.Close()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.t.Fatal("proxy did not finish")
	}
	return c.res, c.err
}

const (
	initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	listLine = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
)

func callLine(id, tool string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
}

func TestLegacySessionRecordsInOrder(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	c := startProxy(t, sink, Config{}, raw, "-script", "paged")
	c.send(initLine)
	if got := c.recv(); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize response = %s", got)
	}
	c.send(listLine)
	page1 := c.recv()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"page-2"}}`)
	c.recv()
	c.send(callLine("3", "raw-0000"))
	if got := c.recv(); !strings.Contains(got, `"called raw-0000"`) {
		t.Fatalf("call response = %s", got)
	}
	if _, err := c.finish(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(sink.log(), "\n")
	want := strings.Join([]string{
		"frame client_to_server forwarded request",
		"protocol legacy 2025-11-25",
		"frame server_to_client forwarded response",
		"frame client_to_server forwarded request",
		"page " + itoa(len(listLine)+1) + " " + itoa(len(page1)),
		"frame server_to_client forwarded response",
		"frame client_to_server forwarded request",
		"page",
		"frame server_to_client forwarded response",
		"attempt a1",
		"response a1 complete late=false",
	}, "\n")
	if !prefixLines(got, want) {
		t.Fatalf("sink log:\n%s\nwant (line prefixes):\n%s", got, want)
	}
}

func TestCallTimeoutThenSessionEndLeavesUnknown(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	c := startProxy(t, sink, Config{CallTimeout: 50 * time.Millisecond, Grace: 200 * time.Millisecond}, raw, "-script", "never-answer")
	c.send(callLine(`"x"`, "raw-0000"))
	time.Sleep(150 * time.Millisecond)
	res, err := c.finish()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.InFlight) != 1 || res.InFlight[0] != "a1" || res.TransportFailures != 0 {
		t.Fatalf("result = %+v, want a1 in flight (unknown), no transport failure", res)
	}
	if got, want := strings.Join(sink.log(), ";"), "attempt a1;timeout a1"; got != want {
		t.Fatalf("sink log = %q, want %q", got, want)
	}
}

func TestServerClosesStdoutWithCallInFlight(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	c := startProxy(t, sink, Config{}, raw, "-script", "close-stdout-unanswered")
	c.send(callLine("9007199254740991", "raw-0000"))
	got := c.recv()
	// The client gets a JSON-RPC error for its exact id.
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":9007199254740991,"error":{"code":`+strconv.Itoa(mcpwire.CodeTransportFailure)+`,`) {
		t.Fatalf("client got %s", got)
	}
	res, err := c.finish()
	if err != nil {
		t.Fatal(err)
	}
	if res.TransportFailures != 1 || len(res.InFlight) != 0 {
		t.Fatalf("result = %+v, want one transport failure", res)
	}
	if log := strings.Join(sink.log(), ";"); log != "attempt a1;transport_failure a1" {
		t.Fatalf("sink log = %q", log)
	}
}

func TestAuditFailureFailsClosed(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{failNext: errors.New("no space left on device")}
	c := startProxy(t, sink, Config{}, raw, "-script", "paged")
	c.send(callLine("7", "raw-0000"))
	got := c.recv()
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":7,"error":{"code":`+strconv.Itoa(mcpwire.CodeAuditUnavailable)+`,`) || !strings.Contains(got, "audit unavailable") {
		t.Fatalf("client got %s", got)
	}
	// The server never saw the call: a ping answered next proves the
	// session continued and nothing else came back for id 7.
	c.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if got := c.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":8,`) {
		t.Fatalf("after the refused call the client got %s, want the ping response", got)
	}
	_, err := c.finish()
	if !errors.Is(err, session.ErrAuditUnavailable) {
		t.Fatalf("Run error = %v, want session.ErrAuditUnavailable", err)
	}
}

func TestExactIDsMatchResponses(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	c := startProxy(t, sink, Config{}, raw, "-script", "echo-ids")
	ids := []string{"9007199254740991", "-9007199254740991", "0", `""`, `"ab"`, `"é\n"`}
	for _, id := range ids {
		c.send(callLine(id, "raw-0000"))
		if got := c.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":`+id+`,`) {
			t.Fatalf("id %s: got %s", id, got)
		}
	}
	// Ids a server would read as another id are refused: it matches by
	// value (through float64, after unescaping), the recorder by text.
	for _, id := range []string{"9007199254740993", "-0", "1.5", "1.0", "1e0", `"a\u0062"`} {
		c.send(callLine(id, "raw-0000"))
		if got := c.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) || !strings.Contains(got, "(bad_id)") {
			t.Fatalf("id %s: got %s, want a bad_id refusal", id, got)
		}
	}
	if _, err := c.finish(); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.attempts) != len(ids) || len(sink.responses) != len(ids) {
		t.Fatalf("attempts %d responses %d, want %d each", len(sink.attempts), len(sink.responses), len(ids))
	}
	for i, a := range sink.attempts {
		if a.Msg.IDText() != ids[i] {
			t.Errorf("attempt %d id text = %q, want %q", i, a.Msg.IDText(), ids[i])
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// prefixLines reports whether each line of want is a prefix of the same
// line of got, and got has no more lines.
func prefixLines(got, want string) bool {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(g) != len(w) {
		return false
	}
	for i := range w {
		if !strings.HasPrefix(g[i], w[i]) {
			return false
		}
	}
	return true
}

// TestConflictingIDsAreNotGuessed sends two calls with one id while the
// first is in flight (the server waits before each answer): neither
// response is attributed to either attempt.
func TestConflictingIDsAreNotGuessed(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	c := startProxy(t, sink, Config{}, raw, "-script", "paged", "-call-delay", "200ms")
	c.send(callLine("5", "raw-0000"))
	c.send(callLine("5", "raw-0001"))
	for i := 0; i < 2; i++ {
		if got := c.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":5,`) {
			t.Fatalf("response %d = %s", i, got)
		}
	}
	res, err := c.finish()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sink.log(), ";"); got != "attempt a1;attempt a2;frame server_to_client forwarded response;frame server_to_client forwarded response" {
		t.Fatalf("sink log = %q, want two attempts and no attributed response", got)
	}
	if res.TransportFailures != 0 || len(res.InFlight) != 0 {
		t.Fatalf("result = %+v: the entry must be gone once both responses came", res)
	}
}

// TestUnrecordableCallsAreRefused: tools/call lines a lenient server would
// execute but the recorder cannot record exactly never reach the server;
// the client gets -32600 for its id, and the session goes on.
func TestUnrecordableCallsAreRefused(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	c := startProxy(t, sink, Config{}, raw, "-script", "echo-ids")
	cases := []struct{ line, wantID string }{
		{`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"raw-0000","arguments":{"s":"\ud800"}}}`, "11"},
		{"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"raw-0000\",\"arguments\":{\"s\":\"\xff\"}}}", "12"},
		{`{"jsonrpc":"2.0","id":13,"id":14,"method":"tools/call","params":{"name":"raw-0000"}}`, "null"},
		{`{"jsonrpc":"2.0","id":15,"method":"ping","method":"tools/call","params":{"name":"raw-0000"}}`, "15"},
		{`{"jsonrpc":"2.0","id":17,"Method":"tools/call","params":{"name":"raw-0000"}}`, "17"},
	}
	for _, tc := range cases {
		c.send(tc.line)
		got := c.recv()
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":`+tc.wantID+`,"error":{"code":-32600,`) || !strings.Contains(got, "refused by the recorder's gate") {
			t.Fatalf("for %q the client got %s", tc.line, got)
		}
	}
	// A line that is not a tools/call is refused too when it is not
	// strict JSON (the gate does not guess what a lenient server reads),
	// and the session goes on.
	c.send("{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"ping\",\"params\":{\"s\":\"\xff\"}}")
	if got := c.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":16,"error":{"code":-32600,`) {
		t.Fatalf("non-UTF-8 ping: %s", got)
	}
	c.send(`{"jsonrpc":"2.0","id":18,"method":"ping"}`)
	if got := c.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":18,"result"`) {
		t.Fatalf("ping after the refusals: %s", got)
	}
	if _, err := c.finish(); err != nil {
		t.Fatalf("Run: %v (a refusal is not an audit failure)", err)
	}
	var refusedN int
	for _, e := range sink.log() {
		if strings.HasPrefix(e, "attempt") {
			t.Errorf("an attempt was recorded for a refused frame: %q", sink.log())
		}
		if strings.Contains(e, " refused ") {
			refusedN++
		}
	}
	if refusedN != len(cases)+1 {
		t.Errorf("%d refused frames committed, want %d: %q", refusedN, len(cases)+1, sink.log())
	}
}

// TestClientThatStopsReading: a client that closes its read side is not a
// server failure; the call in flight gets its response recorded.
func TestClientThatStopsReading(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	sink := &memSink{}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	outR.Close() // the client never reads: every write to it fails
	done := make(chan struct{})
	var res *producer.SessionResult
	var runErr error
	go func() {
		res, runErr = Run(context.Background(), Config{Command: raw, Args: []string{"-script", "paged", "-call-delay", "100ms"},
			ClientIn: inR, ClientOut: outW, ServerErr: io.Discard, sink: sink, Grace: 2 * time.Second, KillAfter: time.Second})
		close(done)
	}()
	io.WriteString(inW, callLine("1", "raw-0000")+"\n"+callLine("2", "raw-0001")+"\n")
	inW.Close()
	<-done
	if runErr != nil {
		t.Fatal(runErr)
	}
	if res.TransportFailures != 0 || len(res.InFlight) != 0 {
		t.Fatalf("result = %+v: blamed on the server", res)
	}
	// The first failed write is reported once; the client's going away
	// does not stop the recording.
	want := "attempt a1;attempt a2;response a1 complete late=false;client_gone;response a2 complete late=false"
	if !res.ClientGone {
		t.Errorf("Result.ClientGone = false after every write failed")
	}
	if got := strings.Join(sink.log(), ";"); got != want {
		t.Fatalf("sink log = %q, want %q", got, want)
	}
}

// cancelFailSink fails to commit a cancellation, as a full disk would.
type cancelFailSink struct{ *memSink }

func (cancelFailSink) CancelSent(session.AttemptRef, session.NotificationObs) error {
	return errors.New("no space left on device")
}

// TestUncommittedCancellationNotForwarded: a cancellation the sink cannot
// commit never reaches the server (which logs every line it reads), and the
// session ends with the audit failure.
func TestUncommittedCancellationNotForwarded(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	var serverLog lockedBuf
	in := strings.NewReader(callLine("5", "raw-0000") + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}` + "\n")
	_, err := Run(context.Background(), Config{
		Command: raw, Args: []string{"-script", "never-answer", "-v"},
		ClientIn: in, ClientOut: io.Discard, ServerErr: &serverLog, sink: cancelFailSink{&memSink{}},
		Grace: 200 * time.Millisecond, KillAfter: 200 * time.Millisecond,
	})
	if !errors.Is(err, session.ErrAuditUnavailable) {
		t.Fatalf("Run: %v, want session.ErrAuditUnavailable", err)
	}
	log := serverLog.String()
	if !strings.Contains(log, `"method":"tools/call"`) {
		t.Fatalf("the server did not log the call: the log proves nothing:\n%s", log)
	}
	if strings.Contains(log, "notifications/cancelled") {
		t.Errorf("the server read a cancellation that was never committed:\n%s", log)
	}
}
