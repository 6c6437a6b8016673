package session

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestOutQueueBackpressure: with the forwarder held in a durable wait, the
// queue takes maxQueued frames and no more: the next put waits until the
// forwarder moves (memory stays bounded). Released, everything reaches the
// server in the order it was put. The frames are copies: the caller's
// buffer may be reused at once.
func TestOutQueueBackpressure(t *testing.T) {
	pr, pw := io.Pipe()
	s := &session{serverIn: pw}
	q := newOutQueue(s, true)
	hold := make(chan struct{})
	buf := []byte("frame 0000\n")
	put := func(i int, wait func() error) {
		copy(buf, fmt.Sprintf("frame %04d\n", i))
		if err := q.toServer(buf, wait, func(error) {}); err != nil {
			t.Error(err)
		}
	}
	put(0, func() error { <-hold; return nil })
	for i := 1; i <= maxQueued; i++ { // the forwarder holds frame 0; these fill the queue
		put(i, nil)
	}
	done := make(chan struct{})
	go func() {
		put(maxQueued+1, nil)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("put returned with the queue full")
	case <-time.After(100 * time.Millisecond): // it waits, as it must (a false pass at worst, never a false failure)
	}
	close(hold)
	got := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		got <- lines
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("put still blocked after the forwarder moved on")
	}
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	lines := <-got
	if len(lines) != maxQueued+2 {
		t.Fatalf("the server got %d frames, want %d", len(lines), maxQueued+2)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("frame %04d", i); l != want {
			t.Fatalf("frame %d is %q, want %q", i, l, want)
		}
	}
}

// TestOutQueueOversizedFrameAlone: a frame over maxQueuedBytes still goes
// through an empty queue (alone), so the byte bound never deadlocks.
func TestOutQueueOversizedFrameAlone(t *testing.T) {
	var out bytes.Buffer
	pr, pw := io.Pipe()
	copied := make(chan error, 1)
	go func() { _, err := io.Copy(&out, pr); copied <- err }()
	q := newOutQueue(&session{serverIn: pw}, true)
	big := bytes.Repeat([]byte("x"), maxQueuedBytes+1)
	done := make(chan error, 1)
	go func() {
		err := q.toServer(big, nil, nil)
		if err == nil {
			err = q.toServer(big, nil, nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an oversized frame never got through the queue")
	}
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-copied; err != nil || out.Len() != 2*len(big) {
		t.Fatalf("the server got %d bytes (%v), want %d", out.Len(), err, 2*len(big))
	}
}
