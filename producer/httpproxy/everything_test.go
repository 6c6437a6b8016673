package httpproxy

import (
	"bufio"
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
	"github.com/tracectl/tracectl/internal/mcptest/tshttp"
)

// TestEverythingTypeScriptClient: npm's server-everything in streamableHttp
// mode behind the proxy, with the TypeScript SDK v1's Streamable HTTP
// client in front of it (a 2025-11-25 session: initialize, the GET stream,
// DELETE). The echo call is an attempt with its response, the session's
// bundle verifies, and the bearer token never appears in it.
func TestEverythingTypeScriptClient(t *testing.T) {
	bin := mcptest.EverythingBin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := exec.Command(bin, "streamableHttp")
	srv.Env = append(os.Environ(), "PORT="+port)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = srv.Stdout
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening on port") {
			break
		}
	}
	go func() {
		for sc.Scan() { // drain the server's log
		}
	}()
	h := newHarness(t, "http://127.0.0.1:"+port+"/mcp", nil)
	const token = "tok-7f3a9c2e1b5d4a60"
	evs := tshttp.Run(t, h.srv.URL+"/mcp", token)
	var echo string
	for _, e := range evs {
		if e.Event == "echo" {
			echo = e.Text
		}
	}
	if !strings.Contains(echo, "through tracectl proxy") {
		t.Fatalf("echo through the proxy: %+v", evs)
	}
	reps := h.close()
	requireIntact(t, reps)
	a, r, _, _ := total(reps)
	if a != 1 || r != 1 {
		t.Fatalf("attempts %d responses %d, want 1 1", a, r)
	}
	for d, rep := range reps {
		t.Logf("%s: %s", filepath.Base(d), rep.Verdict)
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(token)) {
					t.Errorf("%s holds the bearer token", p)
				}
			}
			return nil
		})
	}
}
