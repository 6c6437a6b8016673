package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/internal/tlog"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkAnchoring measures what anchoring costs a recording: one op is
// a whole 1,000-call session (attempt and response per call, strict
// durability, checkpoints every 100 calls, sealed and signed) anchored in
// a real Tessera log on loopback (the first checkpoint, every checkpoint,
// the record, whose seal waits for its receipt), against the anchor in the
// same run: the same session with the same checkpoints, not anchored.
// Sessions alternate so both see the same load. x-anchor = our wall time
// / the anchor's; the goal is at most 1.05.
func BenchmarkAnchoring(b *testing.B) {
	const calls = 1000
	dir := b.TempDir()
	ctx := context.Background()
	l, err := tlog.Open(ctx, tlog.Config{Dir: filepath.Join(dir, "log"), Origin: "bench.tracectl/log"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(ctx)
	hs := httptest.NewServer(l.Handler())
	defer hs.Close()
	keys, err := anchor.ParseKeys(l.Verifier, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	c := &submit.Client{URL: hs.URL, Keys: keys}
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
	every := checkpointEvery{calls: 100}
	runs := 0
	session := func(anchored bool) time.Duration {
		runs++
		t0 := time.Now()
		rec, err := producer.Open(filepath.Join(dir, fmt.Sprintf("run-%d.trace", runs)), producer.Options{
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
			if sa, err = startAnchoring(ctx, rec, anchorOptions{url: hs.URL}, c, signer, recordIdentity{}, every, io.Discard); err != nil {
				b.Fatal(err)
			}
			rs = sa
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
		sa.close()
		d := time.Since(t0)
		if anchored {
			if _, err := os.Stat(filepath.Join(rec.Dir(), anchor.RecordFile)); err != nil {
				b.Fatal("the record was not anchored")
			}
		}
		return d
	}
	session(true) // warm the log and the page cache for both
	session(false)
	var ours, base time.Duration
	b.ResetTimer()
	for range b.N {
		ours += session(true)
		b.StopTimer()
		base += session(false)
		b.StartTimer()
	}
	b.ReportMetric(float64(ours.Milliseconds())/float64(b.N), "ms/session")
	b.ReportMetric(float64(base.Milliseconds())/float64(b.N), "anchor-ms/session")
	b.ReportMetric(float64(ours)/float64(base), "x-anchor")
}
