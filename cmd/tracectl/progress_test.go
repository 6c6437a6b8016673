package main

import (
	"bytes"
	"os"
	"testing"
)

// Progress goes to a terminal only: a pipe or buffer never gets it.
func TestProgressSilentWhenNotTerminal(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	p.show("verifying: %d", 1)
	p.done()
	if b.Len() != 0 {
		t.Fatalf("progress wrote %q to a non-terminal", b.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p = newProgress(f)
	p.show("verifying: %d", 1)
	p.done()
	if fi, _ := f.Stat(); fi.Size() != 0 {
		t.Fatalf("progress wrote %d bytes to a regular file", fi.Size())
	}
}

// On a terminal the line is drawn, rate-limited, and cleared at the end.
func TestProgressOnTerminalRedrawsAndClears(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, tty: true} // as newProgress sets it for a terminal
	p.show("verifying: %d transcript lines", 4096)
	p.show("verifying: %d transcript lines", 8192) // within 100 ms: skipped
	p.done()
	if got, want := b.String(), "\r\x1b[Ktracectl: verifying: 4096 transcript lines\r\x1b[K"; got != want {
		t.Fatalf("terminal output %q, want %q", got, want)
	}
}
