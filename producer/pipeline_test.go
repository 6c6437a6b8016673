package producer

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// attemptLines counts the attempt lines in the bundle's journal file (what
// a crash of the process would leave: the file, page cache included).
func attemptLines(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		if ev, err := transcript.DecodeLine(l); err == nil {
			if _, ok := ev.(*transcript.Attempt); ok {
				n++
			}
		}
	}
	return n
}

// TestAttemptWrittenSharesOneFsync: attempts recorded with AttemptWritten
// are in the file at once, none fsynced; the first wait fsyncs them all
// (one journal fsync, one pack fsync), the others find theirs durable. The
// same for their responses.
func TestAttemptWrittenSharesOneFsync(t *testing.T) {
	r, dir := openTest(t, nil)
	const n = 16
	before := r.Stats()
	var hs []*Handle
	var waits []func() error
	for i := range n {
		h, wait, err := r.AttemptWritten(context.Background(), Call{Line: call(strconv.Itoa(i), "t", `{"i":`+strconv.Itoa(i)+`}`, "")})
		if err != nil {
			t.Fatal(err)
		}
		hs, waits = append(hs, h), append(waits, wait)
	}
	if got := attemptLines(t, dir); got != n {
		t.Fatalf("%d attempt lines in the file before any wait, want %d: AttemptWritten must write the line", got, n)
	}
	if s := r.Stats(); s.Fsyncs != before.Fsyncs || s.PackFsyncs != before.PackFsyncs {
		t.Fatalf("stats %+v after AttemptWritten, %+v before: nothing may be fsynced before a wait", s, before)
	}
	for i, w := range waits {
		if err := w(); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	mid := r.Stats()
	if d, p := mid.Fsyncs-before.Fsyncs, mid.PackFsyncs-before.PackFsyncs; d != 1 || p != 1 {
		t.Fatalf("%d journal and %d pack fsyncs for %d waits, want 1 and 1 (one group commit)", d, p, n)
	}
	waits = waits[:0]
	for i, h := range hs {
		w, err := h.ResponseFrameWritten(Framed{Line: result(strconv.Itoa(i), ""), Index: -1})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	for i := len(waits) - 1; i >= 0; i-- { // any order: the first to wait leads
		if err := waits[i](); err != nil {
			t.Fatalf("response wait %d: %v", i, err)
		}
	}
	if d := r.Stats().Fsyncs - mid.Fsyncs; d != 1 {
		t.Fatalf("%d journal fsyncs for %d response waits, want 1", d, n)
	}
	mustSeal(t, r)
	b := readBundle(t, dir)
	for _, h := range hs {
		if st := b.status(h.ID()); st != transcript.ObsResponse {
			t.Errorf("attempt %s: %q, want response", h.ID(), st)
		}
	}
}

// gateFS holds the journal's next fsync once armed: entered is told when it
// begins, and it returns what release sends (nil: the real fsync).
type gateFS struct {
	osFS
	armed   atomic.Bool
	entered chan struct{}
	release chan error
}

func newGateFS() *gateFS {
	return &gateFS{entered: make(chan struct{}, 1), release: make(chan error, 1)}
}

func (g *gateFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := g.osFS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != transcript.TranscriptFile {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

type gateFile struct {
	File
	g *gateFS
}

func (f *gateFile) Sync() error {
	if f.g.armed.CompareAndSwap(true, false) {
		f.g.entered <- struct{}{}
		if err := <-f.g.release; err != nil {
			return err
		}
	}
	return f.File.Sync()
}

// TestWriteNotBlockedByFsync: while a wait's fsync is under way, the next
// attempt is written (AttemptWritten returns, its line in the file): the
// reader of the next frame never waits for the previous frame's fsync. That
// attempt, written after the fsync began, is not made durable by it: its
// own wait takes a second fsync.
func TestWriteNotBlockedByFsync(t *testing.T) {
	g := newGateFS()
	r, dir := openTest(t, func(o *Options) { o.FS = g })
	_, wait1, err := r.AttemptWritten(context.Background(), Call{Line: call("1", "t", "", "")})
	if err != nil {
		t.Fatal(err)
	}
	before := r.Stats().Fsyncs
	g.armed.Store(true)
	done1 := make(chan error, 1)
	go func() { done1 <- wait1() }()
	<-g.entered // the fsync for call 1 is under way, and held

	written := make(chan error, 1)
	var wait2 func() error
	go func() {
		var err error
		_, wait2, err = r.AttemptWritten(context.Background(), Call{Line: call("2", "t", "", "")})
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		g.release <- nil
		t.Fatal("AttemptWritten waited for an fsync under way")
	}
	if got := attemptLines(t, dir); got != 2 {
		t.Fatalf("%d attempt lines in the file during the fsync, want 2", got)
	}
	g.release <- nil
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if err := wait2(); err != nil {
		t.Fatal(err)
	}
	if d := r.Stats().Fsyncs - before; d != 2 {
		t.Errorf("%d fsyncs, want 2: the line written during the first fsync needs its own", d)
	}
	mustSeal(t, r)
}

// TestWaitFsyncFailure: the fsync that would make pipelined attempts
// durable fails. Every wait reports ErrAuditUnavailable with the cause (so
// none of them may be dispatched), the journal fails closed from then on,
// and the bundle recovers (the written attempts resolved unknown) and
// seals.
func TestWaitFsyncFailure(t *testing.T) {
	g := newGateFS()
	r, dir := openTest(t, func(o *Options) { o.FS = g })
	var waits []func() error
	for i := range 3 {
		_, w, err := r.AttemptWritten(context.Background(), Call{Line: call(strconv.Itoa(i), "t", "", "")})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	g.armed.Store(true)
	g.release <- syscall.EIO
	for i, w := range waits {
		if err := w(); !errors.Is(err, ErrAuditUnavailable) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("wait %d = %v, want ErrAuditUnavailable wrapping EIO", i, err)
		}
	}
	if _, _, err := r.AttemptWritten(context.Background(), Call{Line: call("9", "t", "", "")}); !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("AttemptWritten after a failed fsync = %v, want ErrAuditUnavailable", err)
	}
	r.Close()
	rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
	if err != nil {
		t.Fatal(err)
	}
	if rep := rr.Recovery(); len(rep.Resolved) != 3 {
		t.Errorf("recovery resolved %v, want the 3 written attempts", rep.Resolved)
	}
	mustSeal(t, rr)
	readBundle(t, dir)
}

// TestWaitNotStrict: in batch and none the wait has nothing to do (the line
// is written, which is what those modes promise): no fsync.
func TestWaitNotStrict(t *testing.T) {
	for _, mode := range []string{transcript.DurabilityNone, transcript.DurabilityBatch} {
		t.Run(mode, func(t *testing.T) {
			r, _ := openTest(t, func(o *Options) { o.Durability, o.BatchInterval = mode, time.Hour })
			if r.Durability() != mode {
				t.Fatalf("Durability() = %q", r.Durability())
			}
			before := r.Stats().Fsyncs
			h, wait, err := r.AttemptWritten(context.Background(), Call{Line: call("1", "t", "", "")})
			if err != nil {
				t.Fatal(err)
			}
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			w, err := h.ResponseFrameWritten(Framed{Line: result("1", ""), Index: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := w(); err != nil {
				t.Fatal(err)
			}
			if d := r.Stats().Fsyncs - before; d != 0 {
				t.Errorf("%d fsyncs in %s, want 0", d, mode)
			}
			mustSeal(t, r)
		})
	}
}

// TestGatherSharesFsync: once the last group commit served more than one
// waiter (calls are concurrent), the next sync leader waits the gather
// delay before it fsyncs, and a line written meanwhile is made durable by
// the same fsync; a lone caller (the last group served one) never waits.
func TestGatherSharesFsync(t *testing.T) {
	r, _ := openTest(t, nil)
	var slept []time.Duration
	var late func() error
	r.j.sleep = func(d time.Duration) {
		slept = append(slept, d)
		// Another call's attempt arrives while the leader gathers.
		_, w, err := r.AttemptWritten(context.Background(), Call{Line: call("99", "t", `{}`, "")})
		if err != nil {
			t.Error(err)
		}
		late = w
	}
	_, w1, err := r.AttemptWritten(context.Background(), Call{Line: call("1", "t", `{}`, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := w1(); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 0 {
		t.Fatalf("a lone caller gathered (%v): it must fsync at once", slept)
	}
	r.j.mu.Lock()
	r.j.lastGroup = 2 // as after a group commit that served two concurrent calls
	r.j.mu.Unlock()
	_, w2, err := r.AttemptWritten(context.Background(), Call{Line: call("2", "t", `{}`, "")})
	if err != nil {
		t.Fatal(err)
	}
	before := r.Stats()
	if err := w2(); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 1 || slept[0] != gatherDelay {
		t.Fatalf("slept %v, want one gather of %v", slept, gatherDelay)
	}
	if err := late(); err != nil {
		t.Fatal(err)
	}
	if d := r.Stats().Fsyncs - before.Fsyncs; d != 1 {
		t.Fatalf("%d journal fsyncs for the waiting call and the one written while it gathered, want 1", d)
	}
}
