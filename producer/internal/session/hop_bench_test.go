package session

import (
	"bytes"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// BenchmarkHopCPU is the CPU the proxy spends on one small tools/call round
// trip (the request and the echo server's response of BenchmarkRoundTrip),
// with no process, pipe or scheduler in the way: the session's own
// handling of the two frames (fromClient, fromServer) writing to discarding
// peers, recording as BenchmarkRoundTrip's modes do. Its anchor, timed
// call by call between the proxy's calls in the same run, is the gate alone
// reading the same two frames (mcpwire.Read), which no proxy can skip;
// hop-x-gate is the ratio (the hop includes its own gate reading).
// BenchmarkRoundTrip says what a round trip costs end to end; this says how
// much of it is the proxy's and the recorder's CPU. Both are CPU times on a
// shared machine: compare runs made at the same load.
//
//	go test -run '^$' -bench '^BenchmarkHopCPU$' -benchtime 20000x ./producer/session/
func BenchmarkHopCPU(b *testing.B) {
	for _, m := range []benchMode{
		{name: "forward-only", forward: true},
		{name: "none", durability: transcript.DurabilityNone},
		{name: "none-retain-digest", durability: transcript.DurabilityNone, retention: transcript.RetainDigest},
	} {
		b.Run(m.name, func(b *testing.B) {
			var sink Sink = nopSink{}
			if !m.forward {
				rec, err := producer.Open(b.TempDir()+"/bench.trace", producer.Options{
					Clock: time.Now, Entropy: rand.Reader, Durability: m.durability, Retention: m.retention,
					Producer: transcript.Producer{Name: "tracectl-bench", Version: "test"},
					Server:   transcript.Server{Transport: transcript.TransportStdio, Executable: "sdkserver"}, FramesCommitted: true,
				})
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					if err := rec.Close(); err != nil {
						b.Error(err)
					}
				}()
				sink = NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(rand.Reader) }, snapshot.Limits{})
			}
			s := newSession(Config{Sink: sink}.withDefaults(), Streams{ClientOut: discard{}, ServerIn: discard{}})
			// The frames are made before the clock runs: the client and the
			// server pay for them, not the proxy. The gate reads copies of
			// them, call by call between the proxy's calls, so caches, the
			// garbage collector and the machine's load fall on both alike.
			const block = 500
			reqs, resps := make([][]byte, block), make([][]byte, block)
			greqs, gresps := make([][]byte, block), make([][]byte, block)
			var id int64
			var hopNs, gateNs time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += block {
				b.StopTimer()
				n := min(block, b.N-done)
				first := id
				for i := range n {
					id++
					reqs[i], resps[i] = benchRequest(id), benchResponse(id)
					greqs[i], gresps[i] = bytes.Clone(reqs[i]), bytes.Clone(resps[i])
				}
				b.StartTimer()
				for i := range n {
					t0 := time.Now()
					if err := s.fromClient(frame{data: reqs[i]}, first+int64(i)); err != nil {
						b.Fatal(err)
					}
					if err := s.fromServer(resps[i], first+int64(i)); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, r := mcpwire.Read(greqs[i]); r != nil {
						b.Fatal(r)
					}
					if _, r := mcpwire.Read(gresps[i]); r != nil {
						b.Fatal(r)
					}
					t2 := time.Now()
					hopNs, gateNs = hopNs+t1.Sub(t0), gateNs+t2.Sub(t1)
				}
			}
			b.StopTimer()
			if len(s.inflight) != 0 {
				b.Fatalf("%d calls left in flight: a response was not matched", len(s.inflight))
			}
			if err := s.sinkError(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(hopNs)/float64(b.N)/1e3, "hop-µs/call")
			b.ReportMetric(float64(gateNs)/float64(b.N)/1e3, "gate-µs/call")
			b.ReportMetric(float64(hopNs)/float64(gateNs), "hop-x-gate")
		})
	}
}

// benchResponse is the echo server's answer to benchRequest(id), byte for
// byte as the Go SDK writes it.
func benchResponse(id int64) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tracectl-sdkserver","title":"tracectl test server (go-sdk)","version":"1.0.0"}},"content":[{"type":"text","text":"{\"text\":\"payload-0123456789\"}"}],"structuredContent":{"text":"payload-0123456789"},"resultType":"complete"}}` + "\n")
}

// discard is a peer that takes every byte.
type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }

// benchMode is how the proxy path records.
type benchMode struct {
	name       string
	durability string
	retention  string // default full
	forward    bool   // diagnostic: a Sink that records nothing (the cost of the hop alone)
}

// nopSink records nothing: only for the forward-only diagnostic.
type nopSink struct{}

func (nopSink) Attempt(Call) (AttemptRef, error)             { return ref("a"), nil }
func (nopSink) Response(AttemptRef, ResponseObs) error       { return nil }
func (nopSink) Timeout(AttemptRef) error                     { return nil }
func (nopSink) CancelSent(AttemptRef, NotificationObs) error { return nil }
func (nopSink) TransportFailure(AttemptRef, string) error    { return nil }
func (nopSink) Protocol(ProtocolObs) error                   { return nil }
func (nopSink) ListPage([]byte, []byte, bool) error          { return nil }
func (nopSink) ListChanged(NotificationObs) error            { return nil }
func (nopSink) Frame(FrameObs) error                         { return nil }
func (nopSink) ClientGone(string) error                      { return nil }

// benchMeta makes every request modern (no handshake needed).
const benchMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// benchRequest is a tools/call of about 200 bytes; the echo server's
// response carries the arguments twice plus its serverInfo (about 250).
func benchRequest(id int64) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"tools/call","params":{` + benchMeta +
		`,"name":"echo","arguments":{"text":"payload-0123456789"}}}` + "\n")
}

// ref is an attempt id for sinks that record nothing.
type ref string

func (r ref) AttemptID() string { return string(r) }
