package httpproxy

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkCall times a small tools/call (echo, JSON response, stateless
// Go SDK server) sent directly, through a plain httputil.ReverseProxy (the
// anchor) and through the recording proxy, in the same run, at 1, 32 and
// 256 clients in flight, for each durability. It reports the recording
// proxy's p50 and p99 and their ratios to the ReverseProxy's, the p50
// ratio to the direct call, the journal and pack fsyncs per call, and the
// process's peak RSS during the recording proxy's run and its ratio to the
// peak during the ReverseProxy's (VmHWM, reset between runs through
// /proc/self/clear_refs; linux only, else not reported). The load is b.N
// calls per path, all to one stateless bundle, run in four blocks whose
// order turns so a change in the machine's load falls on every path.
//
//	go test -run '^$' -bench 'Call/' -benchtime 2000x ./producer/httpproxy/
func BenchmarkCall(b *testing.B) {
	server, _ := sdkServer(0)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	floor := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	defer floor.Close()
	for _, dur := range []string{transcript.DurabilityNone, transcript.DurabilityBatch, transcript.DurabilityStrict} {
		for _, inflight := range []int{1, 32, 256} {
			b.Run(fmt.Sprintf("%s/inflight=%d", dur, inflight), func(b *testing.B) {
				dir := b.TempDir()
				var n atomic.Int64
				var recs []*producer.Recorder
				var rmu sync.Mutex
				srv, _ := producer.HTTPServer(u, "")
				p, err := New(Config{
					Upstream: u,
					Open: func(kind string) (*producer.Recorder, error) {
						r, err := producer.Open(filepath.Join(dir, fmt.Sprint(n.Add(1))), producer.Options{
							Clock: time.Now, Entropy: rand.Reader, Producer: transcript.Producer{Name: "bench", Version: "0"},
							Server: srv, FramesCommitted: true, Durability: dur,
						})
						if err == nil {
							rmu.Lock()
							recs = append(recs, r)
							rmu.Unlock()
						}
						return r, err
					},
					Seal:      func(r *producer.Recorder) error { _, err := r.Seal(context.Background(), nil); return err },
					CaptureID: func() (string, error) { return snapshot.NewCaptureID(rand.Reader) },
					Capture:   "never",
				})
				if err != nil {
					b.Fatal(err)
				}
				rec := httptest.NewServer(p)
				defer rec.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}
				var peak [2]int64 // VmHWM in KiB during the ReverseProxy's blocks and the recording proxy's
				// run makes n calls to target with inflight workers and
				// appends each latency to lat.
				run := func(target string, n int, lat *[]time.Duration) {
					var mu sync.Mutex
					var wg sync.WaitGroup
					var next atomic.Int64
					for range inflight {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for next.Add(1) <= int64(n) {
								t0 := time.Now()
								if err := benchPost(client, target); err != nil {
									b.Error(err)
									return
								}
								d := time.Since(t0)
								mu.Lock()
								*lat = append(*lat, d)
								mu.Unlock()
							}
						}()
					}
					wg.Wait()
				}
				fsyncCount := func() (n int64) {
					rmu.Lock()
					defer rmu.Unlock()
					for _, r := range recs {
						st := r.Stats()
						n += st.Fsyncs + st.PackFsyncs
					}
					return n
				}
				// The three paths run in blocks, in an order that turns
				// each block (direct, ReverseProxy, proxy; then proxy,
				// ReverseProxy, direct; ...), so a change in the
				// machine's load during the run falls on all of them.
				const blocks = 4
				var lat [3][]time.Duration
				targets := [3]string{up.URL, floor.URL, rec.URL}
				var fsyncs int64
				b.ResetTimer()
				for blk := range blocks {
					n := b.N/blocks + min(1, max(0, b.N%blocks-blk))
					for k := range 3 {
						j := k
						if blk%2 == 1 {
							j = 2 - k
						}
						resetPeakRSS()
						f0 := fsyncCount()
						run(targets[j], n, &lat[j])
						if j > 0 {
							peak[j-1] = max(peak[j-1], peakRSS())
						}
						if j == 2 {
							fsyncs += fsyncCount() - f0
						}
					}
				}
				b.StopTimer()
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
				q := func(l []time.Duration, f float64) time.Duration {
					if len(l) == 0 {
						return 0
					}
					slices.Sort(l)
					return l[int(float64(len(l))*f)]
				}
				direct := q(lat[0], .5)
				plain, plain99 := q(lat[1], .5), q(lat[1], .99)
				traced, traced99 := q(lat[2], .5), q(lat[2], .99)
				if direct > 0 && plain > 0 {
					b.ReportMetric(float64(traced)/float64(direct), "p50-x-direct")
					b.ReportMetric(float64(traced)/float64(plain), "p50-x-reverseproxy")
					b.ReportMetric(float64(traced99)/float64(plain99), "p99-x-reverseproxy")
					b.ReportMetric(float64(traced.Microseconds()), "p50-us")
					b.ReportMetric(float64(traced99.Microseconds()), "p99-us")
					b.ReportMetric(float64(fsyncs)/float64(b.N), "fsyncs/call")
					if peak[0] > 0 && peak[1] > 0 {
						b.ReportMetric(float64(peak[1])/1024, "peak-rss-MiB")
						b.ReportMetric(float64(peak[1])/float64(peak[0]), "peak-rss-x-reverseproxy")
					}
				}
			})
		}
	}
}

