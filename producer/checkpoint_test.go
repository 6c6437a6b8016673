package producer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// lockedSigner is testSigner safe for the checkpoint goroutine.
type lockedSigner struct {
	mu sync.Mutex
	testSigner
}

func (s *lockedSigner) SignTranscript(ctx context.Context, root string, n int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.testSigner.SignTranscript(ctx, root, n)
}

// manualTicker is an injected checkpoint timer: the test sends the ticks.
type manualTicker struct {
	c       chan time.Time
	period  time.Duration
	stopped chan struct{}
}

func (m *manualTicker) make(d time.Duration) (<-chan time.Time, func()) {
	m.period = d
	return m.c, func() { close(m.stopped) }
}

type ckResult struct {
	cp  *Checkpoint
	err error
}

// prefixRoot is the commitment over the first n lines of the journal on disk.
func prefixRoot(t *testing.T, dir string, n int64) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	var c transcript.Committer
	for _, l := range bytes.SplitAfter(data, []byte("\n"))[:n] {
		c.Add(bytes.TrimSuffix(l, []byte("\n")))
	}
	return c.Root()
}

// TestCheckpointTimer: on each tick of the injected timer a checkpoint
// signs the durable prefix (no sleeps: the test sends the tick); a tick
// with nothing new writes nothing; a failed signature is reported and the
// next tick tries again; Seal stops the timer.
func TestCheckpointTimer(t *testing.T) {
	r, dir := openTest(t, func(o *Options) { o.Durability = transcript.DurabilityNone })
	signer := &lockedSigner{}
	tick := &manualTicker{c: make(chan time.Time), stopped: make(chan struct{})}
	done := make(chan ckResult)
	if err := r.StartCheckpoints(signer, CheckpointPolicy{Every: time.Hour, Ticker: tick.make, Done: func(cp *Checkpoint, err error) { done <- ckResult{cp, err} }}); err != nil {
		t.Fatal(err)
	}
	if tick.period != time.Hour {
		t.Fatalf("ticker period %s", tick.period)
	}
	if err := r.StartCheckpoints(signer, CheckpointPolicy{EveryAttempts: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("a second StartCheckpoints: %v", err)
	}
	h := mustAttempt(t, r, call("1", "echo", `{}`, ""))
	if err := h.Response(result("1", "")); err != nil {
		t.Fatal(err)
	}
	tick.c <- time.Time{}
	res := <-done
	if res.err != nil || res.cp == nil || res.cp.Lines != 3 || res.cp.Attempts != 1 || res.cp.File != "checkpoints/3.json" {
		t.Fatalf("checkpoint %+v, %v", res.cp, res.err)
	}
	if got := prefixRoot(t, dir, 3); res.cp.Root != got || signer.root != got || signer.count != 1 {
		t.Errorf("checkpoint root %s, signed %s (%d calls), the first 3 lines commit to %s", res.cp.Root, signer.root, signer.count, got)
	}
	b, err := os.ReadFile(filepath.Join(dir, res.cp.File))
	if err != nil || !strings.Contains(string(b), res.cp.Root) {
		t.Fatalf("checkpoint file %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, res.cp.File)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, CheckpointDir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("checkpoints/ mode %v, %v", fi.Mode(), err)
	}

	// Nothing new: nothing written.
	tick.c <- time.Time{}
	if res := <-done; res.cp != nil || res.err != nil {
		t.Errorf("a tick with nothing new: %+v, %v", res.cp, res.err)
	}

	// A failed signature is reported; the recording goes on.
	mustAttempt(t, r, call("2", "echo", `{"a":1}`, ""))
	signer.mu.Lock()
	signer.err = errors.New("kms unavailable")
	signer.mu.Unlock()
	tick.c <- time.Time{}
	if res := <-done; res.cp != nil || res.err == nil || !strings.Contains(res.err.Error(), "kms unavailable") {
		t.Errorf("a failed signature: %+v, %v", res.cp, res.err)
	}
	signer.mu.Lock()
	signer.err = nil
	signer.mu.Unlock()
	mustAttempt(t, r, call("3", "echo", `{"a":2}`, ""))
	tick.c <- time.Time{}
	if res := <-done; res.err != nil || res.cp == nil || res.cp.Lines != 5 || res.cp.Attempts != 3 {
		t.Errorf("after the failure: %+v, %v", res.cp, res.err)
	}

	if _, err := r.Seal(context.Background(), signer); err != nil {
		t.Fatal(err)
	}
	<-tick.stopped
	if _, err := r.Checkpoint(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Checkpoint after Seal: %v", err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, CheckpointDir))
	if err != nil || len(ents) != 2 {
		t.Errorf("checkpoints/ holds %v, %v; want 3.json and 5.json", ents, err)
	}
}

// TestCheckpointEveryAttempts: the count trigger fires on the Nth
// committed attempt, and the checkpoint covers it.
func TestCheckpointEveryAttempts(t *testing.T) {
	r, dir := openTest(t, nil)
	signer := &lockedSigner{}
	done := make(chan ckResult, 4)
	if err := r.StartCheckpoints(signer, CheckpointPolicy{EveryAttempts: 2, Done: func(cp *Checkpoint, err error) { done <- ckResult{cp, err} }}); err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, r, call("1", "echo", `{}`, ""))
	select {
	case res := <-done:
		t.Fatalf("a checkpoint after one attempt: %+v", res)
	default:
	}
	mustAttempt(t, r, call("2", "echo", `{"b":1}`, ""))
	res := <-done
	if res.err != nil || res.cp == nil || res.cp.Attempts != 2 {
		t.Fatalf("checkpoint %+v, %v", res.cp, res.err)
	}
	if got := prefixRoot(t, dir, res.cp.Lines); got != res.cp.Root {
		t.Errorf("root %s, the prefix commits to %s", res.cp.Root, got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointPolicyRefused: a policy without a signer or a trigger is
// refused.
func TestCheckpointPolicyRefused(t *testing.T) {
	r, _ := openTest(t, nil)
	defer r.Close()
	for name, p := range map[string]CheckpointPolicy{"no trigger": {}, "negative": {EveryAttempts: -1}} {
		if err := r.StartCheckpoints(&lockedSigner{}, p); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := r.StartCheckpoints(nil, CheckpointPolicy{EveryAttempts: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("no signer: %v", err)
	}
	if _, err := r.Checkpoint(context.Background()); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Checkpoint without StartCheckpoints: %v", err)
	}
}
