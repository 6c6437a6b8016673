//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: what a user's terminal gives a
// command as its stderr.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here (%v): progress on a terminal cannot be shown", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestProgressQuiet: verify, show, export and report draw a progress line
// on a terminal stderr (drawn, then cleared before the result), nothing
// with --quiet; stdout (a pipe) never gets one.
func TestProgressQuiet(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "run.trace")
	if err := writeFixture(bundle, "basic"); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key.pem")
	writeFixtureKey(t, key)
	for _, argv := range [][]string{
		{"verify", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", bundle},
		{"show", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", bundle},
		{"export", "--format", "jsonl", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", bundle},
		{"report", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", "--out", filepath.Join(dir, "report.html"), bundle},
	} {
		for _, quiet := range []bool{false, true} {
			args := argv
			if quiet {
				args = append([]string{"--quiet"}, argv...)
			}
			master, slave := openPTY(t)
			var out bytes.Buffer
			if code := run(args, strings.NewReader(""), &out, slave); code != 0 {
				t.Fatalf("%s: exit %d", args, code)
			}
			slave.Close()
			tty := readPTY(t, master)
			i := strings.LastIndex(tty, "\r\x1b[Ktracectl: verifying: ")
			drawn := i >= 0 && strings.Contains(tty[i+4:], "\r\x1b[K") // drawn, then cleared before anything else
			if drawn == quiet {
				t.Errorf("%s: the terminal got %q: want a progress line drawn and cleared %v", args, tty, !quiet)
			}
			if strings.Contains(out.String(), "\x1b[K") {
				t.Errorf("%s: stdout (not a terminal) got a progress line", args)
			}
			os.Remove(filepath.Join(dir, "report.html"))
		}
	}
}

// readPTY reads what a closed pseudo-terminal's other side wrote (EIO
// ends it once the slave is closed).
func readPTY(t *testing.T, m *os.File) string {
	t.Helper()
	var b bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := m.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.EIO) {
				return b.String()
			}
			t.Fatal(err)
		}
	}
}
