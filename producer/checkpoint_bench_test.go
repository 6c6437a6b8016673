package producer

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkCheckpoint measures what signed checkpoints cost a recording:
// one op = one call (attempt and response, strict durability, one caller)
// on a recorder with checkpoints every `every` attempts, against the anchor
// in the same run: the same calls on a recorder without checkpoints.
// Recorders alternate in phases of `every` calls so both see the same load;
// each phase opens, records and closes (Close waits for a checkpoint in
// progress, so the checkpoint's own work is inside ours). The signer is
// testSigner: the cost measured is the fsync, the read-back and the write
// of the checkpoint, not a signature. x-anchor = our time / anchor time.
func BenchmarkCheckpoint(b *testing.B) {
	for _, every := range []int{10, 100} {
		b.Run(fmt.Sprintf("strict-every-%d", every), func(b *testing.B) {
			tmp := b.TempDir()
			ctx := context.Background()
			runs := 0
			phase := func(checkpoints bool, n int) time.Duration {
				runs++
				r, err := Open(filepath.Join(tmp, fmt.Sprintf("run-%d.trace", runs)), Options{
					Clock: time.Now, Entropy: zeros{}, Durability: transcript.DurabilityStrict,
					Producer: transcript.Producer{Name: "bench", Version: "v0"},
					Server:   transcript.Server{Transport: transcript.TransportInProcess},
				})
				if err != nil {
					b.Fatal(err)
				}
				if checkpoints {
					if err := r.StartCheckpoints(&lockedSigner{}, CheckpointPolicy{EveryAttempts: int64(every)}); err != nil {
						b.Fatal(err)
					}
				}
				reqs, resps := make([][]byte, n), make([][]byte, n)
				for i := range reqs {
					id := fmt.Sprint(i + 1)
					reqs[i] = call(id, "search", `{"query":"mcp transcript `+id+`","limit":10}`, "")
					resps[i] = result(id, `,"structuredContent":{"hits":3,"id":"`+id+`"}`)
				}
				t0 := time.Now()
				for i := range n {
					h, err := r.Attempt(ctx, Call{Line: reqs[i]})
					if err != nil {
						b.Fatal(err)
					}
					if err := h.Response(resps[i]); err != nil {
						b.Fatal(err)
					}
				}
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			var ours, anchor time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(every, b.N-done)
				ours += phase(true, n)
				b.StopTimer()
				anchor += phase(false, n)
				b.StartTimer()
				done += n
			}
			b.ReportMetric(float64(ours)/float64(anchor), "x-anchor")
		})
	}
}
