package mcpwire

import (
	"bytes"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
)

// BenchmarkRead measures the gate on the frames of a small tools/call round
// trip (the request and the Go SDK echo server's response that
// producer/stdio's BenchmarkRoundTrip exchanges) against its anchor in the
// same run: canon.Parse of the same bytes, the strict parse no reading of a
// frame can skip, timed call by call. Reported: ns per frame of each, and the ratio read-x-parse
// (what the gate's own rules cost on top of the parse).
//
//	go test -run '^$' -bench '^BenchmarkRead$' ./mcpwire/
func BenchmarkRead(b *testing.B) {
	frames := map[string]string{
		"request":  `{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"text":"payload-0123456789"}}}` + "\n",
		"response": `{"jsonrpc":"2.0","id":12345,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tracectl-sdkserver","title":"tracectl test server (go-sdk)","version":"1.0.0"}},"content":[{"type":"text","text":"{\"text\":\"payload-0123456789\"}"}],"structuredContent":{"text":"payload-0123456789"},"resultType":"complete"}}` + "\n",
	}
	for _, name := range []string{"request", "response"} {
		line := []byte(frames[name])
		body, _ := SplitTerminator(line)
		b.Run(name, func(b *testing.B) {
			// Timed call by call, the two alternating on copies of the same
			// bytes, so caches, the garbage collector and the machine's load
			// fall on both alike.
			other := bytes.Clone(body)
			var readNs, parseNs int64
			b.ReportAllocs()
			for b.Loop() {
				t0 := nanotime()
				if _, r := Read(line); r != nil {
					b.Fatal(r)
				}
				t1 := nanotime()
				if _, err := canon.Parse(other, canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxFrameBytes, MaxDepth: MaxFrameDepth}}); err != nil {
					b.Fatal(err)
				}
				readNs, parseNs = readNs+t1-t0, parseNs+nanotime()-t1
			}
			b.ReportMetric(float64(readNs)/float64(b.N), "read-ns/frame")
			b.ReportMetric(float64(parseNs)/float64(b.N), "parse-ns/frame")
			b.ReportMetric(float64(readNs)/float64(parseNs), "read-x-parse")
		})
	}
}

func nanotime() int64 { return time.Now().UnixNano() }
