package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

// exitCodeMarkdown is the exit-code table as README.md and spec/README.md
// hold it.
func exitCodeMarkdown() string {
	var b strings.Builder
	b.WriteString("| code | name | meaning |\n|---|---|---|\n")
	for _, e := range exitCodeTable {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", exitCodeText(e.code), e.name, e.meaning)
	}
	return b.String()
}

// TestExitCodeTableDocumented: README.md and spec/README.md hold exactly
// the table `tracectl help exit-codes` prints, row for row, and the help
// topic lists every code.
func TestExitCodeTableDocumented(t *testing.T) {
	want := exitCodeMarkdown()
	for _, doc := range []string{"README.md", filepath.Join("spec", "README.md")} {
		data, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "\n"+want+"\n") {
			t.Errorf("%s does not hold the exit-code table (a blank line before and after); it should read:\n%s", doc, want)
		}
	}
	help := exitCodesHelp()
	for _, e := range exitCodeTable {
		if !strings.Contains(help, fmt.Sprintf("\n  %-5s %-10s ", exitCodeText(e.code), e.name)) {
			t.Errorf("help exit-codes lacks %d %s:\n%s", e.code, e.name, help)
		}
	}
}

// TestIOFailure: which errors are the network's or the disk's (exit 5)
// rather than the invocation's (exit 2).
func TestIOFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"disk full", &fs.PathError{Op: "write", Path: "out.csv", Err: syscall.ENOSPC}, true},
		{"I/O error", fmt.Errorf("read bundle: %w", &fs.PathError{Op: "read", Path: "x", Err: syscall.EIO}), true},
		{"read-only", &fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, true},
		{"in use", &net.OpError{Op: "listen", Net: "tcp", Err: &os.SyscallError{Syscall: "bind", Err: syscall.EADDRINUSE}}, true},
		{"http client", &url.Error{Op: "Post", URL: "http://collector", Err: errors.New("EOF")}, true},
		{"dns", &net.DNSError{Err: "no such host", Name: "collector"}, true},
		{"malformed address", &net.OpError{Op: "listen", Net: "tcp", Err: &net.AddrError{Err: "missing port in address", Addr: "x"}}, false},
		{"missing file", &fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, false},
		{"exists", &fs.PathError{Op: "open", Path: "x", Err: syscall.EEXIST}, false},
		{"permission", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, false},
		{"plain", errors.New("malformed record"), false},
	} {
		if got := ioFailure(tt.err); got != tt.want {
			t.Errorf("%s: ioFailure(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestOwnErrorsExitCode: an error a command returns exits 5 when the disk
// or the network failed, 2 otherwise, without the --help hint either way.
func TestOwnErrorsExitCode(t *testing.T) {
	root := &cobra.Command{Use: "tracectl", SilenceErrors: true, SilenceUsage: true}
	var ret error
	root.AddCommand(&cobra.Command{Use: "fails", RunE: func(*cobra.Command, []string) error { return ret }})
	markOwnErrors(root)
	for _, tt := range []struct {
		err  error
		want int
	}{
		{&fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}, exitIO},
		{errors.New("malformed"), exitUsage},
		{&exitError{code: exitFailed}, exitFailed},
	} {
		ret = tt.err
		root.SetArgs([]string{"fails"})
		var errw bytes.Buffer
		if got := exitCode(root.Execute(), &errw); got != tt.want {
			t.Errorf("%v: exit %d, want %d", tt.err, got, tt.want)
		}
		if strings.Contains(errw.String(), "--help") {
			t.Errorf("%v: usage hint:\n%s", tt.err, errw.String())
		}
	}
}

// TestExportOTLPExitIO: a collector that refuses the spans, and one that
// is not there, exit 5 (a network failure), not 2.
func TestExportOTLPExitIO(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer refusing.Close()
	// A port that was just listened on and closed: connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	for _, endpoint := range []string{refusing.URL, gone} {
		_, stderr, code := runCLI(t, "export", "--format", "otlp", "--timeout", "10s", "--endpoint", endpoint, bundle)
		if code != exitIO {
			t.Errorf("%s: exit %d, want %d: %s", endpoint, code, exitIO, stderr)
		}
		if !bytes.Contains(stderr, []byte("tracectl: error: otlp export to "+endpoint)) || !bytes.Contains(stderr, []byte("tracectl: hint: ")) {
			t.Errorf("%s: stderr %s", endpoint, stderr)
		}
	}
}

// TestProxyListenInUse: an address another process holds exits 5; a
// malformed one stays a usage error.
func TestProxyListenInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "proxy", "--upstream", "http://127.0.0.1:9/mcp", "--listen", ln.Addr().String(), "--bundle-dir", dir)
	if code != exitIO || !bytes.Contains(stderr, []byte("address already in use")) {
		t.Errorf("listen in use: exit %d, want %d: %s", code, exitIO, stderr)
	}
	_, stderr, code = runCLI(t, "proxy", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1", "--bundle-dir", dir)
	if code != exitUsage {
		t.Errorf("listen without a port: exit %d, want %d: %s", code, exitUsage, stderr)
	}
}
