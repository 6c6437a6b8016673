package session

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// TestDeniedCodeInSpec: the code and reason a denied call is answered with
// are in spec/wrap.md's table of injected codes.
func TestDeniedCodeInSpec(t *testing.T) {
	b, err := os.ReadFile("../../../spec/wrap.md")
	if err != nil {
		t.Fatal(err)
	}
	if row := "| " + strconv.Itoa(CodePolicyDenied) + " | `policy_denied` |"; !strings.Contains(string(b), row) {
		t.Errorf("spec/wrap.md has no row %q", row)
	}
}

// TestDeniedResponse: the answer is one JSON-RPC error object under the
// exact id, with the code and the rule in the message and data.
func TestDeniedResponse(t *testing.T) {
	for _, id := range []string{`7`, `"a\"b"`, ``} {
		line := DeniedResponse(id, &transcript.Decision{Action: "deny", Rule: "pin", Reason: `tool "x": declaration drifted: description`})
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    struct{ Source, Reason, Rule, Detail string }
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		wantID := id
		if id == "" {
			wantID = "null"
		}
		e := m.Error
		if string(m.ID) != wantID || e.Code != CodePolicyDenied || e.Data.Rule != "pin" || e.Data.Reason != "policy_denied" ||
			!strings.Contains(e.Data.Detail, "drifted") || !strings.HasPrefix(e.Message, "tracectl: denied by policy rule pin: ") {
			t.Errorf("%s: got %+v", line, m)
		}
	}
}

// teeWriter keeps what the session wrote to the server.
type teeWriter struct {
	mu  sync.Mutex
	w   io.WriteCloser
	got strings.Builder
}

func (t *teeWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.got.Write(b)
	t.mu.Unlock()
	return t.w.Write(b)
}

func (t *teeWriter) Close() error { return t.w.Close() }

func (t *teeWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.got.String()
}

// TestSessionDenies: through the session core against the Go SDK server, a
// denied call with an id is answered -32094 and a denied call without an
// id gets nothing; neither is written to the server; the allowed call is.
// The transcript holds the three attempts, their decisions and two denied
// observations.
func TestSessionDenies(t *testing.T) {
	srv, stdin, stdout := sdkServer(t)
	policy := "version: 1\ndefault: allow\nrules:\n  - id: no-x1\n    tool: echo\n    when: 'args.x == 1'\n    action: deny\n"
	rec := openSDKRecorder(t, srv, "policy-test", func(o *producer.Options) { o.PolicyFile = []byte(policy) })
	c := serveRaw(rec, stdin, stdout)
	server, clientW, done, lines := c.server, c.clientW, c.done, c.lines
	call := func(id, x string) string {
		idm := ""
		if id != "" {
			idm = `"id":` + id + `,`
		}
		return `{"jsonrpc":"2.0",` + idm + `"method":"tools/call","params":{"name":"echo","arguments":{"x":` + x + `},` + streamMeta + `}}` + "\n"
	}
	// The notification first: were it answered, its answer would come
	// before the request's.
	// Written from another goroutine: the pipes have no buffer, and the
	// session answers the denied call while the client still writes.
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(clientW, call("", "1")+call("1", "1")+call("2", "2"))
		wrote <- err
	}()
	got := map[string]string{}
	for len(got) < 2 {
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v (got %v)", err, got)
		}
		var m struct{ ID json.RawMessage }
		_ = json.Unmarshal([]byte(line), &m)
		got[string(m.ID)] = line
	}
	if !strings.Contains(got["1"], `"code":-32094`) || !strings.Contains(got["1"], `"rule":"no-x1"`) {
		t.Errorf("the denied request's answer: %s", got["1"])
	}
	if !strings.Contains(got["2"], `"result"`) {
		t.Errorf("the allowed request's answer: %s", got["2"])
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	clientW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sent := server.String()
	if strings.Contains(sent, `"x":1`) || !strings.Contains(sent, `"x":2`) {
		t.Errorf("written to the server:\n%s\nwant the allowed call only", sent)
	}
	if _, err := rec.Seal(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b := readBundleLines(t, rec.Dir())
	for _, want := range []string{`"decision":{"action":"deny","declaration":"sha256:`, `"rule":"no-x1"},`, `"kind":"denied"`, `"attempts":3,"denied":2,`} {
		if !strings.Contains(b, want) {
			t.Errorf("the transcript lacks %s:\n%s", want, b)
		}
	}
	if n := strings.Count(b, `"kind":"denied"`); n != 2 {
		t.Errorf("%d denied observations, want 2", n)
	}
}
