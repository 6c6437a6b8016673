//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/transcript"
)

// TestVerifyHostilePaths: a record or proof path that is a FIFO, a device
// or a link to one, and a bundle whose transcript is a FIFO, never hang
// verify: it exits within the deadline, 2 with a clear error for an
// unreadable record, 1 with file_refused for a refused bundle file.
func TestVerifyHostilePaths(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pub")
	if err := os.WriteFile(key, pemOf(t, verifytest.Key(t, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "record.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "b.trace")
	for name, f := range verifytest.Standard(t).FS() {
		p := filepath.Join(bundle, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tr := filepath.Join(bundle, transcript.TranscriptFile)
	if err := os.Remove(tr); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(tr, 0o600); err != nil {
		t.Fatal(err)
	}
	at := []string{"verify", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z"}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout (code 1) or stderr (code 2)
	}{
		{"record FIFO", append(at, fifo), exitUsage, "not a regular file"},
		{"record is /dev/zero", append(at, zero), exitUsage, "not a regular file"},
		{"record /dev/zero directly", append(at, "/dev/zero"), exitUsage, "not a regular file"},
		{"proof FIFO", append(at, "--proof", fifo, filepath.Join(bundle, transcript.RecordFile)), exitUsage, "not a regular file"},
		{"transcript FIFO", append(at, bundle), exitFailed, "file_refused"},
		{"prove from a FIFO transcript", []string{"prove", "--bundle", bundle, "--attempt", "a1", "--out", filepath.Join(dir, "p")}, exitUsage, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type res struct {
				out, errOut []byte
				code        int
			}
			done := make(chan res, 1)
			go func() {
				o, e, c := runCLI(t, tt.args...)
				done <- res{o, e, c}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			select {
			case r := <-done:
				if r.code != tt.wantCode {
					t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.out, r.errOut)
				}
				got := r.errOut
				if tt.wantCode == exitFailed {
					got = r.out
				}
				if !bytes.Contains(got, []byte(tt.wantOut)) {
					t.Errorf("output does not say %q:\nstdout: %s\nstderr: %s", tt.wantOut, r.out, r.errOut)
				}
			case <-ctx.Done():
				t.Fatal("verify did not return within 2s")
			}
		})
	}
}
