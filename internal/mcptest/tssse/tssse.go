// Package tssse runs npm's TypeScript SDK v1 on the deprecated HTTP+SSE
// transport (2024-11-05): a server (server.cjs, SSEServerTransport on
// node's http module, serving GET /sse and POST /messages) and a client
// (client.cjs, SSEClientTransport), for the HTTP proxy's tests. It is test
// support: it skips the test when the SDK or node is absent (see package
// tsclient for where they are found).
package tssse

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

// Event is one line a script printed.
type Event struct {
	Event   string `json:"event"`
	Text    string `json:"text"`
	Tools   int    `json:"tools"`
	Port    int    `json:"port"`
	Message string `json:"message"`
}

func script(t testing.TB, name string) string {
	t.Helper()
	root, err := mcptest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "internal", "mcptest", "tssse", name)
}

// Server is a running server.cjs.
type Server struct {
	URL string // its stream's URL: http://127.0.0.1:PORT/sse

	mu       sync.Mutex
	executed []string
}

// Executed is the echo messages the server ran, in order.
func (s *Server) Executed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.executed...)
}

// StartServer starts server.cjs; it is killed when the test ends.
func StartServer(t *testing.T) *Server {
	t.Helper()
	sdk := tsclient.V1(t)
	cmd := exec.Command(sdk.Node, script(t, "server.cjs"), sdk.Dir)
	var stderr mcptest.LockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &Server{}
	listening := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			switch e.Event {
			case "listening":
				listening <- e.Port
			case "executed":
				s.mu.Lock()
				s.executed = append(s.executed, e.Text)
				s.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, out)
		close(listening)
	}()
	port, ok := <-listening
	if !ok {
		t.Fatalf("the HTTP+SSE server exited before listening: %s", stderr.String())
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d/sse", port)
	return s
}

// RunClient runs client.cjs against url (a stream's URL) and returns its
// events; it fails the test when the client fails.
func RunClient(t *testing.T, url string) []Event {
	t.Helper()
	sdk := tsclient.V1(t)
	return tsclient.Run[Event](t, sdk.Node, []string{"internal", "mcptest", "tssse", "client.cjs"}, sdk.Dir, url)
}
