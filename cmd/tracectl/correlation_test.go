//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wrap --correlation-meta KEY: an agent host's own tool-use id under a
// _meta key of its choosing is recorded (correlation.tool_use_id), a call
// that reuses it is linked as that tool use's retry (caller_tool_use_id),
// the header commits to the key so verify derives the same, and the
// bundle verifies. A key of the wrong shape is a usage error before
// anything starts.
func TestCorrelationMeta(t *testing.T) {
	k := newPolicyKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	argv := k.wrap(bundle, []string{"--key", k.key, "--correlation-meta", "acme.dev/toolUseId"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "correlation-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"first", "again"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": m}, Meta: mcp.Meta{"acme.dev/toolUseId": "use-7"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	k.verified(t, bundle)
	out, err := exec.Command(k.bin, "export", "--format", "jsonl", bundle).CombinedOutput()
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"tool_use_id":"use-7"`) || !strings.Contains(lines[1], `"retry_basis":"caller_tool_use_id"`) || !strings.Contains(lines[1], `"retry_of":"a1"`) {
		t.Fatalf("export:\n%s", out)
	}

	bad := exec.Command(k.bin, "wrap", "--bundle", filepath.Join(k.dir, "bad.trace"), "--correlation-meta", "no spaces", "--", k.server)
	msg, err := bad.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(msg), "--correlation-meta") {
		t.Fatalf("a bad key: %v\n%s", err, msg)
	}
}
