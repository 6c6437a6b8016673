package main

import (
	"encoding/json"
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
	// --format json: one object on stdout, the report whole, the bundle
	// and the key named.
	js := exec.Command(bin, "demo", "--dir", filepath.Join(dir, "demo-json"), "--format", "json")
	var jout strings.Builder
	js.Stdout = &jout
	if err := js.Run(); err != nil {
		t.Fatalf("tracectl demo --format json: %v", err)
	}
	var res struct {
		MediaType string `json:"media_type"`
		Bundle    string `json:"bundle"`
		PublicKey string `json:"public_key"`
		Report    struct {
			Verdict string `json:"verdict"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(jout.String()), &res); err != nil || strings.Count(jout.String(), "\n") != 1 {
		t.Fatalf("demo --format json: %v\n%s", err, jout.String())
	}
	if res.MediaType != demoMediaType || res.Report.Verdict != "verified" || filepath.Base(res.Bundle) != "demo.trace" || filepath.Base(res.PublicKey) != "demo-key.pem.pub" {
		t.Errorf("demo --format json: %+v", res)
	}
}
