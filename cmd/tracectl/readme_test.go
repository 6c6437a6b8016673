package main

import (
	"bytes"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest"
)

// repoRoot is the repository root, from this package's directory.
const repoRoot = "../.."

// readmeBlock returns the first fenced block of the given language after
// the README.md heading that starts with heading.
func readmeBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "\n"+heading)
	if !ok {
		t.Fatalf("README.md has no heading %q", heading)
	}
	_, block, ok := strings.Cut(after, "\n```"+lang+"\n")
	if !ok {
		t.Fatalf("README.md has no %s block after %q", lang, heading)
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatalf("README.md: unterminated block after %q", heading)
	}
	return block + "\n"
}

// gitStatus is `git status` of the repository, ignored files and
// directories included (an ignored directory as one line), or
// "" when git or a work tree is not available.
func gitStatus(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "status", "--porcelain", "--ignored", "--untracked-files=normal").Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// TestREADMEInstall runs the README's install command from the
// repository root, into a temporary GOBIN, and the binary it installs.
func TestREADMEInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("installs tracectl with the go command (seconds); skipped under -short")
	}
	block := readmeBlock(t, "## Install", "sh")
	if block != "go install ./cmd/tracectl\n" {
		t.Fatalf("README's install block changed; this test runs exactly `go install ./cmd/tracectl`:\n%s", block)
	}
	bin := t.TempDir()
	cmd := exec.Command("sh", "-c", block)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", block, err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "tracectl"), "version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("tracectl ")) {
		t.Fatalf("installed tracectl version: %v\n%s", err, out)
	}
}

// TestREADMERecipe runs the README's five-minute recipe as written, with
// bash as the MCP client, against the npm server-everything (the local
// copy TRACECTL_EVERYTHING_BIN names stands in for the recipe's npx line):
// it prints a verified verdict, and it writes nothing into the repository;
// the key and the bundle are in the recipe's temporary directory.
func TestREADMERecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tracectl and runs an npm MCP server (seconds); skipped under -short")
	}
	everything := os.Getenv("TRACECTL_EVERYTHING_BIN")
	if everything == "" {
		t.Skip("TRACECTL_EVERYTHING_BIN is not set (.ci/run installs @modelcontextprotocol/server-everything under .ci/npm and sets it)")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("the recipe is bash (coproc); bash not found")
	}
	block := readmeBlock(t, "## Record a real npm MCP server in five minutes", "bash")
	const npx = "npx -y @modelcontextprotocol/server-everything"
	if strings.Count(block, npx) != 1 {
		t.Fatalf("the recipe no longer starts the server with %q once; update this test:\n%s", npx, block)
	}
	block = strings.Replace(block, npx, `"$TRACECTL_EVERYTHING_BIN"`, 1)

	tmp := t.TempDir()
	before := gitStatus(t)
	cmd := exec.Command(bash, "-c", block)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("recipe: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	if !strings.Contains(stdout.String(), "verdict: verified (bundle)") {
		t.Errorf("the recipe's last command did not print a verified verdict:\n%s\nstderr:\n%s", stdout.Bytes(), stderr.Bytes())
	}
	if after := gitStatus(t); after != before {
		t.Errorf("the recipe changed the repository's status:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var keys []string
	filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "key.pem" {
			keys = append(keys, path)
		}
		return nil
	})
	if len(keys) != 1 {
		t.Errorf("want the recipe's key in its temporary directory, found %v", keys)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "key.pem")); err == nil {
		t.Error("the recipe wrote key.pem into the repository")
	}
}

// TestGitignore: keys and bundles a recipe or a run leaves in the tree are
// ignored; the keys that are test fixtures on purpose are not.
func TestGitignore(t *testing.T) {
	if gitStatus(t) == "" {
		t.Skip("not a git work tree, or git not found")
	}
	for _, tt := range []struct {
		path    string
		ignored bool
	}{
		{"key.pem", true},
		{"key.pem.pub", true},
		{"cmd/tracectl/demo-key.pem", true},
		{"everything.trace", true},
		{"bundles/tracectl-20261201T191237.268Z-1a6b175a.trace/record.json", true},
		{"sign/testdata/rsa.pem", false},
		{"internal/vectors/testdata/v4/r1-snapshot-matches/trusted-key.pem", false},
		{"dist/checksums.txt", true},
		{"README.md", false},
	} {
		// --no-index: whether a new file at path would be ignored, tracked or not.
		err := exec.Command("git", "-C", repoRoot, "check-ignore", "-q", "--no-index", tt.path).Run()
		if got := err == nil; got != tt.ignored {
			t.Errorf("%s: ignored %v, want %v (%v)", tt.path, got, tt.ignored, err)
		}
	}
}

// TestREADMEAnchoring runs the README's anchoring block as written, with
// the Go SDK's server for the npx line and a free port for 7480: the log
// serves, the session is anchored, verify --log-key prints a verified
// verdict with anchor_included, and audit finds nothing.
func TestREADMEAnchoring(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tracectl and runs a log (seconds); skipped under -short")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("the block is bash (/dev/tcp); bash not found")
	}
	block := readmeBlock(t, "### Anchoring in a transparency log", "bash")
	const npx = "npx -y @modelcontextprotocol/server-everything"
	if strings.Count(block, npx) != 1 || strings.Count(block, "7480") != 3 {
		t.Fatalf("the block changed; update this test:\n%s", block)
	}
	block = strings.Replace(block, npx, mcptest.Build(t, "sdkserver"), 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	block = strings.ReplaceAll(block, "7480", port)
	cmd := exec.Command(bash, "-c", block)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("block: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	out := stdout.String()
	if !strings.Contains(out, "verdict: verified (bundle)") || !strings.Contains(out, "pass        anchor_included [anchors/record.json]") ||
		!strings.Contains(out, "1 sessions, 1 bundles: 0 findings") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, stderr.Bytes())
	}
}

// TestREADMEPin runs the README's pin-and-policy journey as written, with
// bash as the MCP client, against the npm server-everything (its local copy
// stands in for the npx lines): the long echo is denied with -32094 naming
// the rule, and the bundle verifies with the decisions re-derived.
func TestREADMEPin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tracectl and runs an npm MCP server (seconds); skipped under -short")
	}
	everything := os.Getenv("TRACECTL_EVERYTHING_BIN")
	if everything == "" {
		t.Skip("TRACECTL_EVERYTHING_BIN is not set (.ci/run installs @modelcontextprotocol/server-everything under .ci/npm and sets it)")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("the journey is bash (coproc); bash not found")
	}
	block := readmeBlock(t, "## Pin your tools", "bash")
	const npx = "npx -y @modelcontextprotocol/server-everything"
	if strings.Count(block, npx) != 2 {
		t.Fatalf("the journey no longer starts the server with %q twice; update this test:\n%s", npx, block)
	}
	block = strings.ReplaceAll(block, npx, `"$TRACECTL_EVERYTHING_BIN"`)
	tmp := t.TempDir()
	before := gitStatus(t)
	cmd := exec.Command(bash, "-c", block)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("journey: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	out := stdout.String()
	for _, want := range []string{`"id":2`, `"code":-32094,"message":"tracectl: denied by policy rule short-echo-only"`,
		"verdict: verified (bundle)", "decisions_verified: 2 decisions (1 deny) re-derived"} {
		if !strings.Contains(out, want) {
			t.Errorf("the journey's output lacks %q:\n%s\nstderr:\n%s", want, out, stderr.Bytes())
		}
	}
	if after := gitStatus(t); after != before {
		t.Errorf("the journey changed the repository's status:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
