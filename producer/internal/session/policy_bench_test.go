package session

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// benchPolicy20 returns a 20-rule policy that denies none of the bench's
// echo calls. scoped: every rule names a tool (16 others, 4 echo with a
// condition), as policies usually are; otherwise ten rules apply to any
// tool, so ten CEL conditions are evaluated on every call (the worst case
// short of comprehensions), and ten name other tools.
func benchPolicy20(scoped bool) []byte {
	var b strings.Builder
	b.WriteString("version: 1\ndefault: allow\nrules:\n")
	conds := []string{
		`args.text == "forbidden"`, `size(args.text) > 4096`, `args.text.startsWith("rm -rf")`,
		`has(args.path) && args.path.startsWith("/etc")`, `tool == "shell" && size(args) > 0`,
		`has(args.amount) && args.amount > 100`, `args.text.contains("BEGIN PRIVATE KEY")`,
		`has(declaration.annotations) && declaration.annotations.destructiveHint == true`,
		`has(server.name) && server.name == "evil"`, `size(args) > 64`,
	}
	n := len(conds)
	if scoped {
		n = 4
	}
	for i, c := range conds[:n] {
		tool := ""
		if scoped {
			tool = "    tool: echo\n"
		}
		fmt.Fprintf(&b, "  - id: cond-%d\n%s    when: '%s'\n    action: deny\n", i, tool, c)
	}
	for i := range 20 - n {
		fmt.Fprintf(&b, "  - id: other-%d\n    tool: \"other_%d*\"\n    when: 'args.x == 1'\n    action: deny\n", i, i)
	}
	return []byte(b.String())
}

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
			plain, decided := open(nil), open(benchPolicy20(scoped))
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
