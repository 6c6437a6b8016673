package canon

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// toolsListDoc builds a deterministic tools/list response shaped like a real
// MCP server's: tools with JSON Schemas, members in server (not canonical)
// order, non-ASCII descriptions, integers and a few decimals such as 0.7.
// 10,000 tools make about 4 MB.
func toolsListDoc(tools int) []byte {
	rng := rand.New(rand.NewPCG(2, 3))
	words := []string{
		"fetch", "the", "current", "weather", "for", "a", "city", "données", "récupère", "東京",
		"поиск", "файлов", "ñandú", "Größe", "repository", "issues", "with", "labels", "🚀", "naïve",
		"search", "index", "résumé", "数据", "query", "limit", "page", "token", "über", "schema",
	}
	sentence := func(n int) []byte {
		var b []byte
		for i := range n {
			if i > 0 {
				b = append(b, ' ')
			}
			b = append(b, words[rng.IntN(len(words))]...)
		}
		return b
	}
	var b []byte
	b = append(b, `{"jsonrpc":"2.0","id":1,"result":{"tools":[`...)
	for i := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"name":"tool_%05d","description":"%s.\n","inputSchema":{"type":"object","properties":{`,
			i, sentence(2+rng.IntN(5)))
		b = fmt.Appendf(b, `"query":{"type":"string","description":"%s","maxLength":%d},`, sentence(2), 64+rng.IntN(1024))
		b = fmt.Appendf(b, `"limit":{"type":"integer","minimum":1,"maximum":%d,"default":%d},`, 100+rng.IntN(900), 10+rng.IntN(40))
		if i%4 == 0 {
			b = fmt.Appendf(b, `"temperature":{"type":"number","minimum":0,"maximum":1.5,"default":0.7},`)
		}
		b = fmt.Appendf(b, `"tags":{"type":"array","items":{"enum":["%s"]}}`, sentence(1))
		b = append(b, `},"required":["query"],"additionalProperties":false},`...)
		b = fmt.Appendf(b, `"annotations":{"readOnlyHint":%t,"openWorldHint":%t}}`, i%2 == 0, i%3 == 0)
	}
	b = append(b, `],"nextCursor":"eyJwYWdlIjogMn0="}}`...)
	return b
}

var benchDoc = sync.OnceValue(func() []byte { return toolsListDoc(10_000) })

func BenchmarkCanonicalize(b *testing.B) {
	doc := benchDoc()
	b.Run("canon", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Canonicalize(doc, PolicyMCPDecl); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Digest(doc, PolicyMCPDecl); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jcs", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jcs.Transform(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			sha256.Sum256(doc)
		}
	})
}

// BenchmarkAnchors runs canon, its anchor gowebpki/jcs.Transform and SHA-256
// over the same bytes, interleaved in every iteration so machine load hits
// all three alike, and reports their throughput (from the median time of
// each, which shrugs off iterations disturbed by other processes),
// allocations and the ratios: canon/jcs-speed above 1 means canon is faster;
// canon/sha256-time is how many times longer canonicalizing takes than
// hashing the raw bytes.
func BenchmarkAnchors(b *testing.B) {
	doc := benchDoc()
	var ms runtime.MemStats
	// measure runs f from a collected heap, so no part pays for the garbage
	// of another (jcs leaves about 75 MB per call), and returns its time and
	// heap allocations.
	var cpuCanon, cpuJCS time.Duration
	measure := func(f func() error, cpuTotal *time.Duration) (time.Duration, uint64) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		m0 := ms.Mallocs
		c0 := processCPU()
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if cpuTotal != nil {
			*cpuTotal += processCPU() - c0
		}
		runtime.ReadMemStats(&ms)
		return d, ms.Mallocs - m0
	}
	var tCanon, tJCS, tSHA []time.Duration
	var aCanon, aJCS uint64
	for b.Loop() {
		d, a := measure(func() error { _, err := Canonicalize(doc, PolicyMCPDecl); return err }, &cpuCanon)
		tCanon, aCanon = append(tCanon, d), aCanon+a
		d, a = measure(func() error { _, err := jcs.Transform(doc); return err }, &cpuJCS)
		tJCS, aJCS = append(tJCS, d), aJCS+a
		d, _ = measure(func() error { sha256.Sum256(doc); return nil }, nil)
		tSHA = append(tSHA, d)
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ds[len(ds)/2].Seconds()
	}
	c, j, h := median(tCanon), median(tJCS), median(tSHA)
	mbps := func(sec float64) float64 { return float64(len(doc)) / sec / 1e6 }
	b.ReportMetric(mbps(c), "canon-MB/s")
	b.ReportMetric(mbps(j), "jcs-MB/s")
	b.ReportMetric(mbps(h), "sha256-MB/s")
	b.ReportMetric(j/c, "canon/jcs-speed")
	b.ReportMetric(c/h, "canon/sha256-time")
	// CPU time (all threads, GC included) is less disturbed by other
	// processes than wall time.
	if cpuCanon > 0 {
		b.ReportMetric(cpuJCS.Seconds()/cpuCanon.Seconds(), "canon/jcs-cpu")
	}
	n := float64(b.N)
	b.ReportMetric(float64(aCanon)/n, "canon-allocs/op")
	b.ReportMetric(float64(aJCS)/n, "jcs-allocs/op")
}

// BenchmarkWalkNested walks every object of a deeply nested document
// (objects whose values are long arrays ending in the next object: a
// frame the gate accepts) with RangeMembers and Get, as the redaction
// walker and the fact derivations do, against parsing the same bytes.
// Walking is linear in the document: walk-x-parse is 0.4 here; it was 12
// when a member's name was found by scanning past its previous sibling's
// subtree (quadratic in the nesting).
func BenchmarkWalkNested(b *testing.B) {
	var sb strings.Builder
	const depth, width = 400, 300
	for range depth {
		sb.WriteString(`{"x":[`)
		sb.WriteString(strings.Repeat("0,", width))
	}
	sb.WriteString("{}")
	for range depth {
		sb.WriteString("]}")
	}
	src := []byte(sb.String())
	opts := ParseOptions{Limits: Limits{MaxDepth: 2*depth + 2}}
	var walk func(v Value) int
	walk = func(v Value) int {
		n := 0
		switch v.Kind() {
		case KindObject:
			v.RangeMembers(func(name []byte, val Value) bool {
				if got, ok := v.Get(string(name)); ok && got == val {
					n++
				}
				n += walk(val)
				return true
			})
		case KindArray:
			for _, e := range v.Elems() {
				n += walk(e)
			}
		}
		return n
	}
	var parseT, walkT time.Duration
	for b.Loop() {
		t0 := time.Now()
		doc, err := Parse(src, opts)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if n := walk(doc.Root()); n != depth {
			b.Fatalf("walked %d members, want %d", n, depth)
		}
		parseT += t1.Sub(t0)
		walkT += time.Since(t1)
	}
	b.ReportMetric(float64(walkT)/float64(parseT), "walk-x-parse")
	b.SetBytes(int64(len(src)))
}
