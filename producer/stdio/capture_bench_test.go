package stdio

import (
	"bufio"
	"context"
	"crypto/rand"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkFirstCallCapture measures what the session's own collection
// adds to the first tools/call of a session whose client never listed
// (Config.Capture "auto"), against its anchor in the same run: the same
// first call with capture "never". Load: a fresh wrap session per
// iteration over the Go SDK server (sdkserver) with 100 tools on pages of
// 25 (4 pages), modern era (no handshake), durability strict; the two
// paths alternate. Reported: p50 first-call latency of each in µs and the
// p50 ratio auto/never.
//
//	go test -run '^$' -bench FirstCallCapture -benchtime 40x ./producer/stdio/
func BenchmarkFirstCallCapture(b *testing.B) {
	srv := mcptest.Build(b, "sdkserver")
	first := func(capture string) time.Duration {
		dir := filepath.Join(b.TempDir(), "b.trace")
		rec, err := producer.Open(dir, producer.Options{
			Clock: time.Now, Entropy: rand.Reader, Durability: transcript.DurabilityStrict,
			Producer: transcript.Producer{Name: "bench", Version: "1"},
			Server:   transcript.Server{Transport: transcript.TransportStdio, Executable: srv}, FramesCommitted: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := Run(context.Background(), Config{Command: srv, Args: []string{"-tools", "100", "-page-size", "25"},
				ClientIn: inR, ClientOut: outW, ServerErr: io.Discard, Recorder: rec, Capture: capture, Grace: -1, KillAfter: time.Second})
			outW.Close()
			done <- err
		}()
		br := bufio.NewReader(outR)
		t0 := time.Now()
		if _, err := inW.Write(benchRequest(1)); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		inW.Close()
		_, _ = io.Copy(io.Discard, br)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		rec.Close()
		return d
	}
	var auto, never []time.Duration
	for range b.N {
		never = append(never, first("never"))
		auto = append(auto, first("auto"))
	}
	slices.Sort(auto)
	slices.Sort(never)
	a50, n50 := quantile(auto, .5), quantile(never, .5)
	b.ReportMetric(us(a50), "auto-p50-µs")
	b.ReportMetric(us(n50), "never-p50-µs")
	b.ReportMetric(float64(a50)/float64(n50), "p50-x-never")
}
