package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoEndToEnd runs the real binary's demo, as the README tells a new
// user to: an embedded server as a child process behind the recording
// proxy, then offline verification. It must end verified, with every step
// of the script recorded.
func TestDemoEndToEnd(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tracectl")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tracectl: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "demo")
	cmd := exec.Command(bin, "demo", "--dir", out)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tracectl demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"verdict: verified (bundle, 1 warning)",
		"warning     answered_after_cancel [attempt a4]",
		"retry_linked [attempt a5]: a new attempt retrying a4 (caller_declared)",
		"snapshot_verified [snapshot s2]",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("demo report lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "tracectl: demo: 7 attempts: ") {
		t.Errorf("demo summary:\n%s", stderr.String())
	}
	for _, f := range []string{"demo-key.pem", "demo-key.pem.pub", "demo.trace/record.json", "demo.trace/transcript.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("demo left no %s: %v", f, err)
		}
	}
}
