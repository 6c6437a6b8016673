package producer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkRecord measures recording throughput (one op = one attempt and
// its response) with the journal on the machine's disk (b.TempDir), and
// compares it in the same run with its anchor over the same number of
// lines of the same average size:
//
//   - strict (1 and 32 callers): a raw write+fsync loop, two per call — the
//     physical limit of a single caller that makes each line durable;
//   - batch and none: plain appends without fsync.
//
// Ours and the anchor alternate in phases so both see the same load.
// Reported: calls/s, fsyncs/call, and x-anchor = our time / anchor time
// (below 1 is faster than the anchor, which group commit allows with many
// callers). Ours includes everything a call costs: reading the request and
// response (JSON parse, canonical arguments digest), SHA-256 of the
// payloads, encoding two lines, the journal, and with full retention
// (unless the name says digest) appending the two payloads to the pack.
// fsyncs/call counts the journal's and the pack's. close-µs/call reports
// Close (the final fsyncs), outside the calls.
func BenchmarkRecord(b *testing.B) {
	cases := []struct {
		name       string
		durability string
		retention  string
		callers    int
		anchorSync bool
	}{
		{"strict-1", transcript.DurabilityStrict, transcript.RetainFull, 1, true},
		{"strict-1-digest", transcript.DurabilityStrict, transcript.RetainDigest, 1, true},
		{"strict-32", transcript.DurabilityStrict, transcript.RetainFull, 32, true},
		{"batch-1", transcript.DurabilityBatch, transcript.RetainFull, 1, false},
		{"none-1", transcript.DurabilityNone, transcript.RetainFull, 1, false},
		{"none-1-digest", transcript.DurabilityNone, transcript.RetainDigest, 1, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			tmp := b.TempDir()
			r, err := Open(filepath.Join(tmp, "run.trace"), Options{
				Clock: time.Now, Entropy: zeros{}, Durability: c.durability, Retention: c.retention,
				Producer: transcript.Producer{Name: "bench", Version: "v0"},
				Server:   transcript.Server{Transport: transcript.TransportInProcess},
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			anchor := openAnchor(b, filepath.Join(tmp, "anchor"))
			defer anchor.Close()
			line := anchorLine(r)
			start0 := r.Stats()
			// Ours and the anchor alternate in phases of at least 8 calls, so
			// both see the same machine load (a shared machine is noisy).
			phase := max(8, c.callers)
			var ours, anch time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(phase, b.N-done)
				// The messages are built before the clock starts: only recording is timed.
				reqs, resps := make([][]byte, n), make([][]byte, n)
				for i := range reqs {
					id := fmt.Sprint(done + i + 1)
					reqs[i] = call(id, "search", `{"query":"mcp transcript `+id+`","limit":10}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)
					resps[i] = result(id, `,"resultType":"complete","structuredContent":{"hits":3,"id":"`+id+`"}`)
				}
				t0 := time.Now()
				var wg sync.WaitGroup
				if c.callers == 1 {
					// One caller records on this goroutine: no spawn or
					// wake-up per phase is timed as the recorder's.
					for i := range n {
						h, err := r.Attempt(ctx, Call{Line: reqs[i]})
						if err != nil {
							b.Fatal(err)
						}
						if err := h.Response(resps[i]); err != nil {
							b.Fatal(err)
						}
					}
				}
				for w := 0; w < c.callers && c.callers > 1; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < n; i += c.callers {
							h, err := r.Attempt(ctx, Call{Line: reqs[i]})
							if err != nil {
								b.Error(err)
								return
							}
							if err := h.Response(resps[i]); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				ours += time.Since(t0)
				b.StopTimer() // ns/op is ours alone
				t0 = time.Now()
				anchorWrite(b, anchor, line, 2*n, c.anchorSync)
				anch += time.Since(t0)
				b.StartTimer()
				done += n
			}
			b.StopTimer()
			st := r.Stats()
			t0 := time.Now()
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(b.N), "close-µs/call")
			b.ReportMetric(float64(b.N)/ours.Seconds(), "calls/s")
			b.ReportMetric(float64(st.Fsyncs+st.PackFsyncs-start0.Fsyncs-start0.PackFsyncs)/float64(b.N), "fsyncs/call")
			b.ReportMetric(float64(ours)/float64(anch), "x-anchor")
			b.ReportMetric(float64(len(line)), "B/line")
		})
	}
}

func openAnchor(b *testing.B, path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// anchorLine is a line of the journal's average line size so far (the
// header and a first call, recorded before timing starts).
func anchorLine(r *Recorder) []byte {
	h, _ := r.Attempt(context.Background(), Call{Line: call("0", "search", `{"query":"mcp transcript 0","limit":10}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)})
	h.Response(result("0", `,"resultType":"complete","structuredContent":{"hits":3,"id":"0"}`))
	fi, _ := r.fsys.Stat(filepath.Join(r.dir, transcript.TranscriptFile))
	n := int(fi.Size()-int64(len(headerLine(r)))) / 2
	line := make([]byte, n)
	for i := range line {
		line[i] = 'x'
	}
	line[n-1] = '\n'
	return line
}

func headerLine(r *Recorder) []byte {
	f, _ := r.fsys.OpenFile(filepath.Join(r.dir, transcript.TranscriptFile), os.O_RDONLY, 0)
	defer f.Close()
	buf := make([]byte, transcript.MaxLineBytes)
	n, _ := f.Read(buf)
	i := 0
	for i < n && buf[i] != '\n' {
		i++
	}
	return buf[:i+1]
}

// anchorWrite appends n copies of line, fsyncing each when sync is set.
func anchorWrite(b *testing.B, f *os.File, line []byte, n int, sync bool) {
	for i := 0; i < n; i++ {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkHeapPerCall records b.N calls (durability none, digest-only
// retention: no payload I/O) and reports the live heap they leave behind
// once each call's handle is dropped: the recorder keeps what open calls
// and retry inference need, not every attempt ever made. Run it with a
// large count (-benchtime 1000000x) for the 1,000,000-call figure.
func BenchmarkHeapPerCall(b *testing.B) {
	r, err := Open(filepath.Join(b.TempDir(), "run.trace"), Options{
		Clock: time.Now, Entropy: zeros{}, Durability: transcript.DurabilityNone, Retention: transcript.RetainDigest,
		Producer: transcript.Producer{Name: "bench", Version: "v0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := strconv.Itoa(i)
		h, err := r.Attempt(ctx, Call{Line: call(id, "search", `{"query":"q `+id+`"}`, `{}`)})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Response(result(id, `,"resultType":"complete"`)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	b.ReportMetric(float64(grown)/float64(b.N), "heap-B/call")
	b.ReportMetric(float64(grown)/(1<<20), "heap-MiB")
}

// BenchmarkSeal records b.N calls (durability none, full retention: every
// request and response kept) and then seals the bundle, and reports the
// seal's time against the recording's own (seal-x-record): sealing reads
// the journal back to compute the commitment and makes the journal and the
// pack durable; it moves no payload. Run it with -benchtime 100000x for the
// 100,000-call figure.
func BenchmarkSeal(b *testing.B) {
	r, err := Open(filepath.Join(b.TempDir(), "run.trace"), Options{
		Clock: time.Now, Entropy: zeros{}, Durability: transcript.DurabilityNone, Retention: transcript.RetainFull,
		Producer: transcript.Producer{Name: "bench", Version: "v0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	reqs, resps := make([][]byte, b.N), make([][]byte, b.N)
	for i := range reqs {
		id := strconv.Itoa(i + 1)
		reqs[i] = call(id, "search", `{"query":"mcp transcript `+id+`","limit":10}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)
		resps[i] = result(id, `,"resultType":"complete","structuredContent":{"hits":3,"id":"`+id+`"}`)
	}
	b.ResetTimer()
	t0 := time.Now()
	for i := range reqs {
		h, err := r.Attempt(ctx, Call{Line: reqs[i]})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Response(resps[i]); err != nil {
			b.Fatal(err)
		}
	}
	record := time.Since(t0)
	t0 = time.Now()
	if _, err := r.Seal(ctx, nil); err != nil {
		b.Fatal(err)
	}
	seal := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(record.Seconds()*1e3, "record-ms")
	b.ReportMetric(seal.Seconds()*1e3, "seal-ms")
	b.ReportMetric(float64(seal)/float64(record), "seal-x-record")
}
