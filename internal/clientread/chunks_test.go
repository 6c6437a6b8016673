package clientread

import (
	"testing"
)

// The bytes a client reads arrive in chunks the network chooses, not in
// the events or lines the proxy wrote: a CR and its LF, an event's blank
// line, or a UTF-8 sequence may straddle two chunks. The TypeScript SDK
// reads a body through TextDecoderStream and eventsource-parser, and stdio
// through ReadBuffer, chunk by chunk; these targets hold that however the
// delivered bytes are cut, it reads exactly the messages committed.

// cutsFrom turns a fuzzer's spec into ascending cut offsets in a stream of
// n bytes: chunk lengths cycle through spec, each byte b a chunk of b%64+1
// bytes; an empty spec cuts after every byte.
func cutsFrom(n int, spec []byte) []int {
	var cuts []int
	for at, i := 0, 0; ; i++ {
		step := 1
		if len(spec) > 0 {
			step = int(spec[i%len(spec)])%64 + 1
		}
		at += step
		if at >= n {
			return cuts
		}
		cuts = append(cuts, at)
	}
}

// chunkSpecs are the cuttings every seed is tried with: a byte at a time
// (every straddle there is), two and three bytes (a CRLF and a UTF-8
// sequence cut in the middle at every alignment), and uneven runs.
var chunkSpecs = [][]byte{{}, {1}, {2}, {0, 2}, {6, 0, 30}}

// FuzzDeliveredSSEChunked: the SSE events relaySSE delivers, handed to the
// TypeScript SDK's streamable client in chunks, are read as exactly the
// messages committed.
func FuzzDeliveredSSEChunked(f *testing.F) {
	for _, s := range sseSeeds() {
		for _, c := range chunkSpecs {
			f.Add([]byte(s), c)
		}
	}
	node, why := sharedNode(f)
	f.Fuzz(func(t *testing.T, stream, spec []byte) {
		if node == nil {
			t.Skip("TypeScript SDK reader not compared: " + why)
		}
		delivered, committed := deliveredSSE(stream)
		want := committedValues(t, committed)
		r, err := node.SSEChunks(delivered, cutsFrom(len(delivered), spec))
		if err != nil {
			t.Fatalf("TypeScript SDK reader: %v", err)
		}
		ts := reading{reader: "TypeScript SDK streamable client, body in chunks (eventsource-parser + JSON.parse + JSONRPCMessageSchema)", js: true}
		for _, m := range r.Messages {
			ts.msgs = append(ts.msgs, tsMsg(m))
		}
		if r.Err != "" {
			ts.stop = "the stream failed: " + oneLine(r.Err)
		}
		report(t, "SSE stream in chunks", stream, delivered, committed, want, []reading{ts})
	})
}

// FuzzDeliveredStdioChunked: the lines the stdio session delivers, arriving
// at the TypeScript SDK's stdio client in chunks (one 'data' event each),
// are read as exactly the messages committed.
func FuzzDeliveredStdioChunked(f *testing.F) {
	for _, s := range stdioSeeds() {
		for _, c := range chunkSpecs {
			f.Add([]byte(s), c)
		}
	}
	node, why := sharedNode(f)
	f.Fuzz(func(t *testing.T, stream, spec []byte) {
		if node == nil {
			t.Skip("TypeScript SDK reader not compared: " + why)
		}
		delivered, committed := deliveredStdio(stream)
		want := committedValues(t, committed)
		msgs, err := node.StdioChunks(delivered, cutsFrom(len(delivered), spec))
		if err != nil {
			t.Fatalf("TypeScript SDK reader: %v", err)
		}
		ts := reading{reader: "TypeScript SDK stdio client, stream in chunks (ReadBuffer + JSON.parse + JSONRPCMessageSchema)", js: true}
		for _, m := range msgs {
			ts.msgs = append(ts.msgs, tsMsg(m))
		}
		report(t, "stdio stream in chunks", stream, delivered, committed, want, []reading{ts})
	})
}

// The cuttings themselves: a test that fed the reader one chunk would
// prove nothing about chunks.
func TestCutsFrom(t *testing.T) {
	for _, tc := range []struct {
		n    int
		spec []byte
		want []int
	}{
		{4, nil, []int{1, 2, 3}},
		{7, []byte{1}, []int{2, 4, 6}},
		{10, []byte{0, 2}, []int{1, 4, 5, 8, 9}},
		{1, nil, nil},
	} {
		got := cutsFrom(tc.n, tc.spec)
		if len(got) != len(tc.want) {
			t.Fatalf("cutsFrom(%d, %v) = %v, want %v", tc.n, tc.spec, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("cutsFrom(%d, %v) = %v, want %v", tc.n, tc.spec, got, tc.want)
			}
		}
	}
}

// The harness really cuts: a CRLF event end straddling a cut, and a
// multi-byte character cut in the middle, still read as one message each,
// and the JavaScript side saw more than one chunk (a lone CR at a chunk's
// end is the case eventsource-parser must carry over).
func TestChunkedReadersStraddle(t *testing.T) {
	node := testNode(t)
	body := `{"jsonrpc":"2.0","id":1,"result":{"s":"é€😀"}}`
	stream := []byte("data: " + body + "\r\n\r\n")
	for _, cuts := range [][]int{cutsFrom(len(stream), nil), {len(stream) - 3}, {len(stream) - 1}, {8, 9}} {
		r, err := node.SSEChunks(stream, cuts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Chunks != len(cuts)+1 {
			t.Fatalf("cuts %v: the reader got %d chunks, want %d", cuts, r.Chunks, len(cuts)+1)
		}
		if len(r.Messages) != 1 || !r.Messages[0].OK {
			t.Fatalf("cuts %v: read %+v, want the one message", cuts, r)
		}
		if len(r.Events) != 1 || r.Events[0].Data != body {
			t.Fatalf("cuts %v: events %+v, want one with the body", cuts, r.Events)
		}
	}
	line := []byte(body + "\r\n" + body + "\n")
	msgs, err := node.StdioChunks(line, cutsFrom(len(line), nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || !msgs[0].OK || !msgs[1].OK {
		t.Fatalf("stdio a byte at a time: %+v, want two messages", msgs)
	}
}
