// Command bench runs tracectl's benchmarks, each with its anchor measured in
// the same run, and prints one Markdown table: figure, tracectl, anchor,
// ratio, target.
//
//	go run ./bench            # the whole table (several minutes)
//	go run ./bench -only canon,verify
//
// Every number comes from `go test -bench` output of the benchmark named in
// the row; nothing is typed in by hand. Ratios are as the benchmark reports
// them (its own anchor in the same process, interleaved where it matters).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// row is one line of the table: which benchmark metric is tracectl's
// figure, which is the anchor's, which is the ratio, and the target.
type row struct {
	group     string // -only selects rows by group
	pkg       string
	bench     string // -bench regexp
	benchtime string
	sub       string // benchmark name (after "Benchmark", before -GOMAXPROCS) the row reads
	figure    string
	ours      metric
	anchor    metric
	ratio     string // metric unit holding ratio
	target    string
}

type metric struct {
	unit  string // metric unit in the go test output
	label string // how to print it
}

var rows = []row{
	{"canon", "./canon", "^BenchmarkAnchors$", "5x", "Anchors", "canonicalize a 4 MB tools/list document",
		metric{"canon-MB/s", "MB/s"}, metric{"jcs-MB/s", "MB/s gowebpki/jcs"}, "canon/jcs-speed", ">= 5x faster than jcs"},
	{"canon", "./canon", "^BenchmarkAnchors$", "5x", "Anchors", "canonicalize vs SHA-256 of the same bytes",
		metric{"canon-MB/s", "MB/s"}, metric{"sha256-MB/s", "MB/s sha256"}, "canon/sha256-time", "(reference)"},
	{"canon", "./canon", "^BenchmarkCLI$", "7x", "CLI", "`tracectl canon` whole process, 27 MB tools/list",
		metric{"cli-ms", "ms"}, metric{"jcs-ms", "ms, a program calling jcs.Transform"}, "cli/jcs-speed", ">= 7x faster"},
	{"canon", "./canon", "^BenchmarkCLI$", "7x", "CLI", "`tracectl canon` peak RSS over the input size",
		metric{"cli-rss/input", "x"}, metric{"jcs-rss/input", "x, the jcs.Transform program"}, "cli-rss/input", "<= 2.5x the input"},
	{"snapshot", "./snapshot", "^BenchmarkCapture10k$", "2x", "Capture10k", "capture 10,000 tools over 100 pages",
		metric{"capture-ms/op", "ms"}, metric{"sdk-ms/op", "ms go-sdk ListTools loop"}, "ratio", "<= 0.7x"},
	{"transcript", "./transcript", "^BenchmarkReader$", "", "Reader", "stream-validate transcript lines",
		metric{"", ""}, metric{"", "encoding/json Unmarshal"}, "x-json-unmarshal", "(reference)"},
	{"sign", "./sign", "^BenchmarkSign$", "", "Sign", "sign a Trust Record",
		metric{"ns/op-sign", "ns"}, metric{"ns/op-ed25519", "ns ed25519.Sign"}, "x-ed25519", "(reference)"},
	{"producer", "./producer", "^BenchmarkRecord$", "2000x", "Record/strict-1", "journal: attempt+response, strict, 1 caller",
		metric{"calls/s", "calls/s"}, metric{"", "write+fsync loop"}, "x-anchor", "<= 1.2x"},
	{"producer", "./producer", "^BenchmarkRecord$", "2000x", "Record/strict-32", "journal: strict, 32 callers (group commit)",
		metric{"calls/s", "calls/s"}, metric{"", "write+fsync loop"}, "x-anchor", "<= 1.2x"},
	{"producer", "./producer", "^BenchmarkRecord$", "2000x", "Record/batch-1", "journal: batch",
		metric{"calls/s", "calls/s"}, metric{"", "plain appends"}, "x-anchor", "(reference)"},
	{"producer", "./producer", "^BenchmarkRecord$", "2000x", "Record/none-1", "journal: none",
		metric{"calls/s", "calls/s"}, metric{"", "plain appends"}, "x-anchor", "<= 2.5x"},
	{"producer", "./producer", "^BenchmarkSeal$", "100000x", "Seal", "seal of a full-retention bundle, 100,000 calls",
		metric{"seal-ms", "ms"}, metric{"record-ms", "ms, its own recording (durability none)"}, "seal-x-record", "<= 0.1x"},
	{"producer", "./producer", "^BenchmarkHeapPerCall$", "1000000x", "HeapPerCall", "live heap after 1,000,000 calls",
		metric{"heap-MiB", "MiB"}, metric{"", "(absolute)"}, "heap-B/call", "< 32 MiB"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/none/inflight=1", "tools/call round trip through wrap, durability none",
		metric{"proxy-p50-µs", "µs p50"}, metric{"relay-p50-µs", "µs p50 through an io.Copy relay to the same server"}, "p50-x-relay", "<= 1.15x the relay"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/none/inflight=1", "the same round trip against direct",
		metric{"proxy-p50-µs", "µs p50"}, metric{"direct-p50-µs", "µs p50 direct to the same server"}, "p50-ratio", "(reference)"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/none/inflight=1", "the io.Copy relay against direct",
		metric{"relay-p50-µs", "µs p50"}, metric{"direct-p50-µs", "µs p50 direct"}, "relay-x-direct", "(the floor)"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/forward-only/inflight=1", "diagnostic: wrap's gate and hop, recording nothing",
		metric{"proxy-p50-µs", "µs p50"}, metric{"relay-p50-µs", "µs p50 relay"}, "p50-x-relay", "(diagnostic)"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/none/inflight=1", "added p99 through wrap, durability none",
		metric{"proxy-p99-µs", "µs p99"}, metric{"direct-p99-µs", "µs p99 direct"}, "added-p99-µs", "< 200 µs"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/batch/inflight=1", "round trip, durability batch",
		metric{"proxy-p50-µs", "µs p50"}, metric{"direct-p50-µs", "µs p50 direct"}, "p50-ratio", "(reference)"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/strict/inflight=1", "round trip, durability strict, 1 in flight",
		metric{"proxy-p50-µs", "µs p50"}, metric{"direct-p50-µs", "µs p50 direct"}, "fsyncs/call", "cost of its fsyncs (journal and pack, <= 4 per call, concurrent pairs)"},
	{"proxy", "./producer/stdio", "^BenchmarkRoundTrip$", "10000x", "RoundTrip/strict/inflight=32", "round trip, durability strict, 32 in flight",
		metric{"proxy-p50-µs", "µs p50"}, metric{"direct-p50-µs", "µs p50 direct"}, "fsyncs/call", "<= 0.5 per call (journal and pack)"},
	{"verify", "./verify", "^BenchmarkVerifyBundle$", "1x", "VerifyBundle/attempts=100000", "verify a 100,000-attempt bundle",
		metric{"MiB/s", "MiB/s"}, metric{"", "sha256sum over the bundle"}, "x-sha256sum", "<= 1.3x"},
}

