package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"m":"hi"}}}`

// hostile is one frame of every class that got tool calls past the first
// design's proxy, with the rule the gate must name.
var hostile = []struct {
	name  string
	frame string
	rule  Rule
	id    string
}{
	{"nan", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":NaN}}}` + "\n", ruleInvalidJSON, "null"},
	{"infinity", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":-Infinity}}}` + "\n", ruleInvalidJSON, "null"},
	{"bom", "\xEF\xBB\xBF" + call + "\n", ruleBOM, "7"},
	{"case Method", `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"echo"}}` + "\n", ruleCaseVariant, "1"},
	{"case METHOD beside method", `{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call"}` + "\n", ruleCaseVariant, "1"},
	{"case ID", `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"echo"}}` + "\n", ruleCaseVariant, "null"},
	{"long s folds to s", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"argument\u017F\":{\"x\":1}}}\n", ruleCaseVariant, "1"},
	{"case params Name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"rm","name":"echo"}}` + "\n", ruleCaseVariant, "1"},
	{"case params Arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Arguments":{}}}` + "\n", ruleCaseVariant, "1"},
	{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}` + "\n", ruleDuplicateMember, "1"},
	{"duplicate deep", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1,"a":2}}}` + "\n", ruleDuplicateMember, "1"},
	{"pretty-printed first line", "{\n", ruleInvalidJSON, "null"},
	{"two messages by CR", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\r" + call + "\n", ruleBareCR, "null"},
	{"CR as whitespace", `{"jsonrpc":"2.0",` + "\r" + `"id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n", ruleBareCR, "null"},
	{"two values", `{"jsonrpc":"2.0","id":1,"method":"ping"} ` + call + "\n", ruleInvalidJSON, "null"},
	{"batch", "[" + call + "]\n", ruleBatch, "null"},
	{"deep", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":` + strings.Repeat("[", MaxFrameDepth) + strings.Repeat("]", MaxFrameDepth) + `}}}` + "\n", ruleTooDeep, "1"},
	{"invalid utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"ec\xffho\"}}\n", ruleInvalidJSON, "1"},
	{"lone surrogate", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\ud800"}}` + "\n", ruleInvalidJSON, "1"},
	{"unterminated", call, ruleUnterminated, "7"},
	{"no jsonrpc", `{"id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n", ruleNotJSONRPC, "1"},
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n", ruleNotJSONRPC, "1"},
	{"method and result", `{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{}}` + "\n", ruleNotJSONRPC, "1"},
	{"method not string", `{"jsonrpc":"2.0","id":1,"method":["tools/call"]}` + "\n", ruleBadMethod, "1"},
	{"id object", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}` + "\n", ruleBadID, "null"},
	{"string", `"tools/call"` + "\n", ruleNotObject, "null"},
	{"empty line", "\n", ruleInvalidJSON, "null"},
	{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{}}` + "\n", ruleNotJSONRPC, "1"},
	{"id 7.5 (the Go SDK reads 7)", `{"jsonrpc":"2.0","id":7.5,"method":"tools/call","params":{"name":"echo"}}` + "\n", ruleBadID, "null"},
	{"id 7.0", `{"jsonrpc":"2.0","id":7.0,"method":"tools/call","params":{"name":"echo"}}` + "\n", ruleBadID, "null"},
	{"id 7e0", `{"jsonrpc":"2.0","id":7e0,"method":"ping"}` + "\n", ruleBadID, "null"},
	{"id -0", `{"jsonrpc":"2.0","id":-0,"method":"ping"}` + "\n", ruleBadID, "null"},
	{"id beyond 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}` + "\n", ruleBadID, "null"},
	{"id with a needless escape", `{"jsonrpc":"2.0","id":"\u0061","method":"tools/call","params":{"name":"echo"}}` + "\n", ruleBadID, "null"},
}

func TestReadRefuses(t *testing.T) {
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			m, r := Read([]byte(tc.frame))
			if r == nil {
				t.Fatalf("accepted as %v; want refusal %s", m.Kind, tc.rule)
			}
			if r.Rule != tc.rule {
				t.Errorf("rule = %s (%s), want %s", r.Rule, r.Detail, tc.rule)
			}
			if r.ID != tc.id {
				t.Errorf("answer id = %s, want %s", r.ID, tc.id)
			}
			if !json.Valid([]byte(r.ID)) {
				t.Errorf("answer id %q is not JSON", r.ID)
			}
		})
	}
}

func TestReadAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		kind        Kind
		method, id  string
		term        string
	}{
		{"call lf", call + "\n", KindRequest, MethodToolsCall, "7", TermLF},
		{"call crlf", call + "\r\n", KindRequest, MethodToolsCall, "7", TermCRLF},
		{"escaped names", `{"jsonrpc":"2.0","\u0069d":"x","m\u0065thod":"tools\/call"}` + "\n", KindRequest, MethodToolsCall, `"x"`, TermLF},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}` + "\n", KindRequest, "ping", "null", TermLF},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n", KindNotification, notifyInitialized, "", TermLF},
		{"tools/call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}` + "\n", KindNotification, MethodToolsCall, "", TermLF},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n", KindResponse, "", "1", TermLF},
		{"error response null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}` + "\n", KindResponse, "", "null", TermLF},
		{"a response keeps its id as sent", `{"jsonrpc":"2.0","id":7.0,"result":{}}` + "\n", KindResponse, "", "7.0", TermLF},
		{"string id with raw UTF-8 and a needed escape", `{"jsonrpc":"2.0","id":"é\"","method":"ping"}` + "\n", KindRequest, "ping", `"é\""`, TermLF},
		{"whitespace around", " \t" + call + " \n", KindRequest, MethodToolsCall, "7", TermLF},
		{"extra member", `{"jsonrpc":"2.0","id":1,"method":"ping","x-vendor":true}` + "\n", KindRequest, "ping", "1", TermLF},
		{"depth at the limit", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":` + strings.Repeat("[", MaxFrameDepth-3) + strings.Repeat("]", MaxFrameDepth-3) + `}}}` + "\n", KindRequest, MethodToolsCall, "1", TermLF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, r := Read([]byte(tc.frame))
			if r != nil {
				t.Fatalf("refused: %v", r)
			}
			if m.Kind != tc.kind || m.Method != tc.method || m.IDText() != tc.id || m.Terminator != tc.term {
				t.Errorf("got kind %v method %q id %q term %s, want %v %q %q %s", m.Kind, m.Method, m.IDText(), m.Terminator, tc.kind, tc.method, tc.id, tc.term)
			}
			if !bytes.HasPrefix([]byte(tc.frame), m.Body) {
				t.Errorf("body is not the frame's own bytes")
			}
		})
	}
}

func TestReadValueLimit(t *testing.T) {
	frame := func(values int) []byte { // an object and a "params" array of values-2 zeros
		zeros := strings.TrimSuffix(strings.Repeat("0,", values-2), ",")
		return []byte(`{"jsonrpc":"2.0","method":"x","params":[` + zeros + `]}` + "\n")
	}
	// The count is an upper bound: the envelope's own members count too.
	if _, r := Read(frame(maxFrameValues - 4)); r != nil {
		t.Errorf("%d values refused: %v", maxFrameValues-4, r)
	}
	if _, r := Read(frame(maxFrameValues + 1)); r == nil || r.Rule != ruleTooManyValues {
		t.Errorf("%d values: %v, want too_many_values", maxFrameValues+1, r)
	}
	// Commas inside strings are not values.
	if n := valuesAtMost([]byte(`["a,b,c\",d"]`)); n != 2 {
		t.Errorf("valuesAtMost = %d, want 2", n)
	}
}

func TestReadDepthLimitPlusOne(t *testing.T) {
	at := func(d int) string {
		return strings.Repeat("[", d) + strings.Repeat("]", d) + "\n"
	}
	// A bare array is a batch once parsed: the limit is what decides
	// whether it is parsed at all.
	if _, r := Read([]byte(at(MaxFrameDepth))); r == nil || r.Rule != ruleBatch {
		t.Errorf("depth %d: %v, want batch", MaxFrameDepth, r)
	}
	if _, r := Read([]byte(at(MaxFrameDepth + 1))); r == nil || r.Rule != ruleTooDeep {
		t.Errorf("depth %d: %v, want too_deep", MaxFrameDepth+1, r)
	}
}

func TestRefusalUnwrapsCanonError(t *testing.T) {
	_, r := Read([]byte(`{"a":1,"a":2}` + "\n"))
	if r == nil || !errors.Is(r, canon.CodeDuplicateKey) {
		t.Fatalf("refusal %v does not wrap canon.CodeDuplicateKey", r)
	}
}

