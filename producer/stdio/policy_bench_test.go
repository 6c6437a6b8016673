package stdio

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/transcript"
)

// benchPolicy is a 20-rule policy none of whose rules denies the bench's
// echo call: ten apply to any tool and evaluate a CEL condition on every
// call, ten name other tools (a name compare each).
func benchPolicy() []byte {
	var b strings.Builder
	b.WriteString("version: 1\ndefault: allow\nrules:\n")
	conds := []string{
		`args.text == "forbidden"`, `size(args.text) > 4096`, `args.text.startsWith("rm -rf")`,
		`has(args.path) && args.path.startsWith("/etc")`, `tool == "shell" && size(args) > 0`,
		`has(args.amount) && args.amount > 100`, `args.text.contains("BEGIN PRIVATE KEY")`,
		`has(declaration.annotations) && declaration.annotations.destructiveHint == true`,
		`has(server.name) && server.name == "evil"`, `size(args) > 64`,
	}
	for i, c := range conds {
		fmt.Fprintf(&b, "  - id: any-%d\n    when: '%s'\n    action: deny\n", i, c)
	}
	for i := range 10 {
		fmt.Fprintf(&b, "  - id: other-%d\n    tool: \"other_%d*\"\n    when: 'args.x == 1'\n    action: deny\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkPolicyRoundTrip: wrap's round trip (durability none, one call
// in flight) with a 20-rule policy against the same without a policy, in
// the same run, interleaved in blocks. Reports both p50s, what the policy
// adds at p50, and the ratio. (The decision itself, without the round
// trip: internal/policy BenchmarkDecide.)
func BenchmarkPolicyRoundTrip(b *testing.B) {
	srv := mcptest.Build(b, "sdkserver")
	plain := proxyPath(b, srv, benchMode{name: "none", durability: transcript.DurabilityNone})
	decided := proxyPath(b, srv, benchMode{name: "policy", durability: transcript.DurabilityNone, policy: benchPolicy()})
	defer plain.close()
	defer decided.close()
	var warm []time.Duration
	plain.run(b, 1<<40, 300, 1, &warm)
	decided.run(b, 1<<40, 300, 1, &warm)
	const block = 250
	var pl, dl []time.Duration
	b.ResetTimer()
	for i, done := 0, 0; done < b.N; i, done = i+1, done+block {
		// Alternately first, so neither path always runs on the heels of
		// the other.
		n := min(block, b.N-done)
		if i%2 == 0 {
			plain.run(b, int64(done), n, 1, &pl)
			decided.run(b, int64(done), n, 1, &dl)
		} else {
			decided.run(b, int64(done), n, 1, &dl)
			plain.run(b, int64(done), n, 1, &pl)
		}
	}
	b.StopTimer()
	slices.Sort(pl)
	slices.Sort(dl)
	p50, d50 := quantile(pl, .5), quantile(dl, .5)
	b.ReportMetric(us(p50), "nopolicy-p50-µs")
	b.ReportMetric(us(d50), "policy-p50-µs")
	b.ReportMetric(us(d50-p50), "added-p50-µs")
	b.ReportMetric(float64(d50)/float64(p50), "policy-x-nopolicy")
}