func main() {
	only := flag.String("only", "", "comma-separated groups to run (default: all)")
	flag.Parse()
	want := map[string]bool{}
	for _, g := range strings.Split(*only, ",") {
		if g != "" {
			want[g] = true
		}
	}
	type key struct{ pkg, bench, benchtime string }
	outputs := map[key]string{}
	fmt.Printf("# tracectl performance (%s, %s/%s, %d CPUs, %s)\n\n", time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Println("| figure | tracectl | anchor (same run) | ratio | target |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		if len(want) > 0 && !want[r.group] {
			continue
		}
		k := key{r.pkg, r.bench, r.benchtime}
		out, ok := outputs[k]
		if !ok {
			var err error
			out, err = runBench(r)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s %s: %v\n%s\n", r.pkg, r.bench, err, out)
			}
			outputs[k] = out
		}
		m := parse(out, r.sub)
		cell := func(x metric) string {
			if x.unit == "" {
				return x.label
			}
			v, ok := m[x.unit]
			if !ok {
				return "n/a"
			}
			return strconv.FormatFloat(v, 'g', 4, 64) + " " + x.label
		}
		ratio := "n/a"
		if v, ok := m[r.ratio]; ok {
			ratio = strconv.FormatFloat(v, 'f', 2, 64) + " (" + r.ratio + ")"
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.figure, cell(r.ours), cell(r.anchor), ratio, r.target)
	}
}

func runBench(r row) (string, error) {
	args := []string{"test", "-run", "^$", "-bench", r.bench, "-count", "1", "-timeout", "30m"}
	if r.benchtime != "" {
		args = append(args, "-benchtime", r.benchtime)
	}
	args = append(args, r.pkg)
	cmd := exec.Command("go", args...) // the go on PATH: the one that ran `go run ./bench`
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// parse reads the metrics of the benchmark line whose name is sub (or the
// first benchmark line when sub is empty).
func parse(out, sub string) map[string]float64 {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if sub != "" && name != sub {
			continue
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
		return m
	}
	return nil
}
