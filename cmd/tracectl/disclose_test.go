package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/transcript"
)

// TestDisclose: a disclosed attempt verifies on its own (the record, the
// inclusion proof of its lines, and exactly its payloads and the bound
// snapshot's, with their salts). Changing one disclosed byte, or one
// salt, fails it. No payload of another attempt is in the disclosure.
func TestDisclose(t *testing.T) {
	if testing.Short() {
		t.Skip("records a demo session")
	}
	dir := t.TempDir()
	// The demo re-executes its binary as the server: the real binary, not
	// this test's.
	if out, err := exec.Command(mcptest.BuildTracectl(t), "demo", "--dir", filepath.Join(dir, "d")).CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	bundle, pub := filepath.Join(dir, "d", "demo.trace"), filepath.Join(dir, "d", "demo-key.pem.pub")
	out := filepath.Join(dir, "a1.disclosed")
	so, e, code := runCLI(t, "disclose", "--bundle", bundle, "--attempt", "a1", "--out", out)
	if code != 0 || !strings.Contains(string(so), "attempt a1:") {
		t.Fatalf("disclose: exit %d: %s %s", code, so, e)
	}
	if _, _, code := runCLI(t, "disclose", "--bundle", bundle, "--attempt", "a1", "--out", out); code != 2 {
		t.Errorf("disclose over an existing directory: exit %d, want 2", code)
	}
	// --format json: the same summary as one object; a bad --format
	// writes nothing.
	outJSON := filepath.Join(dir, "a1.json.disclosed")
	jo, e, code := runCLI(t, "disclose", "--bundle", bundle, "--attempt", "a1", "--out", outJSON, "--format", "json")
	var res discloseResult
	if err := json.Unmarshal(jo, &res); code != 0 || err != nil || bytes.Count(jo, []byte("\n")) != 1 {
		t.Fatalf("disclose --format json: exit %d, %v: %s %s", code, err, jo, e)
	}
	if got, want := string(so), fmt.Sprintf("%s: attempt %s: %d of %d lines and %d payloads disclosed\n", out, res.Attempt, res.Lines, res.TreeSize, res.Payloads); got != want || res.Out != outJSON || res.MediaType != discloseMediaType || res.Lines == 0 {
		t.Errorf("--format json %+v disagrees with the text:\n got %q\nwant %q", res, got, want)
	}
	if _, _, code := runCLI(t, "disclose", "--bundle", bundle, "--attempt", "a1", "--out", filepath.Join(dir, "y"), "--format", "yaml"); code != exitUsage {
		t.Errorf("--format yaml: exit %d, want %d", code, exitUsage)
	}
	if _, err := os.Stat(filepath.Join(dir, "y")); err == nil {
		t.Error("--format yaml wrote the disclosure")
	}
	so, e, code = runCLI(t, "verify", "--trusted-key", pub, out)
	if code != 0 || !strings.Contains(string(so), "verdict: verified (disclosure)") || !strings.Contains(string(so), "payloads_verified") {
		t.Fatalf("verify the disclosure: exit %d:\n%s%s", code, so, e)
	}
	// Only a1's payloads (and the snapshot's) are disclosed: another
	// attempt's request is not in the disclosed pack.
	full, _ := os.ReadFile(filepath.Join(bundle, transcript.PackFile))
	disclosed, _ := os.ReadFile(filepath.Join(out, transcript.PackFile))
	if len(disclosed) == 0 || len(disclosed) >= len(full) {
		t.Errorf("disclosed pack %d bytes, the bundle's %d", len(disclosed), len(full))
	}

	tamper := func(name string, edit func([]byte) []byte) string {
		t.Helper()
		c := filepath.Join(t.TempDir(), "c")
		if err := os.Mkdir(c, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{transcript.RecordFile, transcript.DisclosureFile, transcript.PackFile} {
			data, _ := os.ReadFile(filepath.Join(out, f))
			if f == transcript.PackFile {
				data = edit(bytes.Clone(data))
			}
			if err := os.WriteFile(filepath.Join(c, f), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	// The last entry is a1's response, salted: "<hex> <len> <salt>\n<bytes>\n".
	last := bytes.LastIndex(disclosed[:len(disclosed)-1], []byte("\n"))
	hdrStart := bytes.LastIndex(disclosed[:last], []byte("\n")) + 1
	for name, edit := range map[string]func([]byte) []byte{
		"a byte": func(p []byte) []byte { p[len(p)-3] ^= 1; return p },
		"a salt": func(p []byte) []byte {
			h := p[hdrStart:last]
			i := bytes.LastIndexByte(h, ' ')
			if i < 0 || len(h)-i-1 != 2*transcript.SaltBytes {
				t.Fatalf("the last entry is not salted: %q", h)
			}
			if h[i+1] == '0' {
				h[i+1] = '1'
			} else {
				h[i+1] = '0'
			}
			return p
		},
	} {
		so, _, code := runCLI(t, "verify", "--trusted-key", pub, tamper(name, edit))
		if code != 1 || !strings.Contains(string(so), "evidence_mismatch") {
			t.Errorf("%s changed: exit %d, want 1 with evidence_mismatch:\n%s", name, code, so)
		}
	}
}
