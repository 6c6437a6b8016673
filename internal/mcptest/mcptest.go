// Package mcptest gives tests real MCP peers to run as child processes over
// stdio: the Go SDK server in ./sdkserver, the hand-written JSON-RPC server in
// ./rawserver (for wire behaviour no SDK produces), and npm's
// server-everything when it is installed. It also has RawClient, a line-level
// driver for tests that speak raw JSON-RPC.
//
// It is test support: it may fail the test, skip it, and read
// $TRACECTL_EVERYTHING_BIN. Binaries built by Build live in one temporary
// directory per test binary; call Main from TestMain to remove it:
//
//	func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }
package mcptest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// modulePath is the module whose internal/mcptest/<name> packages Build builds.
const modulePath = "github.com/tracectl/tracectl"

// EverythingEnv names the environment variable that points at npm's
// mcp-server-everything binary.
const EverythingEnv = "TRACECTL_EVERYTHING_BIN"

// builds holds one build per server name for the whole test binary: building
// is the slow part (seconds), and every test of a package wants the same
// binaries. This is the only package state, and it is test support.
var builds = struct {
	sync.Mutex
	dir    string
	byName map[string]*build
}{byName: map[string]*build{}}

type build struct {
	once sync.Once
	path string
	err  error
}

// Build builds the command internal/mcptest/<name> (for example "sdkserver"
// or "rawserver") once per test binary, with the go command of the Go that
// runs the test, and returns the path of the binary. It fails the test if the
// build fails.
func Build(t testing.TB, name string) string {
	t.Helper()
	return buildOnce(t, name, modulePath+"/internal/mcptest/"+name)
}

// BuildTracectl builds the tracectl command itself (cmd/tracectl) once per
// test binary, for tests that run it as a real process (so it can be killed).
func BuildTracectl(t testing.TB) string {
	t.Helper()
	return buildOnce(t, "tracectl", modulePath+"/cmd/tracectl")
}

func buildOnce(t testing.TB, name, pkg string) string {
	t.Helper()
	builds.Lock()
	b := builds.byName[name]
	if b == nil {
		b = &build{}
		builds.byName[name] = b
	}
	builds.Unlock()
	b.once.Do(func() { b.path, b.err = buildCommand(name, pkg) })
	if b.err != nil {
		t.Fatalf("mcptest: %v", b.err)
	}
	return b.path
}

func buildCommand(name, pkg string) (string, error) {
	dir, err := buildDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	if runtime.GOOS == "windows" {
		out += ".exe"
	}
	cmd := exec.Command(goCommand(), "build", "-o", out, pkg)
	if root, err := RepoRoot(); err == nil {
		cmd.Dir = root
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", name, err, output)
	}
	return out, nil
}

func buildDir() (string, error) {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "tracectl-mcptest-")
		if err != nil {
			return "", fmt.Errorf("create build directory: %w", err)
		}
		builds.dir = dir
	}
	return builds.dir, nil
}

// goCommand returns the go command that builds the servers: the one on
// PATH, which under `go test` is the toolchain running the test (go test puts
// its own GOROOT/bin first on the test's PATH).
func goCommand() string { return "go" }

// Main runs the tests and then removes the binaries built by Build. Use it
// from TestMain in packages that call Build.
func Main(m *testing.M) int {
	code := m.Run()
	builds.Lock()
	dir := builds.dir
	builds.Unlock()
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "mcptest: remove %s: %v\n", dir, err)
		}
	}
	return code
}

// RepoRoot returns the root of the tracectl module, found by walking up from
// the working directory (a package directory under `go test`).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod for %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// EverythingBin returns the path of npm's mcp-server-everything: the value of
// $TRACECTL_EVERYTHING_BIN if set (the test fails if it does not exist), else
// <repo>/.ci/npm/node_modules/.bin/mcp-server-everything if present. Without
// either, or without node on PATH, the test is skipped.
func EverythingBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EverythingEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("mcptest: $%s: %v", EverythingEnv, err)
		}
		requireNode(t)
		return p
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	p := filepath.Join(root, ".ci", "npm", "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("npm's @modelcontextprotocol/server-everything is not installed (no $%s, no %s): "+
			"run .ci/run, or `cd .ci/npm && npm ci`, to install it", EverythingEnv, p)
	}
	requireNode(t)
	return p
}

func requireNode(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: npm's server-everything cannot run")
	}
}

