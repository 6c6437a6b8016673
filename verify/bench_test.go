package verify_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// BenchmarkVerifyBundle verifies a bundle of attempts with ~1 KB request
// and response payloads each, all bound to one snapshot of 10,000 tools,
// and compares its wall time with the floor: sha256sum over every file of
// the bundle in the same run (each byte read and hashed once). It reports
// the ratio (x-sha256sum) and the peak live heap during verification; the
// two sizes show that memory does not grow with the number of attempts
// beyond a few dozen bytes per attempt id.
//
//	go test ./verify -run XXX -bench VerifyBundle -benchtime 3x
//
// -short uses 2,000 and 20,000 attempts and a 1,000-tool snapshot.
func BenchmarkVerifyBundle(b *testing.B) {
	sizes, tools := []int{10_000, 100_000}, 10_000
	if testing.Short() {
		sizes, tools = []int{2_000, 20_000}, 1_000
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("attempts=%d", n), func(b *testing.B) {
			dir := benchBundle(b, n, tools)
			files, bytes := bundleSize(b, dir)
			floor := sha256Floor(b, dir)
			v := verifier(b, verify.Options{TrustedKey: verifytest.Key(b, 1).Public(), At: verifytest.At})
			var peak uint64
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				p := watchHeap()
				rep, err := v.Bundle(context.Background(), verify.DirFS(dir)) // what the CLI uses
				peak = max(peak, p())
				elapsed += time.Since(start)
				if err != nil || rep.Counts.Attempts != int64(n) {
					b.Fatalf("verdict %v, %d attempts: %v", rep.Verdict, rep.Counts.Attempts, err)
				}
			}
			per := elapsed / time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(floor), "x-sha256sum")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(bytes)/per.Seconds()/(1<<20), "MiB/s")
			b.Logf("%d attempts, %d files, %.1f MiB: verify %v, sha256sum %v (%.2fx), peak live heap %.1f MiB",
				n, files, float64(bytes)/(1<<20), per.Round(time.Millisecond), floor.Round(time.Millisecond), float64(per)/float64(floor), float64(peak)/(1<<20))
		})
	}
}

var benchBundles sync.Map // "attempts/tools" -> dir, generated once per process

// benchBundle records a bundle with the producer (durability none) in a
// temporary directory shared by the benchmark's runs.
func benchBundle(b *testing.B, attempts, tools int) string {
	key := fmt.Sprintf("%d/%d", attempts, tools)
	if d, ok := benchBundles.Load(key); ok {
		return d.(string)
	}
	root, err := os.MkdirTemp("", "verify-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root); benchBundles.Delete(key) })
	dir := filepath.Join(root, "run.trace")
	start := time.Now()
	r := openRecorder(b, dir, transcript.DurabilityNone)
	recordSnapshot(b, r, tools, 500)
	ctx := context.Background()
	pad := strings.Repeat("x", 900)
	for i := range attempts {
		h, err := r.Attempt(ctx, producer.Call{Line: call(i, "tool_1", fmt.Sprintf(`{"n":%d,"text":%q}`, i, pad))})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Response(answer(i, fmt.Sprintf("%d %s", i, pad))); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := r.Seal(ctx, recordSigner{key: verifytest.Key(b, 1), at: verifytest.Issued}); err != nil {
		b.Fatal(err)
	}
	b.Logf("recorded %d attempts and a %d-tool snapshot in %v", attempts, tools, time.Since(start).Round(time.Millisecond))
	benchBundles.Store(key, dir)
	return dir
}

func bundleSize(b *testing.B, dir string) (files int, size int64) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files++
		size += fi.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return files, size
}

// sha256Floor times sha256sum over every file of the bundle (after one
// warm-up pass, so both sides read from the page cache), falling back to
// SHA-256 in Go when sha256sum is not installed. The best of three runs.
func sha256Floor(b *testing.B, dir string) time.Duration {
	run := func() time.Duration {
		start := time.Now()
		if _, err := exec.LookPath("sha256sum"); err == nil {
			cmd := exec.Command("sh", "-c", `find . -type f -print0 | xargs -0 sha256sum > /dev/null`)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("sha256sum: %v\n%s", err, out)
			}
			return time.Since(start)
		}
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(sha256.New(), f)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	run()
	best := run()
	for range 2 {
		best = min(best, run())
	}
	return best
}

// watchHeap samples the live heap every millisecond until the returned
// function is called, which stops sampling and returns the peak.
func watchHeap() func() uint64 {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
