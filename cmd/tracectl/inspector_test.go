//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

// TestInspectorCLI: the MCP Inspector's CLI (npm @modelcontextprotocol/inspector,
// `mcp-inspector --cli`), a one-shot client, calls echo through tracectl
// wrap (stdio) and through tracectl proxy (Streamable HTTP). It gets the
// server's answer, the server executed the call once, and each bundle
// verifies with the call's response recorded.
func TestInspectorCLI(t *testing.T) {
	inspector := tsclient.Inspector(t)
	k := newPolicyKit(t)
	home := t.TempDir() // the Inspector keeps a catalog under $HOME
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, inspector[0], append(inspector[1:], args...)...)
		cmd.Env = append(k.env(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-inspector --cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	answered := func(out, text string) {
		t.Helper()
		i := strings.Index(out, "{")
		var res struct {
			Content []struct{ Text string } `json:"content"`
		}
		if i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&res) != nil || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, text) {
			t.Fatalf("the Inspector did not print echo's answer %q:\n%s", text, out)
		}
	}

	// stdio: the Inspector starts `tracectl wrap` as its server.
	bundle := filepath.Join(k.dir, "inspector.trace")
	out := run(append(k.wrap(bundle, []string{"--key", k.key}), "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=via inspector")...)
	answered(out, "via inspector")
	if got := strings.Count(k.executed(t), "via inspector"); got != 1 {
		t.Fatalf("the server executed the call %d times, want 1:\n%s", got, k.executed(t))
	}
	if rep := k.verified(t, bundle); !strings.Contains(rep, "counts: 1 attempts (1 responses, 0 transport failures, 0 unknown)") {
		t.Fatalf("verify:\n%s", rep)
	}

	// Streamable HTTP: the Inspector in front of tracectl proxy.
	up, _ := cliServer(t)
	p := startProxy(t, k.lifecycleKit, up)
	out = run("http://"+p.addr+"/mcp", "--transport", "http", "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=over http")
	answered(out, "over http")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("proxy: %v\n%s", err, strings.Join(p.log, "\n"))
	}
	bundles, _ := filepath.Glob(filepath.Join(k.bundles, "*.trace"))
	calls := 0
	for _, b := range bundles {
		rep := k.verified(t, b)
		if strings.Contains(rep, "counts: 1 attempts (1 responses") {
			calls++
		}
	}
	if calls != 1 {
		t.Fatalf("%d of the proxy's bundles %v record the Inspector's call with its response, want 1", calls, bundles)
	}
}
