//go:build !windows

package main

import (
	"context"
	"crypto/rand"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/internal/tlog"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestSealStopsWaiting: a seal that stops waiting for the record's receipt
// (here at once) writes record.json without transparency and goes on; the
// receipt that arrives later names record.json's own bytes, and verify
// --log-key accepts it as anchored (record.json is the anchored record).
func TestSealStopsWaiting(t *testing.T) {
	ctx := context.Background()
	l, err := tlog.Open(ctx, tlog.Config{Dir: t.TempDir(), Origin: "test.tracectl/seal"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	hs := httptest.NewServer(l.Handler())
	defer hs.Close()
	keys, err := anchor.ParseKeys(l.Verifier, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run.trace")
	rec, err := producer.Open(dir, producer.Options{
		Clock: time.Now, Entropy: rand.Reader, Durability: transcript.DurabilityStrict,
		Producer: transcript.Producer{Name: "test", Version: "v0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess},
	})
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sa, err := startAnchoring(ctx, rec, anchorOptions{url: hs.URL, sealTimeout: time.Nanosecond}, &submit.Client{URL: hs.URL, Keys: keys}, signer, recordIdentity{}, checkpointEvery{}, &syncWriter{w: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Seal(ctx, sa); err != nil {
		t.Fatal(err)
	}
	sa.close() // the queue finishes: the record's receipt is written
	final, err := os.ReadFile(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	anchored, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(anchor.RecordFile)))
	if err != nil || string(final) != string(anchored) {
		t.Fatalf("record.json is not the anchored record: %v", err)
	}
	if !strings.Contains(stderr.String(), "anchor failed: record: no log entry within") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	v, err := verify.New(verify.Options{TrustedKey: signer.Public(), At: time.Now(), LogKey: l.Verifier})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Bundle(ctx, os.DirFS(dir))
	if err != nil {
		t.Fatalf("%v\n%+v", err, rep)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Code == "anchor_included" && f.Subject == anchor.RecordFile && strings.Contains(f.Detail, "record.json is the anchored record itself") {
			found = true
		}
	}
	if !found {
		t.Errorf("no anchor_included for the record: %+v", rep.Findings)
	}
}

// syncWriter serializes writes from the queue's goroutine and the test.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
