package producer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/transcript"
)

// In the modes that do not fsync each call, the recorder starts writeback
// every writebackEvery bytes it appends, off the recording path; strict
// fsyncs instead and has none. Seal and Close stop it before the files
// close, and the sealed bundle is whole.
func TestWriteback(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	for _, mode := range []string{transcript.DurabilityNone, transcript.DurabilityBatch, transcript.DurabilityStrict} {
		t.Run(mode, func(t *testing.T) {
			r, _ := openTest(t, func(o *Options) { o.Durability = mode; o.Retention = transcript.RetainFull })
			if (r.wb == nil) != (mode == transcript.DurabilityStrict) {
				t.Fatalf("writeback %v in %s", r.wb != nil, mode)
			}
			ctx := context.Background()
			n := 2*writebackEvery/len(big) + 1 // past two thresholds, payloads alone
			for i := range n {
				id := fmt.Sprint(i + 1)
				h, err := r.Attempt(ctx, Call{Line: call(id, "put", `{"blob":"`+big+`"}`, "")})
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Response(result(id, "")); err != nil {
					t.Fatal(err)
				}
			}
			wb := r.wb
			s, err := r.Seal(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Seal.Attempts != int64(n) || s.Seal.Responses != int64(n) {
				t.Fatalf("sealed %+v, want %d attempts answered", s.Seal, n)
			}
			if wb == nil {
				return
			}
			select {
			case <-wb.done:
			default:
				t.Fatal("Seal left the writeback goroutine running")
			}
			// Each threshold asks for a start (the second may find the
			// first still pending); stop runs a pending one before it returns.
			if got := wb.starts.Load(); got < 1 {
				t.Fatalf("%d writeback starts after %d MiB appended", got, n*len(big)>>20)
			}
			wb.note(2 * writebackEvery) // after stop: must neither block nor panic
		})
	}
}

// note never blocks the recording path, however many thresholds pass
// before the goroutine runs, and stop is idempotent.
func TestWritebackNoteNeverBlocks(t *testing.T) {
	w := &writeback{kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	for range 100 {
		w.note(writebackEvery) // nobody receives: a blocking send would hang here
	}
	if len(w.kick) != 1 {
		t.Fatalf("%d starts pending, want 1", len(w.kick))
	}
	close(w.done)
	w.stop()
	w.stop()
	var nilW *writeback
	nilW.note(writebackEvery)
	nilW.stop()
}

// The seal's own lines (resolutions of the calls in flight, the seal line)
// may carry the count past a threshold after Seal stopped the goroutine:
// the seal completes (a send on a closed channel used to panic here).
func TestWritebackThresholdAtSeal(t *testing.T) {
	r, _ := openTest(t, func(o *Options) { o.Durability = transcript.DurabilityNone; o.Retention = transcript.RetainFull })
	for i := range 20 {
		if _, err := r.Attempt(context.Background(), Call{Line: call(fmt.Sprint(i+1), "slow", `{}`, "")}); err != nil {
			t.Fatal(err)
		}
	}
	r.wb.pending.Store(writebackEvery - 1)
	s, err := r.Seal(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seal.Attempts != 20 || s.Seal.Unknown != 20 {
		t.Fatalf("sealed %+v, want 20 attempts resolved unknown", s.Seal)
	}
}
