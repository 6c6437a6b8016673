package clientread

// The differential property, end to end: whatever bytes an upstream server
// sends, the bytes tracectl delivers to the client are read by every real
// client reader as exactly the messages tracectl committed, no more, no
// fewer and no other. Each target computes what the recorder delivers and
// commits with mcpwire's own readers (the gate, mcpwire.Read, and
// mcpwire.EventReader), the way the session decides (producer/session,
// observeServer: a stdio line is delivered only if the gate reads it;
// producer/httpproxy, message and relaySSE: an SSE event only if the
// EventReader does not refuse it and the gate reads its data, a JSON body
// only if the gate reads it), then hands the delivered bytes to the readers
// of this package. Mediation after the gate (id twins, second answers) is
// not modelled: a finding here is one the gate alone lets through.
//
// A failure names its class:
//   - DIFFERENT: some reader acts on a message the gate did not commit (a
//     different value, an extra message, or the same member read as another
//     value, such as an id truncated or a request read as a notification).
//   - FEWER: no reader acts on anything uncommitted, but some reader acts on
//     less: it fails the connection, skips or refuses a committed message,
//     or drops members of it.
// Both fail the target: the gate's contract is that every client reads
// exactly what was committed.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
)

// hostileBodies are one JSON text of each hostile class, as an SSE event's
// data, a JSON body or a stdio line's body (the gate reads all three
// alike). Well-formed messages of each kind are among them, so the fuzzer
// starts from bytes that are delivered.
var hostileBodies = []string{
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"m":"hi"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"no","data":{"x":[1,"2",null,true]}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"result":{"x":1}}`,                    // repeated "result"
	`{"jsonrpc":"2.0","id":1,"result":{},"RESULT":{"x":1}}`,                    // "result" and "RESULT"
	`[{"jsonrpc":"2.0","id":1,"result":{}}]`,                                   // a JSON array (batch)
	`{"jsonrpc":"2.0","id":"1","result":{}}`,                                   // string twin of id 1
	`{"jsonrpc":"2.0","id":1.0,"result":{}}`,                                   // id 1.0
	`{"jsonrpc":"2.0","id":1.5,"result":{}}`,                                   // id 1.5
	`{"jsonrpc":"2.0","id":1e20,"result":{}}`,                                  // an id past int64
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,                              // a request with id null
	` {"jsonrpc":"2.0","id":1,"result":{}}`,                                    // leading whitespace
	`{"jsonrpc":"2.0","id":1,"result":{}} `,                                    // trailing whitespace
	"\t{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\t",                         // tabs around
	`{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0","id":2,"result":{}}`, // two JSON values
	"{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":{\"s\":\"\xff\"}}",       // invalid UTF-8 in a string
	`{"jsonrpc":"2.0","method":"a","params":{"s":"\ud800"}}`,                   // lone surrogate escape
	"\u00a0{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\u00a0",                 // NBSP around
	"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",                 // BOM before the JSON text
	`{"jsonrpc":"2.0","id":1,"result":{},"x":1}`,                               // an unknown member
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","x":1}}`,          // an unknown member in error
	`{"jsonrpc":"2.0","method":"a","params":{"__proto__":{"x":1}}}`,            // a member JavaScript treats specially
	`{"jsonrpc":"2.0","method":"a","params":{"n":1e400,"z":-0}}`,               // numbers past float64, negative zero
	`{"jsonrpc":"2.0","id":0,"error":{}}`,                                      // an error without code and message
}

// sseFramings are one stream of each hostile SSE class; {A} and {B} are
// well-formed messages (see expand).
var sseFramings = []string{
	"data: {A}\n\n",
	"data: {A}\r\n\r\n",
	"event: message\nid: 7\nretry: 10\n: hi\ndata:{A}\n\n",
	": keepalive\n\nid: 3\n\ndata: {A}\n\ndata: {B}\n\n",
	"\xEF\xBB\xBFdata: {A}\n\n",        // BOM before the first event
	"\xEF\xBB\xBF\ndata: {A}\n\n",      // BOM, then a blank line
	"data: {A}\r\rdata: {B}\r\r",       // lone CR line ends
	"data: {A}\r\ndata: {B}\r\r\n\r\n", // CR before CRLF
	"data: {A}\r\r\n\r\n",              // CR before CRLF at the end of the data
	"data: {A}\n\rdata: {B}\n\n",       // a lone CR line
	"event: other\ndata: {A}\n\n",      // event: other
	"event:  message\ndata: {A}\n\n",   // event:  message
	"event: message \ndata: {A}\n\n",   // a space after the name
	"event: message\nevent: message\ndata: {A}\n\n",
	"data: {A}\ndata: {B}\n\n",  // two data lines
	"data\ndata: {A}\n\n",       // a line without a colon
	"foo\ndata: {A}\n\n",        // an unknown line without a colon
	"Data: {B}\ndata: {A}\n\n",  // an unknown field
	"data: {A}\n\ndata: {B}\n",  // final event without a blank line
	"data: {A}\n\ndata: {B}",    // final event without a line end
	"data: {A}\n\n\r",           // a final CR
	"data:  {A} \n\n",           // spaces around the data
	"data: \u00a0{A}\u00a0\n\n", // NBSP around the data
	"data: {A}\v\n\n",           // a vertical tab after the data
	"id: x\x00y\ndata: {A}\n\n", // NUL in an id
	"id\ndata: {A}\n\n",         // an id line without a colon
	" data: {A}\n\n",            // a space before the field name
}

// stdioFramings are one stream of each hostile stdio class.
var stdioFramings = []string{
	"{A}\n{B}\n",
	"{A}\r\n{B}\r\n",
	"{A}\n{B}",          // a last line without LF
	"{A}\r{B}\n",        // a lone CR between values
	"{A}\r\r\n{B}\n",    // CR before CRLF
	"{A}{B}\n",          // two values on a line
	"{A} \n{B}\n",       // a space after a value
	"  {A}\n",           // leading spaces
	"{A}\n\n{B}\n",      // a blank line
	"\xEF\xBB\xBF{A}\n", // a BOM
	"{\"jsonrpc\":\"2.0\",\n\"method\":\"a\"}\n",
	"x\n{A}\n",
}

func sseSeeds() []string {
	var out []string
	for _, s := range sseFramings {
		out = append(out, expand(s))
	}
	for _, b := range hostileBodies {
		out = append(out, "data: "+b+"\n\n", "data: "+b+"\n\ndata: "+msgA+"\n\n")
	}
	return out
}

func stdioSeeds() []string {
	var out []string
	for _, s := range stdioFramings {
		out = append(out, expand(s))
	}
	for _, b := range hostileBodies {
		out = append(out, b+"\n", b+"\r\n"+msgA+"\n")
	}
	return out
}

func bodySeeds() []string {
	out := append([]string{}, hostileBodies...)
	for _, b := range hostileBodies {
		out = append(out, b+"\n", "\r\n"+b)
	}
	return out
}

// FuzzDeliveredSSE: the SSE events relaySSE delivers are read by WHATWG
// EventSource, the Go SDK's streamable client and the TypeScript SDK's
// streamable client as exactly the messages committed.
func FuzzDeliveredSSE(f *testing.F) {
	for _, s := range sseSeeds() {
		f.Add([]byte(s))
	}
	node, why := sharedNode(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		delivered, committed := deliveredSSE(stream)
		want := committedValues(t, committed)
		var got []reading
		got = append(got, whatwgReading(delivered))
		msgs, err := GoSDKMessages(delivered)
		got = append(got, goReading("Go SDK streamable client (GoSDKMessages + jsonrpc.DecodeMessage)", msgs, err))
		report(t, "SSE stream", stream, delivered, committed, want, got)
		if node == nil {
			t.Skip("TypeScript SDK reader not compared: " + why)
		}
		r, err := node.SSE(delivered)
		if err != nil {
			t.Fatalf("TypeScript SDK reader: %v", err)
		}
		ts := reading{reader: "TypeScript SDK streamable client (eventsource-parser + JSON.parse + JSONRPCMessageSchema)", js: true}
		for _, m := range r.Messages {
			ts.msgs = append(ts.msgs, tsMsg(m))
		}
		if r.Err != "" {
			ts.stop = "the stream failed: " + oneLine(r.Err)
		}
		report(t, "SSE stream", stream, delivered, committed, want, []reading{ts})
	})
}