func benchPost(c *http.Client, target string) error {
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(callBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}

// BenchmarkFirstCallCapture measures what the proxy's own collection adds
// to the first tools/call of a stateless client that never listed
// (Config.Capture "auto"), against its anchor in the same run: the same
// first call with capture "never". Load: a fresh proxy (so a fresh
// stateless bundle) per iteration in front of a stateless Go SDK server
// with 100 tools on pages of 25 (4 page requests, JSON responses),
// durability strict; the two paths alternate. Reported: p50 first-call
// latency of each in µs and the p50 ratio auto/never.
//
//	go test -run '^$' -bench FirstCallCapture -benchtime 40x ./producer/httpproxy/
func BenchmarkFirstCallCapture(b *testing.B) {
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{PageSize: 25})
	for i := range 100 {
		name := "echo"
		if i > 0 {
			name = fmt.Sprintf("t%03d", i)
		}
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: "a tool of the benchmark's list"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	}
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	srv, _ := producer.HTTPServer(u, "")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	first := func(capture string) time.Duration {
		dir := b.TempDir()
		p, err := New(Config{
			Upstream: u, Capture: capture,
			Open: func(kind string) (*producer.Recorder, error) {
				return producer.Open(filepath.Join(dir, kind), producer.Options{
					Clock: time.Now, Entropy: rand.Reader, Producer: transcript.Producer{Name: "bench", Version: "0"},
					Server: srv, FramesCommitted: true, Durability: transcript.DurabilityStrict,
				})
			},
			Seal:      func(r *producer.Recorder) error { _, err := r.Seal(context.Background(), nil); return err },
			CaptureID: func() (string, error) { return snapshot.NewCaptureID(rand.Reader) },
		})
		if err != nil {
			b.Fatal(err)
		}
		rec := httptest.NewServer(p)
		t0 := time.Now()
		if err := benchPost(client, rec.URL); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		rec.Close()
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	var auto, never []time.Duration
	for range b.N {
		never = append(never, first("never"))
		auto = append(auto, first("auto"))
	}
	slices.Sort(auto)
	slices.Sort(never)
	a50, n50 := auto[len(auto)/2], never[len(never)/2]
	b.ReportMetric(float64(a50.Microseconds()), "auto-p50-µs")
	b.ReportMetric(float64(n50.Microseconds()), "never-p50-µs")
	b.ReportMetric(float64(a50)/float64(n50), "p50-x-never")
}

// resetPeakRSS resets the process's VmHWM to its current RSS (linux:
// "5" to /proc/self/clear_refs); elsewhere it does nothing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's VmHWM in KiB, or 0 where /proc is not there.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
