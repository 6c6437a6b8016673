//go:build !windows

package submit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/tlog"
)

// realLog runs a Tessera log (internal/tlog) on loopback behind a fault
// injector: the first fail additions are answered 503.
func realLog(t *testing.T, fail int32) (*Client, *atomic.Int32) {
	t.Helper()
	ctx := context.Background()
	l, err := tlog.Open(ctx, tlog.Config{Dir: t.TempDir(), Origin: "test.tracectl/submit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(ctx) })
	var adds atomic.Int32
	h := l.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/add" && adds.Add(1) <= fail {
			http.Error(w, "fault", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	k, err := anchor.ParseKeys(l.Verifier, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &Client{URL: srv.URL, Keys: k}, &adds
}

func statement(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestQueueRetriesAndOrders: additions that fail are retried (the backoff
// is injected: a channel the test fires), receipts are numbered in log
// order, each is checked, and successive ones carry consistency proofs.
func TestQueueRetriesAndOrders(t *testing.T) {
	c, adds := realLog(t, 2)
	dir := t.TempDir()
	statement(t, dir, "checkpoints/1.json", `{"n":1}`)
	statement(t, dir, "checkpoints/5.json", `{"n":5,"s":"é"}`)
	fire := make(chan time.Time)
	waits := make(chan int, 8)
	reports := make(chan error, 8)
	q := NewQueue(c, dir, QueueOptions{Retries: 3,
		Backoff: func(n int) <-chan time.Time { waits <- n; return fire },
		Report:  func(_ string, _ *anchor.Receipt, err error) { reports <- err }})
	if err := q.Submit("checkpoints/1.json"); err != nil {
		t.Fatal(err)
	}
	for want := range 2 {
		if n := <-waits; n != want {
			t.Fatalf("backoff %d, want %d", n, want)
		}
		fire <- time.Time{}
	}
	if err := <-reports; err != nil {
		t.Fatal(err)
	}
	if err := q.Submit("checkpoints/5.json"); err != nil {
		t.Fatal(err)
	}
	r, err := q.AnchorNow(t.Context(), anchor.RecordFile, []byte(`{"record":true}`))
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	if got := adds.Load(); got != 5 {
		t.Errorf("%d additions, want 5 (2 refused, 3 statements)", got)
	}
	if r.LeafIndex != 2 {
		t.Errorf("record receipt %+v", r)
	}
	var prev *anchor.Checked
	for i, want := range []string{"checkpoints/1.json", "checkpoints/5.json", anchor.RecordFile} {
		b, err := os.ReadFile(filepath.Join(dir, "anchors", []string{"1", "2", "3"}[i]+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(filepath.Join(dir, "anchors", "1.json")); fi.Mode().Perm() != 0o600 {
			t.Errorf("receipt mode %v", fi.Mode())
		}
		rc, err := anchor.ParseReceipt(b)
		if err != nil || rc.Statement != want || rc.LeafIndex != uint64(i) {
			t.Fatalf("receipt %d: %+v %v", i+1, rc, err)
		}
		st := []byte(`{"record":true}`)
		if want != anchor.RecordFile {
			st, _ = os.ReadFile(filepath.Join(dir, want))
		}
		ck, err := rc.Check(st, c.Keys)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			if err := anchor.CheckConsistency(prev, ck, rc.Consistency); err != nil {
				t.Fatal(err)
			}
		}
		prev = ck
	}
}

// TestQueueGivesUp: a log that keeps failing leaves the statement
// unanchored and reported after 1+Retries tries; nothing is written.
func TestQueueGivesUp(t *testing.T) {
	c, adds := realLog(t, 1000)
	dir := t.TempDir()
	statement(t, dir, "checkpoints/1.json", `{"n":1}`)
	fire := make(chan time.Time, 8)
	for range 8 {
		fire <- time.Time{}
	}
	reports := make(chan error, 1)
	q := NewQueue(c, dir, QueueOptions{Retries: 2, Backoff: func(int) <-chan time.Time { return fire },
		Report: func(_ string, _ *anchor.Receipt, err error) { reports <- err }})
	if err := q.Submit("checkpoints/1.json"); err != nil {
		t.Fatal(err)
	}
	if err := <-reports; err == nil {
		t.Fatal("a failing log was reported as anchored")
	}
	q.Close()
	if got := adds.Load(); got != 3 {
		t.Errorf("%d tries, want 3", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "anchors")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("anchors/ written for an unanchored statement: %v", err)
	}
}

// TestQueueFullRefuses: Submit never blocks; past MaxPending waiting (and
// one batch in flight) it refuses.
func TestQueueFullRefuses(t *testing.T) {
	c, _ := realLog(t, 1000)
	block := make(chan time.Time)
	dir := t.TempDir()
	// A statement the failing log keeps in backoff: the worker holds a
	// batch, the queue MaxPending, the next is refused.
	statement(t, dir, "checkpoints/1.json", `{"n":1}`)
	q := NewQueue(c, dir, QueueOptions{Retries: 1, Backoff: func(int) <-chan time.Time { return block }})
	var full error
	for range MaxPending + maxBatch + 2 {
		if err := q.Submit("checkpoints/1.json"); err != nil {
			full = err
		}
	}
	if !errors.Is(full, ErrQueueFull) {
		t.Fatalf("no refusal past %d pending: %v", MaxPending, full)
	}
	close(block)
	q.Close()
}