// FuzzDeliveredJSONBody: an application/json body the gate reads is read
// by the Go SDK's decoder and by fetch's Response.json() in the TypeScript
// SDK as exactly the one message committed.
func FuzzDeliveredJSONBody(f *testing.F) {
	for _, s := range bodySeeds() {
		f.Add([]byte(s))
	}
	node, why := sharedNode(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, ref := mcpwire.Read(append(append([]byte{}, body...), '\n'))
		if ref != nil || m.ClientReadable() != nil {
			return // refused (by the gate, or by mediation): the client gets the proxy's error, not these bytes
		}
		committed := [][]byte{m.Root.Raw()}
		want := committedValues(t, committed)
		var got []reading
		got = append(got, goReading("Go SDK HTTP client (jsonrpc.DecodeMessage)", [][]byte{body}, nil))
		std := reading{reader: "encoding/json (Unmarshal into any)"}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			std.msgs = append(std.msgs, readMsg{text: string(body), err: err.Error()})
		} else if val, err := jsonValue(body); err != nil {
			std.msgs = append(std.msgs, readMsg{text: string(body), err: err.Error()})
		} else {
			std.msgs = append(std.msgs, readMsg{text: string(body), val: val})
		}
		got = append(got, std)
		report(t, "JSON body", body, body, committed, want, got)
		if node == nil {
			t.Skip("TypeScript SDK reader not compared: " + why)
		}
		r, err := node.JSON(body)
		if err != nil {
			t.Fatalf("TypeScript SDK reader: %v", err)
		}
		ts := reading{reader: "TypeScript SDK streamable client (Response.json() + JSONRPCMessageSchema)", js: true}
		switch {
		case r.Err != "":
			ts.stop = "the body was refused: " + oneLine(r.Err)
		default:
			for _, m := range r.Messages {
				ts.msgs = append(ts.msgs, tsMsg(m))
			}
			if r.Batch {
				ts.msgs = append(ts.msgs, readMsg{text: "(the body read as a batch)", val: "batch"})
			}
		}
		report(t, "JSON body", body, body, committed, want, []reading{ts})
	})
}