func readSpec(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../spec/transcript.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRulesDocumented(t *testing.T) {
	spec := readSpec(t)
	for _, r := range clientRules {
		if !strings.Contains(spec, "`"+string(r)+"`") {
			t.Errorf("rule %s is not in spec/transcript.md", r)
		}
	}
	if got := len(clientRules); got != 14 {
		t.Errorf("%d rules listed; update the spec table and this count together", got)
	}
}

// ---- differential: lenient decoders real peers use ----

// toolCall is a call as some decoder read it: tool name and arguments,
// normalized (decoded with UseNumber, re-encoded with sorted keys).
type toolCall struct{ name, args string }

type lenientEnvelope struct {
	Method string `json:"method"` // encoding/json: case-insensitive, last duplicate wins
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

func normArgs(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "null"
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return "\x00undecodable"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// callsOf reads calls from one JSON value the way encoding/json does: an
// object, or a batch array of them.
func callsOf(v []byte) []toolCall {
	var out []toolCall
	one := func(b []byte) {
		var e lenientEnvelope
		if json.Unmarshal(b, &e) == nil && e.Method == MethodToolsCall {
			out = append(out, toolCall{e.Params.Name, normArgs(e.Params.Arguments)})
		}
	}
	if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(t, &batch) == nil {
			for _, b := range batch {
				one(b)
			}
		}
		return out
	}
	one(v)
	return out
}

// Lenient decoders, each given the bytes a server would receive.
var lenient = map[string]func([]byte) []toolCall{
	// Go encoding/json per LF line (CR trimmed), batches included.
	"go-lines": func(s []byte) []toolCall {
		var out []toolCall
		for _, l := range bytes.Split(s, []byte("\n")) {
			out = append(out, callsOf(bytes.TrimSuffix(l, []byte("\r")))...)
		}
		return out
	},
	// A line reader that also splits at CR (Python's universal newlines).
	"cr-lines": func(s []byte) []toolCall {
		var out []toolCall
		for _, l := range bytes.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
			out = append(out, callsOf(l)...)
		}
		return out
	},
	// A decoder that skips a BOM and reads NaN and Infinity (as Python's
	// json does), per line.
	"nan-bom-lines": func(s []byte) []toolCall {
		var out []toolCall
		for _, l := range bytes.Split(s, []byte("\n")) {
			l = bytes.TrimPrefix(bytes.TrimSuffix(l, []byte("\r")), bom)
			out = append(out, callsOf(replaceNonFinite(l))...)
		}
		return out
	},
	// A stream decoder: values in sequence, whatever the line breaks.
	"stream": func(s []byte) []toolCall {
		var out []toolCall
		d := json.NewDecoder(bytes.NewReader(s))
		for {
			var v json.RawMessage
			if d.Decode(&v) != nil {
				return out
			}
			out = append(out, callsOf(v)...)
		}
	},
}

// replaceNonFinite turns NaN, Infinity and -Infinity outside strings into 0.
func replaceNonFinite(b []byte) []byte {
	var out []byte
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if in {
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				in = false
			}
			continue
		}
		switch {
		case c == '"':
			in = true
		case bytes.HasPrefix(b[i:], []byte("-Infinity")):
			out, i = append(out, '0'), i+len("-Infinity")-1
			continue
		case bytes.HasPrefix(b[i:], []byte("Infinity")):
			out, i = append(out, '0'), i+len("Infinity")-1
			continue
		case bytes.HasPrefix(b[i:], []byte("NaN")):
			out, i = append(out, '0'), i+len("NaN")-1
			continue
		}
		out = append(out, c)
	}
	return out
}

// gate runs a client stream through the gate as the proxy does: LF-split
// frames, each read once. It returns the bytes forwarded (the accepted
// frames, unchanged) and the calls recorded.
func gate(stream []byte) (forwarded []byte, recorded []toolCall) {
	for len(stream) > 0 {
		i := bytes.IndexByte(stream, '\n')
		frame := stream
		if i >= 0 {
			frame = stream[:i+1]
		}
		stream = stream[len(frame):]
		m, r := Read(frame)
		if r != nil {
			continue
		}
		forwarded = append(forwarded, frame...)
		if m.IsToolCall() {
			c := toolCall{args: "null"}
			if n, ok := m.Params.Get("name"); ok {
				c.name, _ = n.Str()
			}
			if a, ok := m.Params.Get("arguments"); ok {
				c.args = normArgs(a.Raw())
			}
			recorded = append(recorded, c)
		}
	}
	return forwarded, recorded
}

