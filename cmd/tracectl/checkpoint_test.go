//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest"
)

// modernCall is a 2026-07-28 tools/call (no initialize needed).
func modernCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`+"\n", id, tool, args)
}

// TestWrapCheckpointSIGKILL: tracectl wrap with --checkpoint-every 3 in
// front of the Go SDK server is killed with SIGKILL mid-session. verify
// reports the last checkpoint's prefix signed and the tail unsigned
// (incomplete, nothing failed); seal --recover keeps the checkpoints and
// the final record verifies.
func TestWrapCheckpointSIGKILL(t *testing.T) {
	k := newKit(t)
	srv := mcptest.Build(t, "sdkserver")
	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--checkpoint-every", "3", srv)
	responses := bufio.NewReader(outR)
	roundTrip := func(id int, args string) {
		t.Helper()
		req := modernCall(id, "echo", args)
		if id == 0 {
			req = `{"jsonrpc":"2.0","id":0,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"
		}
		if _, err := io.WriteString(w.in, req); err != nil {
			t.Fatal(err)
		}
		line, err := responses.ReadString('\n')
		if err != nil || !strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) {
			t.Fatalf("call %d: %q, %v\n%s", id, line, err, w.stderr)
		}
	}
	roundTrip(0, "") // tools/list: the calls bind its snapshot
	roundTrip(1, `{"n":1}`)
	roundTrip(2, `{"n":2}`)
	roundTrip(3, `{"n":3}`)
	w.stderr.waitFor(t, "3 attempts signed")
	// A call still running at the server when tracectl dies, and one
	// answered after it: the client's lines are committed in order, so
	// its answer says the running call's attempt is in the journal.
	if _, err := io.WriteString(w.in, modernCall(4, "slow", `{"ms":60000}`)); err != nil {
		t.Fatal(err)
	}
	roundTrip(5, `{"n":5}`)
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	w.wait(t)
	outW.Close()
	if _, err := os.Stat(filepath.Join(bundle, "record.json")); !os.IsNotExist(err) {
		t.Fatalf("a killed wrap left record.json: %v", err)
	}
	ckpts, err := filepath.Glob(filepath.Join(bundle, "checkpoints", "*.json"))
	if err != nil || len(ckpts) != 1 {
		t.Fatalf("checkpoints %v, %v", ckpts, err)
	}

	out, err := exec.Command(k.bin, "verify", "--trusted-key", k.key+".pub", bundle).CombinedOutput()
	if code := procExit(err); code != exitIncomplete {
		t.Fatalf("verify exit %d (%v), want %d\n%s", code, err, exitIncomplete, out)
	}
	for _, want := range []string{"verdict: incomplete", "pass checkpoint_bound", "(3 attempts) commit to the signed", "unavailable tail_unsigned", "(2 attempts) are after the last checkpoint",
		"verification incomplete: tail_unsigned\n"} {
		if !strings.Contains(squeeze(string(out)), want) && !strings.Contains(string(out), want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), " fail ") {
		t.Errorf("a killed checkpointed session has failures:\n%s", out)
	}

	if out, err := exec.Command(k.bin, "seal", "--recover", "--bundle", bundle, "--key", k.key).CombinedOutput(); err != nil {
		t.Fatalf("seal --recover: %v\n%s", err, out)
	}
	for _, c := range ckpts {
		if _, err := os.Stat(c); err != nil {
			t.Errorf("seal --recover lost %s: %v", c, err)
		}
	}
	out = []byte(k.verified(t, bundle))
	if s := squeeze(string(out)); !strings.Contains(s, "pass transcript_bound") || !strings.Contains(s, "pass checkpoint_bound") {
		t.Errorf("after recovery:\n%s", out)
	}
}

// startArgs is start with the whole command line given.
func (k *lifecycleKit) startArgs(t *testing.T, stdout io.Writer, args ...string) *wrapRun {
	t.Helper()
	cmd := exec.Command(k.bin, args...)
	cmd.Env = k.env()
	cmd.Stdout = stdout
	w := &wrapRun{cmd: cmd, stderr: newLineLog(), done: make(chan struct{})}
	var err error
	if w.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go w.stderr.read(errR)
	go func() { <-w.stderr.eof; w.err = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-w.done })
	return w
}

// squeeze collapses runs of spaces (the text report aligns columns).
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

func procExit(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
