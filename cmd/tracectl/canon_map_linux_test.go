//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mappedInput maps a fresh file holding doc, or skips when the filesystem
// grants no read lease (then canon reads files instead, which other tests
// cover).
func mappedInput(t *testing.T, doc string) (path string, data []byte, done func() error) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _, done, err := readCanonInput(nil, path)
	if err != nil {
		t.Fatal(err)
	}
	if done == nil {
		t.Skip("no read lease on this filesystem: the input is read, not mapped")
	}
	if string(data) != doc {
		t.Fatalf("mapped %q, want %q", data, doc)
	}
	return path, data, done
}

// While canon holds a mapped input, no process can open it for writing:
// the bytes the parser validated stay the bytes the encoder reads.
func TestCanonMapKeepsWritersOut(t *testing.T) {
	path, _, done := mappedInput(t, `{"b":1,"a":2}`)
	_, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("open for writing while mapped: %v, want EWOULDBLOCK", err)
	}
	if err := done(); err != nil {
		t.Fatalf("done: %v", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open for writing once released: %v", err)
	}
	f.Close()
}

// A file someone has open for writing gets no lease: it is read, with the
// same bytes.
func TestCanonMapFallsBackToRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.json")
	const doc = `{"b":1,"a":2}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data, _, done, err := readCanonInput(nil, path)
	if err != nil || done != nil || string(data) != doc {
		t.Fatalf("readCanonInput = %q, mapped %v, %v; want %q read", data, done != nil, err, doc)
	}
}

// A mapped file that changed all the same (as it can once the kernel
// revokes a lease a writer waited out; here its times change) is reported,
// so the output is known to be unreliable.
func TestCanonMapReportsChange(t *testing.T) {
	path, _, done := mappedInput(t, `{"b":1,"a":2}`)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if err := done(); !errors.Is(err, errInputChanged) {
		t.Fatalf("done after a change: %v, want errInputChanged", err)
	}
}
