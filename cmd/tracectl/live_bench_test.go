//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkLiveExport: what live OTLP export (wrap/proxy --otlp-endpoint)
// costs the recording, by the state of the collector. One op is one call
// recorded (attempt and response, durability none, full retention) on a
// recorder whose lines are tapped for live spans, against the same calls
// on a recorder with no tap (the anchor), in alternating phases of 64
// calls so both see the same load. Collectors: up (an OTLP/HTTP receiver
// that answers 200), refused (a closed port), hung (accepts, never
// answers). Reports x-untapped = tapped time / untapped time, and
// shutdown-ms: how long the pipeline's shutdown took at the end (what a
// session's end waits for). The recorder offers each line to the tap
// without waiting, the follower takes lines every liveEvery instead of
// being woken per line, and spans are sent by the SDK's batcher on its own
// goroutine (live.go): the recording should not feel the collector.
// Before the follower took lines in batches it did (1.25x to 2.0x), and a
// dead collector held the end for tens of seconds (CHANGELOG).
func BenchmarkLiveExport(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server sees the client go
		<-r.Context().Done()
	}))
	defer hung.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct{ name, endpoint string }{{"up", up.URL}, {"refused", refused}, {"hung", hung.URL}} {
		b.Run(c.name, func(b *testing.B) {
			l, err := newLiveOTLP(context.Background(), c.endpoint, signalSet{traces: true, metrics: true}, 2*time.Second, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			open := func(name string, tapped bool) (*producer.Recorder, func()) {
				opts := producer.Options{Clock: time.Now, Entropy: rand.Reader, Durability: transcript.DurabilityNone,
					Producer: transcript.Producer{Name: "bench", Version: "0"}, Server: transcript.Server{Transport: transcript.TransportInProcess}}
				untap := func() {}
				if tapped {
					untap = l.tap(&opts)
				}
				r, err := producer.Open(filepath.Join(b.TempDir(), name), opts)
				if err != nil {
					b.Fatal(err)
				}
				return r, untap
			}
			tr, untap := open("tapped.trace", true)
			pr, _ := open("plain.trace", false)
			calls := func(r *producer.Recorder, from, n int) time.Duration {
				t0 := time.Now()
				for i := from; i < from+n; i++ {
					h, err := r.Attempt(context.Background(), producer.Call{Line: []byte(modernCall(i, "echo", fmt.Sprintf(`{"n":%d}`, i)))})
					if err != nil {
						b.Fatal(err)
					}
					if err := h.Response([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n", i))); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t0)
			}
			var tapped, plain time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; done += 64 {
				n := min(64, b.N-done)
				if done/64%2 == 0 {
					tapped += calls(tr, done+1, n)
					plain += calls(pr, done+1, n)
				} else {
					plain += calls(pr, done+1, n)
					tapped += calls(tr, done+1, n)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(tapped)/float64(plain), "x-untapped")
			b.ReportMetric(float64(tapped.Microseconds())/float64(b.N), "tapped-µs/call")
			b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "untapped-µs/call")
			for _, r := range []*producer.Recorder{tr, pr} {
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			}
			untap()
			t0 := time.Now()
			_ = l.shutdown(context.Background())
			b.ReportMetric(float64(time.Since(t0).Milliseconds()), "shutdown-ms")
		})
	}
}
