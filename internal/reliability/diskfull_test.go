//go:build linux

package reliability

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/transcript"
)

// smallFS mounts a tmpfs of the given size for the test, or skips saying
// why it cannot (it needs root and mount(2)).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disk-full test needs root to mount a size-limited tmpfs; injected ENOSPC faults are covered in producer and producer/stdio")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a size-limited tmpfs here (%v); injected ENOSPC faults are covered in producer and producer/stdio", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestWrapOnFullDisk records onto a real 512 KiB file system until it is
// full. The proxy must fail closed: a call it cannot make durable is never
// forwarded (the server's own log shows it never arrived) and the client
// gets a JSON-RPC error naming the reason; what was recorded before stays a
// valid journal.
func TestWrapOnFullDisk(t *testing.T) {
	fsDir := smallFS(t, "512k")
	tracectl := mcptest.BuildTracectl(t)
	raw := mcptest.Build(t, "rawserver")
	bundle := filepath.Join(fsDir, "b.trace")
	serverLog := filepath.Join(t.TempDir(), "server.log")
	// The server logs every message it receives to stderr; wrap passes it
	// through, and the test keeps it.
	cmd := exec.Command(tracectl, "wrap", "--bundle", bundle, "--durability", "strict", "--grace", "1s", "--", raw, "-script", "paged", "-v")
	logf, err := os.Create(serverLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	stdin, _ := cmd.StdinPipe()
	stdoutPipe, _ := cmd.StdoutPipe()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReaderSize(stdoutPipe, 1<<20)
	pad := strings.Repeat("p", 60<<10) // 60 KiB of arguments per call: the disk fills in a few calls
	var refusedID string
	for i := 1; i <= 40 && refusedID == ""; i++ {
		id := fmt.Sprintf("%d", 1000+i)
		line := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"raw-0000","arguments":{"pad":"` + pad + `"}}}` + "\n"
		if _, err := io.WriteString(stdin, line); err != nil {
			t.Fatalf("write call %d: %v", i, err)
		}
		resp, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("read response %d: %v", i, err)
		}
		switch {
		case strings.Contains(resp, `"error":{"code":-32091`): // audit unavailable (spec/wrap.md)
			if !strings.Contains(resp, "audit unavailable") {
				t.Fatalf("refusal does not name the reason: %s", resp)
			}
			refusedID = id
		case !strings.Contains(resp, `"called raw-0000"`):
			t.Fatalf("call %d: unexpected response %s", i, resp)
		}
	}
	if refusedID == "" {
		t.Fatal("the 512 KiB file system never filled: no call was refused")
	}
	stdin.Close()
	_ = cmd.Wait() // sealing cannot succeed on a full disk; the exit status says so
	log, err := os.ReadFile(serverLog)
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: the first call was forwarded, and the log shows it.
	if !strings.Contains(string(log), `"id":1001,`) {
		t.Fatalf("server log does not show the forwarded call 1001; the check below would prove nothing:\n%s", tail(string(log), 2000))
	}
	if strings.Contains(string(log), `"id":`+refusedID+`,`) {
		t.Fatalf("the refused call %s reached the server:\n%s", refusedID, tail(string(log), 2000))
	}
	// Everything durable before the fault is still a readable journal.
	f, err := os.Open(filepath.Join(bundle, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := transcript.NewReader(f)
	lines := 0
	for {
		_, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A torn final line is what recovery quarantines; anything
			// else is corruption.
			var le *transcript.LineError
			if errors.As(err, &le) && le.Code == transcript.CodeTornLine {
				break
			}
			t.Fatalf("journal after the disk filled: line %d: %v", lines, err)
		}
		lines++
	}
	if lines < 2 {
		t.Fatalf("journal holds %d lines, want the header and the attempts before the fault", lines)
	}
	t.Logf("disk full: journal kept %d valid lines; refused call %s never reached the server", lines, refusedID)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
