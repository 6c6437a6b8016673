//go:build linux

package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text"`
}

// cliServer is a Go SDK Streamable HTTP server (stateful) with echo and a
// tool that blocks until its request is cancelled; started is told when
// it starts.
func cliServer(t *testing.T) (url string, started chan struct{}) {
	server := mcp.NewServer(&mcp.Implementation{Name: "cli-http", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	started = make(chan struct{}, 1)
	mcp.AddTool(server, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoIn) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(up.Close)
	return up.URL + "/mcp", started
}

// proxyRun is a running `tracectl proxy`.
type proxyRun struct {
	cmd   *exec.Cmd
	addr  string
	log   []string
	lines chan string
}

func startProxy(t *testing.T, k *lifecycleKit, upstream string, extra ...string) *proxyRun {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxyRun{addr: "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), lines: make(chan string, 64)}
	l.Close()
	p.cmd = exec.Command(k.bin, append([]string{"proxy", "--upstream", upstream, "--listen", p.addr, "--bundle-dir", k.bundles, "--key", k.key}, extra...)...)
	p.cmd.Env = k.env()
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		p.log = append(p.log, sc.Text())
		if strings.Contains(sc.Text(), "proxying") {
			break
		}
	}
	go func() {
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

// wait collects the rest of the proxy's stderr and its exit.
func (p *proxyRun) wait() error {
	for l := range p.lines {
		p.log = append(p.log, l)
	}
	return p.cmd.Wait()
}

func (p *proxyRun) session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + p.addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect through tracectl proxy: %v\n%s", err, strings.Join(p.log, "\n"))
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via cli"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "via cli" {
		t.Fatalf("call: %v %+v", err, res)
	}
	return cs
}

func sessionBundle(t *testing.T, k *lifecycleKit) string {
	t.Helper()
	bundles, _ := filepath.Glob(filepath.Join(k.bundles, "tracectl-*-session.trace"))
	if len(bundles) != 1 {
		t.Fatalf("session bundles %v, want one", bundles)
	}
	return bundles[0]
}

// TestProxyCommand runs the tracectl binary as `tracectl proxy` in front of
// a Go SDK Streamable HTTP server (stateful: a 2025-11-25 session), drives
// it with the Go SDK's streamable client, stops it with SIGTERM and checks
// that the session's bundle is signed and verifies with `tracectl verify`.
func TestProxyCommand(t *testing.T) {
	k := newKit(t)
	url, _ := cliServer(t)
	p := startProxy(t, k, url)
	cs := p.session(t)
	cs.Close() // DELETE: the session's bundle is sealed
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("tracectl proxy: %v\n%s", err, strings.Join(p.log, "\n"))
	}
	t.Logf("tracectl proxy stderr:\n%s", strings.Join(p.log, "\n"))
	t.Logf("tracectl verify:\n%s", k.verified(t, sessionBundle(t, k)))
}

// TestProxyKilledRecovered: the proxy is killed (SIGKILL) with a call in
// flight. `tracectl seal --recover` seals and signs what was recorded: the
// finished call keeps its response, the one in flight is resolved unknown
// (never "did not run"), and the bundle verifies.
func TestProxyKilledRecovered(t *testing.T) {
	k := newKit(t)
	url, started := cliServer(t)
	p := startProxy(t, k, url)
	cs := p.session(t)
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "block", Arguments: map[string]any{"text": "x"}})
	<-started // its attempt is durable: it was forwarded
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait()
	b := sessionBundle(t, k)
	if out, err := exec.Command(k.bin, "seal", "--recover", "--bundle", b, "--key", k.key).CombinedOutput(); err != nil {
		t.Fatalf("seal --recover: %v\n%s", err, out)
	}
	out := k.verified(t, b)
	if !strings.Contains(out, "2 attempts (1 responses, 0 transport failures, 1 unknown)") {
		t.Fatalf("verify after recovery:\n%s", out)
	}
}

// TestProxyPathSecrets: `tracectl proxy` in front of an upstream whose URL
// path holds a key, with --redact-path naming another segment: neither is
// in any file of the bundle, in what the proxy prints, or in what verify
// prints; the header names the upstream with the segments redacted.
func TestProxyPathSecrets(t *testing.T) {
	const key, tenant = "k9Xw2Lq7Vz4Nm8Rt3Bc6", "tenant-acme"
	k := newKit(t)
	url, _ := cliServer(t)
	p := startProxy(t, k, url+"/"+key+"/"+tenant, "--redact-path", "^tenant-")
	cs := p.session(t)
	cs.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("tracectl proxy: %v\n%s", err, strings.Join(p.log, "\n"))
	}
	b := sessionBundle(t, k)
	out := k.verified(t, b)
	for _, s := range []string{key, tenant} {
		if strings.Contains(out, s) || strings.Contains(strings.Join(p.log, "\n"), s) {
			t.Errorf("%q printed:\n%s\n%s", s, out, strings.Join(p.log, "\n"))
		}
	}
	err := filepath.WalkDir(b, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		for _, s := range []string{key, tenant} {
			if strings.Contains(string(data), s) {
				t.Errorf("%s holds %q", path, s)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "[REDACTED:path]") {
		t.Errorf("verify does not show the redacted upstream path:\n%s", out)
	}
}
