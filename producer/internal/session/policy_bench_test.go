package session

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/policytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkPolicyHop: the session's CPU for one tools/call round trip
// (BenchmarkHopCPU's frames and recording, durability none) with a 20-rule
// policy, against the same session without a policy, call by call in the
// same run. Reports both, what the policy adds per call and the ratio;
// scoped and any-tool policies (benchPolicy20). The end-to-end figure, with
// processes and pipes: producer/stdio BenchmarkPolicyRoundTrip.
func BenchmarkPolicyHop(b *testing.B) {
	for _, scoped := range []bool{true, false} {
		name := "any-tool-10-conditions"
		if scoped {
			name = "scoped"
		}
		b.Run(name, func(b *testing.B) {
			open := func(policy []byte) *session {
				rec, err := producer.Open(b.TempDir()+"/bench.trace", producer.Options{
					Clock: time.Now, Entropy: rand.Reader, Durability: transcript.DurabilityNone,
					Producer: transcript.Producer{Name: "tracectl-bench", Version: "test"},
					Server:   transcript.Server{Transport: transcript.TransportStdio, Executable: "sdkserver"}, FramesCommitted: true,
					PolicyFile: policy,
				})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					if err := rec.Close(); err != nil {
						b.Error(err)
					}
				})
				sink := NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }, snapshot.Limits{})
				return newSession(Config{Sink: sink, Capture: CaptureNever}.withDefaults(), Streams{ClientOut: discard{}, ServerIn: discard{}})
			}
			plain, decided := open(nil), open(policytest.Bench20(scoped))
			const block = 500
			reqs, resps := make([][]byte, block), make([][]byte, block)
			dreqs, dresps := make([][]byte, block), make([][]byte, block)
			var id int64
			var plainNs, policyNs time.Duration
			hop := func(s *session, req, resp []byte, index int64) time.Duration {
				t0 := time.Now()
				if err := s.fromClient(frame{data: req}, index); err != nil {
					b.Fatal(err)
				}
				if err := s.fromServer(resp, index); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			b.ResetTimer()
			for done := 0; done < b.N; done += block {
				b.StopTimer()
				n := min(block, b.N-done)
				first := id
				for i := range n {
					id++
					reqs[i], resps[i] = benchRequest(id), benchResponse(id)
					dreqs[i], dresps[i] = bytes.Clone(reqs[i]), bytes.Clone(resps[i])
				}
				b.StartTimer()
				for i := range n {
					// Alternately first: neither always runs on the other's heels.
					if i%2 == 0 {
						plainNs += hop(plain, reqs[i], resps[i], first+int64(i))
						policyNs += hop(decided, dreqs[i], dresps[i], first+int64(i))
					} else {
						policyNs += hop(decided, dreqs[i], dresps[i], first+int64(i))
						plainNs += hop(plain, reqs[i], resps[i], first+int64(i))
					}
				}
			}
			b.StopTimer()
			for _, s := range []*session{plain, decided} {
				if err := s.sinkError(); err != nil {
					b.Fatal(err)
				}
			}
			per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e3 }
			b.ReportMetric(per(plainNs), "nopolicy-µs/call")
			b.ReportMetric(per(policyNs), "policy-µs/call")
			b.ReportMetric(per(policyNs-plainNs), "added-µs/call")
			b.ReportMetric(float64(policyNs)/float64(plainNs), "policy-x-nopolicy")
		})
	}
}