// ErrTimeout is returned by RawClient.Recv when no line arrives in time.
var ErrTimeout = errors.New("mcptest: timed out waiting for a line")

// RawClient drives a child process over stdio one line at a time. Lines are
// returned exactly as read, including the trailing "\n" (a last line cut off
// by EOF has none). Its methods may be called from any goroutine, but Recv
// from one at a time.
type RawClient struct {
	cmd     *exec.Cmd
	stdin   *os.File
	lines   chan []byte // closed after the last line
	readErr error       // set before lines is closed
	stop    chan struct{}
	exited  chan struct{}
	waitErr error // set before exited is closed

	stdinMu     sync.Mutex
	stdinClosed bool
	stderr      LockedBuffer
}

// NewRawClient starts cmd (not yet started, with Stdin, Stdout and Stderr
// unset) and returns a client for it. At the end of the test the client closes
// the child's stdin, waits up to 5 s for it to exit, then kills it.
func NewRawClient(t testing.TB, cmd *exec.Cmd) *RawClient {
	t.Helper()
	if cmd.Stdin != nil || cmd.Stdout != nil || cmd.Stderr != nil {
		t.Fatal("mcptest: NewRawClient: cmd must not have Stdin, Stdout or Stderr set")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatalf("mcptest: stdin pipe: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatalf("mcptest: stdout pipe: %v", err)
	}
	c := &RawClient{
		cmd:    cmd,
		stdin:  inW,
		lines:  make(chan []byte),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &c.stderr
	if cmd.WaitDelay == 0 {
		// A grandchild holding stderr open must not block Wait forever.
		cmd.WaitDelay = 2 * time.Second
	}
	err = cmd.Start()
	// The child has its own copies; keeping ours open would hide EOF.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		t.Fatalf("mcptest: start %s: %v", cmd.Path, err)
	}
	go c.read(outR)
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.CloseStdin()
		if err := c.Wait(5 * time.Second); errors.Is(err, ErrTimeout) {
			_ = c.Kill()
			<-c.exited
		}
		close(c.stop)
	})
	return c
}

// StartRaw runs the binary at path with args under a RawClient: shorthand
// for NewRawClient(t, exec.Command(path, args...)).
func StartRaw(t testing.TB, path string, args ...string) *RawClient {
	t.Helper()
	return NewRawClient(t, exec.Command(path, args...))
}

func (c *RawClient) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			select {
			case c.lines <- line:
			case <-c.stop:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.readErr = err
			}
			close(c.lines)
			return
		}
	}
}

// Send writes line to the child's stdin, adding "\n" unless line ends with it.
func (c *RawClient) Send(line string) error {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line += "\n"
	}
	return c.Write([]byte(line))
}

// Write writes b to the child's stdin unchanged.
func (c *RawClient) Write(b []byte) error {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdinClosed {
		return errors.New("mcptest: write: stdin already closed")
	}
	if _, err := c.stdin.Write(b); err != nil {
		return fmt.Errorf("mcptest: write stdin: %w", err)
	}
	return nil
}

// Recv returns the next line from the child's stdout. It returns ErrTimeout
// if none arrives within timeout, and io.EOF (or the read error) once stdout
// is closed and every line has been returned.
func (c *RawClient) Recv(timeout time.Duration) ([]byte, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			if c.readErr != nil {
				return nil, fmt.Errorf("mcptest: read stdout: %w", c.readErr)
			}
			return nil, io.EOF
		}
		return line, nil
	case <-timer.C:
		return nil, ErrTimeout
	}
}

// CloseStdin closes the child's stdin (the MCP stdio shutdown signal). It is
// safe to call more than once.
func (c *RawClient) CloseStdin() error {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdinClosed {
		return nil
	}
	c.stdinClosed = true
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("mcptest: close stdin: %w", err)
	}
	return nil
}

// Wait waits up to timeout for the child to exit and returns its exit error
// (nil for status 0, an *exec.ExitError otherwise), or ErrTimeout.
func (c *RawClient) Wait(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.exited:
		return c.waitErr
	case <-timer.C:
		return ErrTimeout
	}
}

// Exited reports whether the child has exited.
func (c *RawClient) Exited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// Kill kills the child process.
func (c *RawClient) Kill() error {
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("mcptest: kill: %w", err)
	}
	return nil
}

// Stderr returns what the child has written to stderr so far.
func (c *RawClient) Stderr() string { return c.stderr.String() }

// LockedBuffer is a bytes.Buffer a child process's output and a test may
// use at once.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
