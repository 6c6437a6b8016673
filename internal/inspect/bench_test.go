package inspect_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// BenchmarkLoad builds the model of a bundle of n answered attempts and
// compares its time with the anchor measured in the same run: the bare
// transcript.Reader over the same file (every line read, checked and
// decoded, nothing kept), the floor of any reader of the transcript. It
// reports the ratio (x-reader).
//
//	go test ./internal/inspect -run XXX -bench Load -benchtime 5x
func BenchmarkLoad(b *testing.B) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	dir := filepath.Join(b.TempDir(), "run.trace")
	c := &stepClock{t: t0}
	r, err := producer.Open(dir, producer.Options{Clock: c.now, Entropy: zeroEntropy{}, Durability: transcript.DurabilityNone,
		Producer: transcript.Producer{Name: "bench", Version: "1"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess, Name: "srv"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		h, err := r.Attempt(ctx, producer.Call{Line: fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"i":%d}}}`+"\n", i, i)})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Response(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`+"\n", i)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := r.Seal(ctx, nil); err != nil {
		b.Fatal(err)
	}
	fsys := verify.DirFS(dir)
	anchor := func() time.Duration {
		start := time.Now()
		f, err := os.Open(filepath.Join(dir, transcript.TranscriptFile))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		tr := transcript.NewReader(f)
		for {
			if _, _, err := tr.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var ours, floor time.Duration
	for b.Loop() {
		floor += anchor() // interleaved, so both see the same machine load
		start := time.Now()
		m, err := inspect.Load(ctx, fsys, inspect.Options{})
		ours += time.Since(start)
		if err != nil || len(m.Attempts) != n {
			b.Fatalf("%d attempts: %v", len(m.Attempts), err)
		}
	}
	b.ReportMetric(float64(ours)/float64(floor), "x-reader")
	b.Logf("%d attempts: model %v, reader %v per load", n, (ours / time.Duration(b.N)).Round(time.Microsecond), (floor / time.Duration(b.N)).Round(time.Microsecond))
}