// FuzzDeliveredStdio: the stdio lines the session delivers are read by the
// Go SDK's stdio transport (a json.Decoder over the stream) and the
// TypeScript SDK's ReadBuffer (LF lines, JSON.parse) as exactly the
// messages committed.
func FuzzDeliveredStdio(f *testing.F) {
	for _, s := range stdioSeeds() {
		f.Add([]byte(s))
	}
	node, why := sharedNode(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		delivered, committed := deliveredStdio(stream)
		want := committedValues(t, committed)
		var got []reading
		frames, err := GoStdio(delivered)
		got = append(got, goReading("Go SDK stdio transport (json.Decoder + jsonrpc.DecodeMessage)", frames, err))
		mirror := reading{reader: "TypeScript SDK ReadBuffer framing (TSStdioLines) + encoding/json"}
		for _, l := range TSStdioLines(delivered) {
			mirror.msgs = append(mirror.msgs, parsedMsg(l))
		}
		got = append(got, mirror)
		report(t, "stdio stream", stream, delivered, committed, want, got)
		if node == nil {
			t.Skip("TypeScript SDK reader not compared: " + why)
		}
		msgs, err := node.Stdio(delivered)
		if err != nil {
			t.Fatalf("TypeScript SDK reader: %v", err)
		}
		ts := reading{reader: "TypeScript SDK stdio client (ReadBuffer + JSON.parse + JSONRPCMessageSchema)", js: true}
		for _, m := range msgs {
			ts.msgs = append(ts.msgs, tsMsg(m))
		}
		report(t, "stdio stream", stream, delivered, committed, want, []reading{ts})
	})
}

// deliveredSSE is what relaySSE writes to the client for an upstream
// stream, and the data it commits as forwarded: the Raw bytes of each event
// the EventReader does not refuse, where an event with data is delivered
// only if the gate reads its data as a message (mediation aside).
func deliveredSSE(stream []byte) (delivered []byte, committed [][]byte) {
	er := mcpwire.NewEventReader(bytes.NewReader(stream))
	for {
		ev, err := er.Next()
		if len(ev.Raw) > 0 && ev.Refusal == nil {
			switch {
			case ev.Data == nil:
				delivered = append(delivered, ev.Raw...) // a comment, an id or retry only
			default:
				if m, ref := mcpwire.Read(append(append([]byte{}, ev.Data...), '\n')); ref == nil && m.ClientReadable() == nil {
					delivered = append(delivered, ev.Raw...)
					committed = append(committed, m.Body)
				}
			}
		}
		if err != nil {
			return delivered, committed
		}
	}
}

