package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/policytest"
)

// BenchmarkDecide: one call's decision under a 20-rule policy (scoped, and
// any-tool with ten conditions evaluated), timed call by call against the
// anchor of the gate's strict reading of the same request (canon.Parse),
// which every frame pays anyway; decide-x-parse is the ratio.
func BenchmarkDecide(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"payload-0123456789"}}}`)
	doc, err := canon.Parse(req, canon.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	params, _ := doc.Root().Get("params")
	args, _ := params.Get("arguments")
	m, load := testManifest(&testing.T{}, "srv", `{"name":"echo","description":"echoes","inputSchema":{"type":"object"}}`)
	snap := NewSnapshot(m, load)
	for _, scoped := range []bool{true, false} {
		name := "any-tool-10-conditions"
		if scoped {
			name = "scoped"
		}
		b.Run(name, func(b *testing.B) {
			p, err := Parse(policytest.Bench20(scoped))
			if err != nil {
				b.Fatal(err)
			}
			e := NewEngine(p, nil)
			var dNs, pNs time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if d := e.Decide(Input{Tool: "echo", Args: args, Snapshot: snap}); d.Action != Allow {
					b.Fatal(d)
				}
				t1 := time.Now()
				if _, err := canon.Parse(req, canon.ParseOptions{}); err != nil {
					b.Fatal(err)
				}
				dNs, pNs = dNs+t1.Sub(t0), pNs+time.Since(t1)
			}
			b.ReportMetric(float64(dNs)/float64(b.N)/1e3, "decide-µs")
			b.ReportMetric(float64(pNs)/float64(b.N)/1e3, "parse-µs")
			b.ReportMetric(float64(dNs)/float64(pNs), "decide-x-parse")
		})
	}
}

// BenchmarkDecideCold: one call's decision with the caches cold, as on a
// wrap's round trip, where the client, the server and the recorder's other
// work run between two calls: 8 MiB are written between decisions (more
// than this machine's L2). Anchor: the same decision by CEL alone (the
// rules' native forms removed, plans kept), alternating call by call in
// the same run; native-x-cel is the ratio of the medians.
func BenchmarkDecideCold(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"payload-0123456789"}}}`)
	m, load := testManifest(&testing.T{}, "srv", `{"name":"echo","description":"echoes","inputSchema":{"type":"object"}}`)
	// A snapshot per engine: a snapshot keeps one policy's plans at a time.
	snaps := [2]*Snapshot{NewSnapshot(m, load), NewSnapshot(m, load)}
	evict := make([]byte, 8<<20)
	for _, scoped := range []bool{true, false} {
		name := "any-tool-10-conditions"
		if scoped {
			name = "scoped"
		}
		b.Run(name, func(b *testing.B) {
			p, err := Parse(policytest.Bench20(scoped))
			if err != nil {
				b.Fatal(err)
			}
			celOnly := *p
			celOnly.rules = slices.Clone(p.rules)
			for i := range celOnly.rules {
				celOnly.rules[i].native = nil
			}
			engines := [2]*Engine{NewEngine(p, nil), NewEngine(&celOnly, nil)}
			var took [2][]time.Duration
			for i := 0; b.Loop(); i++ {
				doc, err := canon.Parse(req, canon.ParseOptions{})
				if err != nil {
					b.Fatal(err)
				}
				params, _ := doc.Root().Get("params")
				args, _ := params.Get("arguments")
				for k := range 2 {
					j := (i + k) % 2
					for o := 0; o < len(evict); o += 64 {
						evict[o]++
					}
					t0 := time.Now()
					d := engines[j].Decide(Input{Tool: "echo", Args: args, Snapshot: snaps[j]})
					took[j] = append(took[j], time.Since(t0))
					if d.Action != Allow {
						b.Fatal(d)
					}
				}
			}
			for j := range took {
				slices.Sort(took[j])
			}
			nat, cel := took[0][len(took[0])/2], took[1][len(took[1])/2]
			b.ReportMetric(float64(nat)/1e3, "native-p50-µs")
			b.ReportMetric(float64(cel)/1e3, "cel-p50-µs")
			b.ReportMetric(float64(nat)/float64(cel), "native-x-cel")
		})
	}
}
