//go:build linux

package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProxyCommand runs the tracectl binary as `tracectl proxy` in front of
// a Go SDK Streamable HTTP server (stateful: a 2025-11-25 session), drives
// it with the Go SDK's streamable client, stops it with SIGTERM and checks
// that the session's bundle is signed and verifies with `tracectl verify`.
func TestProxyCommand(t *testing.T) {
	k := newKit(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "cli-http", Version: "1"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer up.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(k.bin, "proxy", "--upstream", up.URL+"/mcp", "--listen", addr, "--bundle-dir", k.bundles, "--key", k.key)
	cmd.Env = k.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	var log []string
	for sc.Scan() {
		log = append(log, sc.Text())
		if strings.Contains(sc.Text(), "proxying") {
			break
		}
	}
	lines := make(chan string, 64)
	go func() {
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect through tracectl proxy: %v\n%s", err, strings.Join(log, "\n"))
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via cli"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "via cli" {
		t.Fatalf("call: %v %+v", err, res)
	}
	cs.Close() // DELETE: the session's bundle is sealed
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		log = append(log, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tracectl proxy: %v\n%s", err, strings.Join(log, "\n"))
	}
	t.Logf("tracectl proxy stderr:\n%s", strings.Join(log, "\n"))
	bundles, _ := filepath.Glob(filepath.Join(k.bundles, "tracectl-*-session.trace"))
	if len(bundles) != 1 {
		t.Fatalf("session bundles %v, want one", bundles)
	}
	t.Logf("tracectl verify:\n%s", k.verified(t, bundles[0]))
}
