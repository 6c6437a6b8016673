package session

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/producer"
)

// rawElicitSession runs the session core between a raw client (frames
// written and read here) and the Go SDK server, with an approve rule on
// echo calls whose x is 1 and ApproveElicit.
type rawElicitSession struct {
	rec     *producer.Recorder
	server  *teeWriter
	clientW *io.PipeWriter
	done    chan error
	read    func() map[string]json.RawMessage
	write   func(string)
}

func newRawElicitSession(t *testing.T) *rawElicitSession {
	srv, stdin, stdout := sdkServer(t)
	policy := "version: 1\ndefault: allow\nrules:\n  - id: ask-x1\n    tool: echo\n    when: 'args.x == 1'\n    action: approve\n"
	rec := openSDKRecorder(t, srv, "elicit-test", func(o *producer.Options) { o.PolicyFile, o.ApproveElicit = []byte(policy), true })
	c := serveRaw(rec, stdin, stdout)
	server, clientW, done, lines := c.server, c.clientW, c.done, c.lines
	read := func() map[string]json.RawMessage {
		t.Helper()
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(clientW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	return &rawElicitSession{rec: rec, server: server, clientW: clientW, done: done, read: read, write: write}
}

// elicitMeta declares form elicitation in a modern call's _meta.
const elicitMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

func elicitCall(id, x string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"x":` + x + `},` + elicitMeta + `}}`
}

// TestSessionElicitRaw: the session core asking a raw client (frames by
// hand) through elicitation, against the Go SDK server. A call the
// approve rule matched makes the session send elicitation/create under an
// id of its own namespace; while it waits, the client's next call is read,
// forwarded and answered (the approval is off the reader); a response
// under an id of that namespace that answers no pending elicitation is
// withheld too, never forwarded; the client's input ending while the
// elicitation waits fails the approval at once ("the client's input ended
// before it answered"), the call is denied and never reaches the server,
// and Serve returns.
func TestSessionElicitRaw(t *testing.T) {
	r := newRawElicitSession(t)
	rec, server, clientW, done, read, write := r.rec, r.server, r.clientW, r.done, r.read, r.write
	call := elicitCall
	write(call("1", "1"))
	ask := read()
	var id string
	if err := json.Unmarshal(ask["id"], &id); err != nil || !strings.HasPrefix(id, "tracectl-approval-") || !strings.HasSuffix(id, "-a1") || string(ask["method"]) != `"elicitation/create"` {
		t.Fatalf("the session asked %v", ask)
	}
	// The session goes on reading: another call is forwarded and answered.
	write(call("2", "2"))
	if m := read(); string(m["id"]) != "2" || m["result"] == nil {
		t.Fatalf("the call read while another awaits approval: %v", m)
	}
	// An answer under the session's namespace for no pending elicitation:
	// withheld, never forwarded.
	stray := strings.TrimSuffix(id, "a1") + "a9"
	write(`{"jsonrpc":"2.0","id":"` + stray + `","result":{"action":"accept","content":{"approve":true}}}`)
	// The client's input ends while the elicitation waits.
	clientW.Close()
	if m := read(); string(m["id"]) != "1" || !strings.Contains(string(m["error"]), `approval failed: the client's input ended before it answered`) {
		t.Fatalf("the call awaiting approval: %v", m)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sent := server.String()
	if strings.Contains(sent, `"x":1`) || !strings.Contains(sent, `"x":2`) || strings.Contains(sent, "tracectl-approval") {
		t.Errorf("written to the server:\n%s\nwant the second call only", sent)
	}
	if _, err := rec.Seal(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b := readBundleLines(t, rec.Dir())
	for _, want := range []string{`"outcome":"failed","reason":"the client's input ended before it answered","via":"elicitation"}`, `"direction":"client_to_server","disposition":"withheld"`, `"kind":"denied"`} {
		if !strings.Contains(b, want) {
			t.Errorf("the transcript lacks %s:\n%s", want, b)
		}
	}
}

// TestSessionElicitBounded: at most approval.MaxPending elicitations wait
// for the client at once in a session: past that, a call's approval fails
// at once (the call denied, nothing sent to the client), and the client's
// input ending fails those that waited.
func TestSessionElicitBounded(t *testing.T) {
	r := newRawElicitSession(t)
	go func() {
		var b strings.Builder
		for i := range approval.MaxPending + 1 {
			b.WriteString(elicitCall(strconv.Itoa(i+1), "1") + "\n")
		}
		_, _ = io.WriteString(r.clientW, b.String())
	}()
	asked, denied := 0, ""
	for asked < approval.MaxPending || denied == "" {
		m := r.read()
		switch {
		case string(m["method"]) == `"elicitation/create"`:
			asked++
		case m["error"] != nil:
			if denied != "" {
				t.Fatalf("a second denial: %v", m)
			}
			denied = string(m["error"])
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
	if asked != approval.MaxPending || !strings.Contains(denied, "elicitations wait for the client already") {
		t.Fatalf("%d elicitations sent, and the denial %s", asked, denied)
	}
	r.clientW.Close()
	for range approval.MaxPending {
		if m := r.read(); !strings.Contains(string(m["error"]), "the client's input ended before it answered") {
			t.Fatalf("a call that waited: %v", m)
		}
	}
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.server.String(), `"x":1`) {
		t.Errorf("a call reached the server:\n%s", r.server.String())
	}
}
