//go:build linux

package signer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
)

// TestJournalRechainNeedsHead: the chain is an unkeyed SHA-256, so whoever
// can write the journal may drop a signature (here line 2 of 5) and
// recompute the rest, and CheckJournal passes it (found by review: the
// spec claimed removing a line is always evident). What shows it is the
// head kept elsewhere: the rewritten journal does not end in the honest
// one's (spec/signer.md, Journal).
func TestJournalRechainNeedsHead(t *testing.T) {
	dir := t.TempDir()
	honest, err := OpenJournal(filepath.Join(dir, "honest"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := OpenJournal(filepath.Join(dir, "forged"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e := Entry{Time: time.Unix(int64(i), 0).UTC().Format(time.RFC3339Nano), UID: 1001, PID: 42, Kind: KindCheckpoint,
			SHA256: canon.SHA256([]byte{byte(i)})[len("sha256:"):], Key: strings.Repeat("K", 43)}
		if err := honest.Append(e); err != nil {
			t.Fatal(err)
		}
		if i != 1 { // the signature the attacker hides
			if err := forged.Append(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	head := honest.State()
	honest.Close()
	forged.Close()
	data, _ := os.ReadFile(filepath.Join(dir, "forged"))
	st, err := CheckJournal(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("a re-chained journal: %v (the chain is unkeyed: it passes, and the spec says so)", err)
	}
	if st == head {
		t.Fatalf("the re-chained journal ends in the honest head %+v: nothing would show the dropped line", head)
	}
}

// TestJournalLineIsItsEncoding: CheckJournal "requires the members above
// (no others)", yet encoding/json takes a member twice (the last wins) and
// matches names case-insensitively, so a line can carry two sha256 (or a
// "SHA256" and a "sha256") that a first-wins reader of the journal reads
// differently from CheckJournal. The key member is never checked at all.
func TestJournalLineIsItsEncoding(t *testing.T) {
	a := strings.Repeat("a", 64)
	b := strings.Repeat("b", 64)
	lines := map[string]string{
		"duplicate sha256": `{"seq":1,"time":"2026-12-06T15:30:00Z","peer_uid":1,"peer_pid":2,"kind":"record","sha256":"` + a + `","key":"k","prev":"` + zeroHash + `","sha256":"` + b + `"}`,
		"case variant":     `{"SEQ":1,"Time":"2026-12-06T15:30:00Z","PEER_UID":1,"peer_pid":2,"kind":"record","SHA256":"` + a + `","key":"k","prev":"` + zeroHash + `"}`,
		"empty key":        `{"seq":1,"time":"2026-12-06T15:30:00Z","peer_uid":1,"peer_pid":2,"kind":"record","sha256":"` + a + `","key":"","prev":"` + zeroHash + `"}`,
	}
	for name, l := range lines {
		t.Run(name, func(t *testing.T) {
			if _, err := CheckJournal(strings.NewReader(l + "\n")); err == nil {
				t.Errorf("CheckJournal accepts %s", l)
			}
		})
	}
}

// TestListenRefusesGroupWritableDir: Listen refuses only a world-writable
// directory. In the directory spec/signer.md recommends (setgid, 2770, no
// sticky bit) any member of the group, including a uid the server refuses,
// may unlink the server's socket and bind its own; Dial then takes whatever
// key the impostor presents (nothing pins it), and the recorder signs its
// session under the impostor's key and sends it every statement.
func TestListenRefusesGroupWritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o2770)
	p := filepath.Join(dir, "s.sock")
	l, err := Listen(p)
	if err == nil {
		defer l.Close()
		// The group member's move: replace the socket.
		os.Remove(p)
		imp, _ := NewServer(Options{Signer: testKey(t, 9), Clock: time.Now, Rate: Rate{N: 10, Per: time.Second}, OwnUID: uint32(os.Getuid())})
		il, ierr := Listen(p)
		if ierr != nil {
			t.Fatal(ierr)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { imp.Serve(ctx, il); close(done) }()
		defer func() { cancel(); <-done }()
		c, derr := Dial(context.Background(), p)
		if derr == nil {
			t.Errorf("Listen accepted a group-writable directory without the sticky bit (%s); a group member replaced the socket and Dial accepted the impostor's key %T", dir, c.Public())
		}
		return
	}
	if !errors.Is(err, ErrUnsafeDirectory) {
		t.Fatalf("Listen: %v", err)
	}
}

// TestRatePerPeer: the token bucket is one for the whole
// server, not one per peer, and nothing retries a rate_limited refusal: a
// compromised recorder of one allowed uid that spends the bucket (here 3/s)
// makes every other recorder's seal fail (wrap exits 125), whenever it
// wants, for as long as it keeps asking.
func TestRatePerPeer(t *testing.T) {
	var uid atomic.Uint32
	uid.Store(5001)
	peer := func(net.Conn) (Peer, error) { return Peer{UID: uid.Load(), PID: 1}, nil }
	s := startServer(t, Options{PeerOf: peer, AllowUIDs: []uint32{5001, 5002}, Rate: Rate{N: 3, Per: time.Second}})
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	pre := preimage(t, c, 1)
	for range 3 { // the hostile recorder (uid 5001)
		if _, err := c.SignRecordBytes(pre); err != nil {
			t.Fatal(err)
		}
	}
	uid.Store(5002) // an honest recorder seals its session
	if _, err := c.SignRecordBytes(preimage(t, c, 7)); err != nil {
		t.Fatalf("uid 5002's seal refused because uid 5001 spent the shared bucket: %v", err)
	}
}
