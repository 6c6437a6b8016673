package stdio

import (
	"slices"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/policytest"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkPolicyRoundTrip: wrap's round trip (durability none, one call
// in flight) with a 20-rule policy against the same without a policy, in
// the same run. Three proxies run side by side, each with its own server
// process: no policy (the anchor), no policy again (a control: what two
// identical paths differ by on this machine) and the policy. Calls go to
// them in turn, one at a time, the order rotating each round, so drift
// in the machine's load falls on all three alike.
//
// A path's own placement (which core its server wakes on, what shares a
// cache with it) biases it for as long as it lives, by as much as the
// difference measured. So the run is cut into epochs of epochCalls rounds,
// each with four fresh proxies and servers: an epoch gives the median of
// its per-round differences, policy − anchor (added), empty − anchor and
// control − anchor (control), and the run reports the medians of those
// over its epochs (added-µs, empty-µs, and control-µs, the noise floor of
// the others), the anchor's and the policy's p50 over the whole run and
// their ratio. (The decision itself, without
// the round trip: internal/policy BenchmarkDecide and BenchmarkDecideCold;
// the session's CPU: session BenchmarkPolicyHop.)
func BenchmarkPolicyRoundTrip(b *testing.B) {
	srv := mcptest.Build(b, "sdkserver")
	for _, scoped := range []bool{true, false} {
		name := "any-tool-10-conditions"
		if scoped {
			name = "scoped"
		}
		b.Run(name, func(b *testing.B) { policyRoundTrip(b, srv, policytest.Bench20(scoped)) })
	}
}

// epochCalls is the rounds an epoch of BenchmarkPolicyRoundTrip makes.
const epochCalls = 500

func policyRoundTrip(b *testing.B, srv string, policy []byte) {
	lat := [4][]time.Duration{}
	var added, empty, control []time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(epochCalls, b.N-done)
		b.StopTimer()
		paths := [4]*benchPath{
			proxyPath(b, srv, benchMode{name: "none", durability: transcript.DurabilityNone}),
			proxyPath(b, srv, benchMode{name: "none-control", durability: transcript.DurabilityNone}),
			proxyPath(b, srv, benchMode{name: "policy", durability: transcript.DurabilityNone, policy: policy}),
			proxyPath(b, srv, benchMode{name: "empty", durability: transcript.DurabilityNone, policy: []byte("version: 1\ndefault: allow\nrules: []\n")}),
		}
		for _, p := range paths {
			var warm []time.Duration
			p.run(b, 1<<40, 100, 1, &warm)
		}
		b.StartTimer()
		var ea, ec, ee []time.Duration
		for i := range n {
			var d [4]time.Duration
			for k := range 4 {
				j := (i + k) % 4
				v, err := paths[j].conn.call(int64(i))
				if err != nil {
					b.Fatalf("%s path: %v", paths[j].name, err)
				}
				d[j] = v
			}
			for j := range 4 {
				lat[j] = append(lat[j], d[j])
			}
			ee = append(ee, d[3]-d[0])
			ec = append(ec, d[1]-d[0])
			ea = append(ea, d[2]-d[0])
		}
		b.StopTimer()
		for _, p := range paths {
			p.close()
		}
		slices.Sort(ee)
		empty = append(empty, quantile(ee, .5))
		slices.Sort(ea)
		slices.Sort(ec)
		added, control = append(added, quantile(ea, .5)), append(control, quantile(ec, .5))
		done += n
		b.StartTimer()
	}
	b.StopTimer()
	for j := range 3 {
		slices.Sort(lat[j])
	}
	slices.Sort(empty)
	b.ReportMetric(us(quantile(empty, .5)), "empty-µs")
	slices.Sort(added)
	slices.Sort(control)
	p50, d50 := quantile(lat[0], .5), quantile(lat[2], .5)
	b.ReportMetric(us(p50), "nopolicy-p50-µs")
	b.ReportMetric(us(d50), "policy-p50-µs")
	b.ReportMetric(us(quantile(added, .5)), "added-µs")
	b.ReportMetric(us(quantile(control, .5)), "control-µs")
	b.ReportMetric(float64(len(added)), "epochs")
	b.ReportMetric(float64(d50)/float64(p50), "policy-x-nopolicy")
}