// FuzzGateDifferential: whatever a lenient decoder reads as a tools/call
// from the bytes the gate forwards, the gate recorded as exactly that call.
// (The gate may record calls a lenient decoder rejects: recording more
// than ran is honest; running more than recorded is the failure.)
func FuzzGateDifferential(f *testing.F) {
	for _, tc := range hostile {
		f.Add([]byte(tc.frame))
		f.Add([]byte(tc.frame + call + "\n"))
	}
	f.Add([]byte(call + "\n" + call + "\r\n"))
	f.Add([]byte("{\n\"jsonrpc\":\"2.0\",\"id\":1,\n\"method\":\"tools/call\",\"params\":{\"name\":\"rm\"}}\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		forwarded, recorded := gate(stream)
		for name, dec := range lenient {
			got := dec(forwarded)
			if missing := notIn(got, recorded); missing != nil {
				t.Fatalf("%s reads %d calls from the forwarded bytes that the gate did not record (first %+v); recorded %+v\nstream %q", name, len(missing), missing[0], recorded, stream)
			}
		}
	})
}

// notIn returns the calls of got beyond those in want (as multisets).
func notIn(got, want []toolCall) []toolCall {
	left := map[toolCall]int{}
	for _, c := range want {
		left[c]++
	}
	var extra []toolCall
	for _, c := range got {
		if left[c] == 0 {
			extra = append(extra, c)
			continue
		}
		left[c]--
	}
	return extra
}

// notACall are hostile frames that no lenient decoder reads as a call: the
// gate refuses them for being outside JSON-RPC, not for hiding a call.
var notACall = map[string]bool{"id 7e0": true, "id -0": true, "id beyond 2^53": true, "pretty-printed first line": true, "method not string": true, "string": true, "empty line": true, "result and error": true, "case METHOD beside method": true}

func TestGateDifferentialClasses(t *testing.T) {
	// Before the gate, each hostile frame made some lenient decoder read a
	// call; through it, none reads one that was not recorded.
	for _, tc := range hostile {
		stream := []byte(tc.frame)
		readSomewhere := false
		for _, dec := range lenient {
			if len(dec(stream)) > 0 {
				readSomewhere = true
			}
		}
		forwarded, recorded := gate(stream)
		for name, dec := range lenient {
			if extra := notIn(dec(forwarded), recorded); extra != nil {
				t.Errorf("%s: %s reads unrecorded %+v", tc.name, name, extra)
			}
		}
		if len(forwarded) != 0 {
			t.Errorf("%s: forwarded %q", tc.name, forwarded)
		}
		if !readSomewhere && !notACall[tc.name] {
			t.Errorf("%s: no lenient decoder reads a call from it: the class proves nothing", tc.name)
		}
	}
	// And the ordinary stream reaches the server whole, calls recorded.
	stream := []byte(call + "\n" + call + "\r\n")
	forwarded, recorded := gate(stream)
	if !bytes.Equal(forwarded, stream) || !reflect.DeepEqual(recorded, lenient["go-lines"](stream)) {
		t.Errorf("plain calls: forwarded %q, recorded %+v", forwarded, recorded)
	}
}

func TestKeyMatchesByValue(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{"7", "7.0"}, {"7", "7e0"}, {`"a"`, `"\u0061"`}, {"0", "-0"}} {
		da, _ := canon.Parse([]byte(tc.a), canon.ParseOptions{})
		db, _ := canon.Parse([]byte(tc.b), canon.ParseOptions{})
		if Key(da.Root()) != Key(db.Root()) {
			t.Errorf("Key(%s) = %q, Key(%s) = %q: want one key", tc.a, Key(da.Root()), tc.b, Key(db.Root()))
		}
	}
	da, _ := canon.Parse([]byte(`"7"`), canon.ParseOptions{})
	db, _ := canon.Parse([]byte(`7`), canon.ParseOptions{})
	if Key(da.Root()) == Key(db.Root()) {
		t.Error(`"7" and 7 share a key: a string and a number are different ids`)
	}
}
