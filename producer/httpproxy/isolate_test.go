package httpproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// blockingUpstream answers a tools/call (JSON) once released, and a
// notification with 202; started is told when a call arrives.
func blockingUpstream(t *testing.T) (url string, started chan struct{}, release chan struct{}) {
	started, release = make(chan struct{}, 4), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		started <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"done"}]}}`)
	}))
	t.Cleanup(up.Close)
	return up.URL, started, release
}

const (
	blockCall = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"block","arguments":{}}}`
	cancel5   = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"x"}}`
)

// rawPost sends a legacy (unmirrored) POST on its own connection.
func rawPost(t *testing.T, url, body, sid string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	c := &http.Client{Transport: &http.Transport{}} // a connection of its own
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("POST: %v", err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestClientsIsolated: a call in flight from one client, and a
// notifications/cancelled for its id from another, in the shared
// (sessionless) bundle: by connection without sessions, by session id
// with sessions the proxy did not see begin. The other client's cancel is
// a plain frame: the call is not marked cancelled and its response is a
// response, not a late one. The same session's cancel does name it.
func TestClientsIsolated(t *testing.T) {
	for _, tc := range []struct {
		name               string
		callSID, cancelSID string
		wantCancel         int64
	}{
		{"sessionless-other-connection", "", "", 0},
		{"other-session", "sess-A", "sess-B", 0},
		{"same-session", "sess-A", "sess-A", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, started, release := blockingUpstream(t)
			h := newHarness(t, url, nil)
			done := make(chan string, 1)
			go func() {
				code, body := rawPost(t, h.srv.URL, blockCall, tc.callSID)
				if code != http.StatusOK {
					t.Errorf("the call: status %d", code)
				}
				done <- body
			}()
			<-started
			if code, _ := rawPost(t, h.srv.URL, cancel5, tc.cancelSID); code != http.StatusAccepted {
				t.Fatalf("the cancellation: status %d", code)
			}
			close(release)
			if body := <-done; !strings.Contains(body, `"done"`) {
				t.Fatalf("the call's answer: %s", body)
			}
			reps := h.close()
			requireIntact(t, reps)
			files := bundleBytes(t, reps)
			if n := int64(countIn(files, `"kind":"cancel_sent"`)); n != tc.wantCancel {
				t.Fatalf("%d cancel_sent observations, want %d", n, tc.wantCancel)
			}
			// The server answered the call after all: a warning only when
			// the call's own client had cancelled it.
			var warned int64
			for _, rep := range reps {
				warned += int64(len(rep.Find(verify.CodeAnsweredAfterCancel)))
			}
			if warned != tc.wantCancel {
				t.Fatalf("%d answered_after_cancel warnings, want %d", warned, tc.wantCancel)
			}
			if a, r, u, _ := total(reps); tc.wantCancel == 0 && (a != 1 || r != 1 || u != 0) {
				t.Fatalf("attempts %d responses %d unknown %d, want 1 1 0: another client's cancel changed the call", a, r, u)
			}
		})
	}
}

// Each request line names its connection by a salted digest: requests on
// one connection share it, two connections differ, and neither address is
// in the transcript.
func TestConnectionRecorded(t *testing.T) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer up.Close()
	h := newHarness(t, up.URL, nil)
	var addrs []string
	for range 2 {
		tr := &http.Transport{}
		c := &http.Client{Transport: tr}
		for range 2 {
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL, strings.NewReader(callBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "echo")
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { addrs = append(addrs, i.Conn.LocalAddr().String()) }}
			resp, err := c.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
	}
	reps := h.close()
	var conns []string
	for dir := range reps {
		data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if strings.Contains(string(data), a) {
				t.Fatalf("the client address %s is in the transcript", a)
			}
		}
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, `"event":"request"`) {
				var ev struct {
					Connection string `json:"connection"`
				}
				json.Unmarshal([]byte(l), &ev)
				conns = append(conns, ev.Connection)
			}
		}
	}
	if len(conns) != 4 || conns[0] != conns[1] || conns[2] != conns[3] || conns[0] == conns[2] || !strings.HasPrefix(conns[0], "sha256:") {
		t.Fatalf("connections %v (client addresses %v), want two pairs of equal digests", conns, addrs)
	}
}
