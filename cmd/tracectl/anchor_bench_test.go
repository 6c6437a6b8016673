//go:build !windows

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/tlog"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkAnchoring measures what anchoring costs a recording: one op is
// a whole 1,000-call session (attempt and response per call, strict
// durability, sealed and signed; without --checkpoint-every, and with a
// checkpoint every 100 calls) anchored in
// a real Tessera log on loopback (tracectl log serve, its own process; the first
// checkpoint, every checkpoint, the record: the seal waits for the
// record's log index), against the anchor in the same run: the same
// session with the same checkpoints, not anchored. Sessions alternate so
// both see the same load. x-anchor = our wall time until the bundle is
// sealed / the anchor's (the goal: at most 1.05); receipts-x-anchor counts
// our time until the last receipt is written too (the record's waits for
// a published checkpoint: Tessera's POSIX driver publishes at most every
// 100 ms).
func BenchmarkAnchoring(b *testing.B) {
	const calls = 1000
	dir := b.TempDir()
	ctx := context.Background()
	// The log is tracectl log serve in its own process, as on a host that
	// runs it beside the recorders.
	logDir := filepath.Join(dir, "log")
	cmd := exec.Command(mcptest.BuildTracectl(b), "log", "serve", "--dir", logDir, "--listen", "127.0.0.1:0", "--origin", "bench.tracectl/log")
	errR, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(errR).ReadString('\n')
	m := regexp.MustCompile(`serving (http://[^ ]+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		b.Fatalf("log serve: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	logURL := m[1]
	pub, err := os.ReadFile(filepath.Join(logDir, tlog.PubFile))
	if err != nil {
		b.Fatal(err)
	}
	keys, err := anchor.ParseKeys(string(pub), nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	c := &submit.Client{URL: logURL, Keys: keys}
	priv, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := sign.NewSigner(priv)
	if err != nil {
		b.Fatal(err)
	}
	digest, err := selfDigest()
	if err != nil {
		b.Fatal(err)
	}
	reqs, resps := make([][]byte, calls), make([][]byte, calls)
	for i := range reqs {
		id := fmt.Sprint(i + 1)
		reqs[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"search","arguments":{"query":"mcp transcript ` + id + `","limit":10}}}` + "\n")
		resps[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[],"structuredContent":{"hits":3,"id":"` + id + `"}}}` + "\n")
	}
	for _, every := range []checkpointEvery{{}, {calls: 100}} {
		name := "no-checkpoint-every"
		if every.calls > 0 {
			name = "checkpoint-every-100"
		}
		b.Run(name, func(b *testing.B) {
			sdir := b.TempDir()
			runs := 0
			// session returns the wall time until the bundle is sealed (record.json
			// written) and until every receipt is written too.
			session := func(anchored bool) (sealed, receipts time.Duration) {
				runs++
				t0 := time.Now()
				rec, err := producer.Open(filepath.Join(sdir, fmt.Sprintf("run-%d.trace", runs)), producer.Options{
					Clock: time.Now, Entropy: rand.Reader, Durability: transcript.DurabilityStrict,
					Producer: transcript.Producer{Name: "bench", Version: "v0"},
					Server:   transcript.Server{Transport: transcript.TransportInProcess},
				})
				if err != nil {
					b.Fatal(err)
				}
				var rs producer.RecordSigner = trustRecordSigner{signer: signer, now: time.Now, digest: digest}
				var sa *sessionAnchor
				if anchored {
					if sa, err = startAnchoring(ctx, rec, anchorOptions{url: logURL}, c, signer, recordIdentity{}, every, io.Discard); err != nil {
						b.Fatal(err)
					}
					rs = sa
				} else if !every.set() {
					// not anchored, no checkpoints: record and seal only
				} else if err := startCheckpointsWith(rec, every, rs, io.Discard, nil); err != nil {
					b.Fatal(err)
				}
				for i := range calls {
					h, err := rec.Attempt(ctx, producer.Call{Line: reqs[i]})
					if err != nil {
						b.Fatal(err)
					}
					if err := h.Response(resps[i]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := rec.Seal(ctx, rs); err != nil {
					b.Fatal(err)
				}
				sealed = time.Since(t0)
				sa.close()
				receipts = time.Since(t0)
				if anchored {
					want := 2 // the first checkpoint and the record
					if every.calls > 0 {
						want += calls / int(every.calls)
					}
					if n, _ := filepath.Glob(filepath.Join(rec.Dir(), anchor.Dir, "[0-9]*.json")); len(n) != want {
						b.Fatalf("%d receipts, want %d", len(n), want)
					}
				}
				return sealed, receipts
			}
			session(true) // warm the log and the page cache for both
			session(false)
			var ours, oursAll, base time.Duration
			b.ResetTimer()
			for range b.N {
				s, all := session(true)
				ours += s
				oursAll += all
				b.StopTimer()
				s, _ = session(false)
				base += s
				b.StartTimer()
			}
			b.ReportMetric(float64(ours.Milliseconds())/float64(b.N), "sealed-ms")
			b.ReportMetric(float64(oursAll.Milliseconds())/float64(b.N), "receipts-ms")
			b.ReportMetric(float64(base.Milliseconds())/float64(b.N), "anchor-ms")
			b.ReportMetric(float64(ours)/float64(base), "x-anchor")
			b.ReportMetric(float64(oursAll)/float64(base), "receipts-x-anchor")
		})
	}
}
