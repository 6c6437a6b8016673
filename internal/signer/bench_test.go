//go:build linux

package signer

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSignThroughSigner: one signature through the signer (connect,
// request, parse and check the statement, sign, journal with fsync,
// response, the client's check) against the same key signing the same
// preimage in process, interleaved in one loop; "x-direct" is the ratio.
// The journal is on t.TempDir()'s file system: its fsync dominates.
func BenchmarkSignThroughSigner(b *testing.B) {
	for _, journal := range []bool{false, true} {
		name := "no-journal"
		if journal {
			name = "journal"
		}
		b.Run(name, func(b *testing.B) {
			o := Options{Rate: Rate{N: 1_000_000, Per: time.Second}}
			if journal {
				j, err := OpenJournal(b.TempDir() + "/journal")
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close()
				o.Journal = j
			}
			s := startServer(b, o)
			c, err := Dial(context.Background(), s.path)
			if err != nil {
				b.Fatal(err)
			}
			pre := preimage(b, c, 1)
			key := s.o.Signer
			var ours, direct time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := c.SignRecordBytes(pre); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := key.SignRecordBytes(pre); err != nil {
					b.Fatal(err)
				}
				direct += time.Since(t1)
				ours += t1.Sub(t0)
			}
			n := float64(b.N)
			b.ReportMetric(float64(ours.Nanoseconds())/n, "ns/op-signer")
			b.ReportMetric(float64(direct.Nanoseconds())/n, "ns/op-direct")
			b.ReportMetric(float64(ours)/float64(direct), "x-direct")
		})
	}
}
