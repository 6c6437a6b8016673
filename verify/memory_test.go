package verify_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// attemptsBundle is a signed bundle of n attempts with proxy-like ids
// (attempt ids "a1".."aN", JSON-RPC ids 1..N) and digest-only payloads, so
// verification keeps per-attempt state and reads no blob.
func attemptsBundle(tb testing.TB, n int) fstest.MapFS {
	b := verifytest.New(tb)
	ref := b.Snapshot("snap-1", 2, 2)
	seq := int64(len(b.Lines))
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("a%d", i)
		a := &transcript.Attempt{Seq: seq, AtMs: verifytest.Issued.UnixMilli() - 1000, ExecutionScope: b.Scope, AttemptID: id, Tool: "tool_1",
			RPCID:        transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: fmt.Sprint(i)},
			Protocol:     transcript.AttemptProto{Era: mcpwire.EraLegacy, State: transcript.ProtoNegotiated, Value: "2025-06-18"},
			ServerDigest: b.ServerDigest, Request: transcript.Payload{Digest: canon.SHA256([]byte(id)), Length: 10}, Terminator: mcpwire.TermLF, Snapshot: ref}
		line, err := transcript.Encode(a)
		if err != nil {
			tb.Fatal(err)
		}
		b.Lines = append(b.Lines, line)
		seq++
	}
	return b.FS()
}

// perAttempt verifies fsys and returns the growth of the live heap (after
// a GC) per attempt between the first Progress call (4,096 lines) and the
// last one, where every attempt's state is held: fixed costs (buffers, the
// snapshot, the report) cancel out, growth steps of the tables do not.
func perAttempt(tb testing.TB, fsys fstest.MapFS, n int) float64 {
	var at1, at2, heap1, heap2 int64
	o := trusted(tb)
	o.Progress = func(l int64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if at1 == 0 {
			at1, heap1 = l, int64(ms.HeapAlloc)
		}
		at2, heap2 = l, int64(ms.HeapAlloc)
	}
	rep, _ := verifier(tb, o).Bundle(context.Background(), fsys)
	if rep == nil || rep.Counts.Attempts != int64(n) {
		tb.Fatalf("report %v", rep)
	}
	return float64(heap2-heap1) / float64(at2-at1)
}

// TestAttemptStateMemory holds the verifier to its memory budget: at most
// 64 bytes of live heap per attempt beyond the fixed cost (issue 13; 200,000
// attempts here, BenchmarkAttemptState for a million).
func TestAttemptStateMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds a 200,000-attempt transcript (and the race detector's shadow heap is not the verifier's)")
	}
	const n = 200_000
	if per := perAttempt(t, attemptsBundle(t, n), n); per > 64 {
		t.Errorf("%.1f bytes per attempt, want at most 64", per)
	} else {
		t.Logf("%.1f bytes per attempt", per)
	}
}

// BenchmarkAttemptState reports the live heap per attempt for a million
// attempts.
//
//	go test ./verify -run XXX -bench AttemptState -benchtime 1x
func BenchmarkAttemptState(b *testing.B) {
	const n = 1_000_000
	fsys := attemptsBundle(b, n)
	for b.Loop() {
		per := perAttempt(b, fsys, n)
		b.ReportMetric(per, "B/attempt")
		b.Logf("%d attempts: %.1f bytes of live heap per attempt", n, per)
	}
}
