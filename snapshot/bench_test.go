package snapshot_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/snapshot"
)

// BenchmarkCapture10k compares a full capture of 10,000 tools over 100 pages
// (Go SDK test server: start, handshake, every page, shutdown) with the
// anchor: the Go SDK client's own ListTools loop over the same server binary
// (start, Connect, every page, Close), in the same run. It reports
// ratio = capture time / SDK time; the target is 1.5 or less.
func BenchmarkCapture10k(b *testing.B) {
	bin := mcptest.Build(b, "sdkserver")
	// 10,000 generated tools plus the server's own 7 make 101 pages of 100;
	// 9,993 generated tools make exactly 100 pages of 100.
	args := []string{"-tools", "9993", "-page-size", "100"}
	ctx := context.Background()

	sdk := func(b *testing.B) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, args...)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, err := range cs.Tools(ctx, nil) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := cs.Close(); err != nil {
			b.Logf("close: %v", err)
		}
		if n != 10000 {
			b.Fatalf("SDK listed %d tools", n)
		}
	}
	capture := func(b *testing.B) {
		s, err := snapshot.Capture(ctx, append([]string{bin}, args...), snapshot.CaptureOptions{CaptureID: "cap-bench", Protocol: snapshot.ProtocolAuto})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Manifest.Tools) != 10000 || len(s.Manifest.Pages) != 100 || !s.Manifest.Complete {
			b.Fatalf("captured %d tools over %d pages, complete %v", len(s.Manifest.Tools), len(s.Manifest.Pages), s.Manifest.Complete)
		}
	}
	// Interleave the two so machine load falls on both alike.
	var tSDK, tCap time.Duration
	for b.Loop() {
		t0 := time.Now()
		sdk(b)
		t1 := time.Now()
		capture(b)
		tCap += time.Since(t1)
		tSDK += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tCap.Milliseconds())/n, "capture-ms/op")
	b.ReportMetric(float64(tSDK.Milliseconds())/n, "sdk-ms/op")
	b.ReportMetric(float64(tCap)/float64(tSDK), "ratio")
}
