package redact

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
)

// toolsCall4K is a tools/call request of about 4 KiB shaped like a coding
// agent's: a file path, a patch of source text, options, a header map with
// one bearer token and _meta with a progress token.
func toolsCall4K() []byte {
	var src strings.Builder
	for i := 0; src.Len() < 3400; i++ {
		fmt.Fprintf(&src, "func handler%d(w http.ResponseWriter, r *http.Request) { log.Printf(\"request %%d\", %d) }\n", i, i)
	}
	msg := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"apply_patch","arguments":{` +
		`"path":"internal/server/handlers.go","content":` + jsonString(src.String()) + `,` +
		`"options":{"dryRun":false,"encoding":"utf-8","lineEndings":"lf","maxLines":4000,"labels":["refactor","http","logging"]},` +
		`"headers":{"Accept":"application/json","User-Agent":"agent/1.0","X-Request":"Bearer ` + gen(alnum, 40) + `"}},` +
		`"_meta":{"progressToken":"tok-42","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`
	return []byte(msg)
}

// BenchmarkMessage reports redacting a 4 KiB tools/call against its anchor,
// canon.Parse of the same bytes (which Message does first), interleaved in
// each iteration so machine load hits both alike; times are medians.
// redact/parse-time is how many times longer redacting takes than parsing.
func BenchmarkMessage(b *testing.B) {
	msg := toolsCall4K()
	if len(msg) < 4000 || len(msg) > 4400 {
		b.Fatalf("message of %d bytes, want about 4 KiB", len(msg))
	}
	rules := Default()
	if res, err := Message(msg, rules); err != nil || len(res.Redactions) != 1 {
		b.Fatalf("want one redaction: %v %v", res.Redactions, err)
	}
	const batch = 200
	var tParse, tRedact []time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range batch {
			if _, err := canon.Parse(msg, canon.ParseOptions{AllowDuplicateKeys: true}); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range batch {
			if _, err := Message(msg, rules); err != nil {
				b.Fatal(err)
			}
		}
		tParse, tRedact = append(tParse, t1.Sub(t0)), append(tRedact, time.Since(t1))
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ds[len(ds)/2].Seconds() / batch
	}
	p, r := median(tParse), median(tRedact)
	b.ReportMetric(p*1e6, "parse-µs/msg")
	b.ReportMetric(r*1e6, "redact-µs/msg")
	b.ReportMetric(r/p, "redact/parse-time")
	b.ReportMetric(float64(len(msg))/r/1e6, "redact-MB/s")
}

// BenchmarkArgv is a typical server command line.
func BenchmarkArgv(b *testing.B) {
	argv := []string{"npx", "-y", "@modelcontextprotocol/server-github", "--api-key", "hunter2", "--log-level=debug", "GITHUB_TOKEN=x"}
	b.ReportAllocs()
	for b.Loop() {
		Argv(argv, nil)
	}
}