// deliveredStdio is what the session writes to the client for an upstream
// stdio stream, and the bodies it commits as forwarded: each line through
// its LF that the gate reads (a last line without LF is refused
// unterminated) and mediation lets through (mcpwire's ClientReadable, and
// nothing after the object: producer/session's padded).
func deliveredStdio(stream []byte) (delivered []byte, committed [][]byte) {
	for len(stream) > 0 {
		line := stream
		if i := bytes.IndexByte(stream, '\n'); i >= 0 {
			line = stream[:i+1]
		}
		stream = stream[len(line):]
		if m, ref := mcpwire.Read(line); ref == nil && m.ClientReadable() == nil && m.Body[len(m.Body)-1] == '}' {
			delivered = append(delivered, line...)
			committed = append(committed, m.Body)
		}
	}
	return delivered, committed
}

// reading is what one client reader made of the delivered bytes: each
// message it handed on or refused, in order, and why it stopped reading
// the stream, if it did (the client then fails the connection).
type reading struct {
	reader string
	msgs   []readMsg
	stop   string
	// js: the messages went through JSON.stringify, which writes a
	// number past float64 (Infinity) as null.
	js bool
}

// readMsg is one message as a reader read it: its JSON value, or why the
// reader refused it (err set).
type readMsg struct {
	text string
	val  any
	err  string
}

func parsedMsg(b []byte) readMsg {
	v, err := jsonValue(b)
	if err != nil {
		return readMsg{text: string(b), err: err.Error()}
	}
	return readMsg{text: string(b), val: v}
}

func whatwgReading(delivered []byte) reading {
	r := reading{reader: "WHATWG EventSource (message events with data, JSON.parse)"}
	for _, e := range WHATWG(delivered) {
		if e.IsMessage() {
			r.msgs = append(r.msgs, parsedMsg([]byte(e.Data)))
		}
	}
	return r
}

// goReading is what the Go SDK acts on for each frame: the message
// jsonrpc.DecodeMessage returns, encoded again, so that a member it reads
// as another value (an id truncated to int64, a request with id null read
// as a notification) shows. Its clients fail the connection at the first
// frame it cannot decode, and at the framing error err.
func goReading(name string, frames [][]byte, err error) reading {
	r := reading{reader: name}
	for _, f := range frames {
		_, enc, derr := GoSDKDecode(f)
		if derr != nil {
			r.msgs = append(r.msgs, readMsg{text: string(f), err: derr.Error()})
			r.stop = "the frame could not be decoded: the connection fails"
			return r
		}
		m := parsedMsg(enc)
		m.text = string(f) + " (decoded: " + string(enc) + ")"
		r.msgs = append(r.msgs, m)
	}
	if err != nil {
		r.stop = "the reader failed: " + err.Error()
	}
	return r
}

func tsMsg(m TSMessage) readMsg {
	if !m.OK {
		return readMsg{text: "(JSON.parse or JSONRPCMessageSchema)", err: oneLine(m.Err)}
	}
	v, err := jsonValue([]byte(m.JSON))
	if err != nil {
		return readMsg{text: m.JSON, err: "tsread output: " + err.Error()}
	}
	return readMsg{text: m.JSON + " (" + m.Kind + ")", val: v}
}

// oneLine is a reader's error on one line (zod's errors are indented JSON).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

type committedMsg struct {
	text string
	val  any
}

// committedValues reads each committed frame as a JSON value. The gate read
// each strictly, so a reading error here is the test's own.
func committedValues(t *testing.T, committed [][]byte) []committedMsg {
	t.Helper()
	var out []committedMsg
	for _, c := range committed {
		v, err := jsonValue(c)
		if err != nil {
			t.Fatalf("the gate committed %q, which encoding/json cannot read as one value: %v", c, err)
		}
		out = append(out, committedMsg{text: string(c), val: v})
	}
	return out
}

// jsonValue reads b as exactly one JSON value (white space around it
// allowed, as JSON.parse allows), numbers as float64 the way both SDKs
// read them, a number past float64 as ±Inf, as JavaScript reads it.
func jsonValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("bytes after the JSON value")
	}
	return floats(v)
}

func floats(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			fe, err := floats(e)
			if err != nil {
				return nil, err
			}
			v[k] = fe
		}
	case []any:
		for i, e := range v {
			fe, err := floats(e)
			if err != nil {
				return nil, err
			}
			v[i] = fe
		}
	}
	return v, nil
}

