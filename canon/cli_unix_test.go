//go:build unix

package canon

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// cliTools makes the whole-process benchmark's document about 27 MB, the
// size of the largest tools/list the issue measured.
const cliTools = 62_500

// BenchmarkCLI times `tracectl canon --policy mcp-decl` as a whole process
// (start, read, parse, write, exit) on a 27 MB tools/list against its
// anchor, a program of its own that calls gowebpki/jcs.Transform on the same
// file (testdata/jcsanchor). The two run in turn, output to /dev/null, so
// machine load hits both alike; the ratio is of the median wall times
// (cli/jcs-speed above 1: tracectl is faster), and each process's largest
// peak RSS is reported over the input size (targets: speed >= 7, RSS <= 2.5).
func BenchmarkCLI(b *testing.B) {
	dir := b.TempDir()
	doc := toolsListDoc(cliTools)
	in := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(in, doc, 0o600); err != nil {
		b.Fatal(err)
	}
	tracectl := goBuild(b, dir, "github.com/tracectl/tracectl/cmd/tracectl")
	anchor := goBuild(b, dir, "./testdata/jcsanchor")
	launcher := goBuild(b, dir, "./testdata/maxrss")
	cli := []string{tracectl, "canon", "--policy", "mcp-decl", in}
	jcsArgv := []string{anchor, in}
	// Canonical bytes are the contract: both must print the same.
	if got, want := output(b, cli), output(b, jcsArgv); !bytes.Equal(got, want) {
		b.Fatalf("tracectl canon and jcs disagree (%d vs %d bytes)", len(got), len(want))
	}
	var tCLI, tJCS []time.Duration
	var rssCLI, rssJCS int64
	for b.Loop() {
		d, rss := runProcess(b, launcher, cli)
		tCLI, rssCLI = append(tCLI, d), max(rssCLI, rss)
		d, rss = runProcess(b, launcher, jcsArgv)
		tJCS, rssJCS = append(tJCS, d), max(rssJCS, rss)
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ds[len(ds)/2].Seconds()
	}
	c, j := median(tCLI), median(tJCS)
	b.ReportMetric(c*1e3, "cli-ms")
	b.ReportMetric(j*1e3, "jcs-ms")
	b.ReportMetric(j/c, "cli/jcs-speed")
	b.ReportMetric(float64(rssCLI)/float64(len(doc)), "cli-rss/input")
	b.ReportMetric(float64(rssJCS)/float64(len(doc)), "jcs-rss/input")
	b.ReportMetric(float64(len(doc))/1e6, "input-MB")
}

func goBuild(b *testing.B, dir, pkg string) string {
	b.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	// go test puts its own GOROOT/bin first on PATH.
	if msg, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

func output(b *testing.B, argv []string) []byte {
	b.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		b.Fatalf("%s: %v", argv[0], err)
	}
	return out
}

// runProcess runs argv through the maxrss launcher (see
// testdata/maxrss) and returns its wall time and peak resident set size.
func runProcess(b *testing.B, launcher string, argv []string) (time.Duration, int64) {
	b.Helper()
	out, err := exec.Command(launcher, argv...).Output()
	if err != nil {
		b.Fatalf("%s: %v", argv[0], err)
	}
	var ns, rss int64
	if _, err := fmt.Sscan(string(out), &ns, &rss); err != nil {
		b.Fatalf("maxrss output %q: %v", out, err)
	}
	return time.Duration(ns), rss
}