// jsView is v as JSON.stringify writes it back: ±Inf as null.
func jsView(v any) any {
	switch v := v.(type) {
	case float64:
		if math.IsInf(v, 0) {
			return nil
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = jsView(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsView(e)
		}
		return out
	}
	return v
}

// Finding classes.
const (
	classDifferent = "DIFFERENT"
	classFewer     = "FEWER"
)

// judge compares one reader's messages with the committed ones, in order.
// Each message it acts on must be the next committed one, or one after it
// (the ones between are then skipped: FEWER); any other is DIFFERENT. A
// message read with object members dropped (the Go SDK's structs keep only
// the members they name; the TypeScript SDK's schema strips unknown
// members of error) counts as the committed one: the client acts on less
// than was committed, never on more. Dropping the top-level id does not:
// it makes a request a notification.
func judge(want []committedMsg, r reading) (class string, notes []string) {
	view := func(v any) any { return v }
	if r.js {
		view = jsView
	}
	fewer := func(format string, args ...any) {
		if class == "" {
			class = classFewer
		}
		notes = append(notes, fmt.Sprintf(format, args...))
	}
	j := 0
	for i, m := range r.msgs {
		if m.err != "" {
			fewer("message %d (%q) refused: %s", i, m.text, m.err)
			continue
		}
		k := j
		for k < len(want) && !dropsOnly(m.val, view(want[k].val), "") {
			k++
		}
		if k < len(want) {
			if k > j {
				fewer("message %d skips committed %d..%d", i, j, k-1)
			}
			j = k + 1
			continue
		}
		class = classDifferent
		near := "none left"
		if j < len(want) {
			near = fmt.Sprintf("next committed %d is %s", j, want[j].text)
			j++ // read in its place
		}
		notes = append(notes, fmt.Sprintf("message %d %s is not a committed message (%s)", i, m.text, near))
	}
	if j < len(want) && class != classDifferent {
		fewer("committed %d..%d not read", j, len(want)-1)
	}
	if r.stop != "" && class == "" {
		fewer("%s", r.stop)
	} else if r.stop != "" {
		notes = append(notes, r.stop)
	}
	return class, notes
}

// dropsOnly reports whether got is want, or want with some object members
// removed at any depth (never the top-level id).
func dropsOnly(got, want any, path string) bool {
	gm, gok := got.(map[string]any)
	wm, wok := want.(map[string]any)
	if gok && wok {
		for k := range gm {
			if _, ok := wm[k]; !ok {
				return false
			}
		}
		for k, wv := range wm {
			gv, ok := gm[k]
			if !ok {
				if path == "" && k == "id" {
					return false
				}
				continue
			}
			if !dropsOnly(gv, wv, path+"/"+k) {
				return false
			}
		}
		return true
	}
	ga, gok := got.([]any)
	wa, wok := want.([]any)
	if gok && wok {
		if len(ga) != len(wa) {
			return false
		}
		for i := range ga {
			if !dropsOnly(ga[i], wa[i], path+"/"+strconv.Itoa(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// report fails the test with every reader that does not read exactly the
// committed messages, DIFFERENT before FEWER.
func report(t *testing.T, what string, input, delivered []byte, committed [][]byte, want []committedMsg, got []reading) {
	t.Helper()
	worst := ""
	var b strings.Builder
	for _, r := range got {
		class, notes := judge(want, r)
		if class == "" {
			continue
		}
		if worst != classDifferent {
			worst = class
		}
		fmt.Fprintf(&b, "\n  %s: %s\n    reads:", r.reader, class)
		if len(r.msgs) == 0 {
			b.WriteString(" nothing")
		}
		for _, m := range r.msgs {
			if m.err != "" {
				fmt.Fprintf(&b, "\n      refused %q: %s", m.text, m.err)
			} else {
				fmt.Fprintf(&b, "\n      %s", m.text)
			}
		}
		for _, n := range notes {
			fmt.Fprintf(&b, "\n    %s", n)
		}
	}
	if worst == "" {
		return
	}
	headline := "a client reads FEWER messages than committed (a reader-side failure: nothing uncommitted is acted on)"
	if worst == classDifferent {
		headline = "a client reads a DIFFERENT or EXTRA message: it acts on something the gate did not commit"
	}
	t.Fatalf("%s\n  %s %q\n  delivered %q\n  committed %q%s", headline, what, input, delivered, committed, b.String())
}

// sharedNode is the package's shared Node (testNode), or why there is
// none: the fuzz targets run their Go readers without it.
func sharedNode(tb testing.TB) (*Node, string) {
	p := &skipProbe{TB: tb}
	n := testNode(p)
	if p.skipped {
		return nil, nodeSkip
	}
	return n, ""
}

// skipProbe turns testNode's Skip into a note.
type skipProbe struct {
	testing.TB
	skipped bool
}

func (p *skipProbe) Helper()     {}
func (p *skipProbe) Skip(...any) { p.skipped = true }
