package clientread

import (
	"slices"
	"strings"
	"testing"
)

// In the tables, {A} and {B} stand for two valid JSON-RPC notifications.
const (
	msgA = `{"jsonrpc":"2.0","method":"a"}`
	msgB = `{"jsonrpc":"2.0","method":"b"}`
)

func expand(s string) string {
	return strings.NewReplacer("{A}", msgA, "{B}", msgB).Replace(s)
}

func expandAll(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, expand(s))
	}
	return out
}

// sseCases: the data each reader hands to JSON parsing (events named ""
// or "message" with non-empty data), for WHATWG, the Go SDK and the TS SDK.
// goErr: the Go SDK's reader ends with an error (the client fails the
// connection). See the table at the top of clientread_test.go.
var sseCases = []struct {
	name   string
	in     string
	whatwg []string
	goSDK  []string
	goErr  bool
	ts     []string
}{
	{"plain", "data: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"crlf", "data: {A}\r\n\r\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"two events", "data: {A}\n\ndata: {B}\n\n", []string{"{A}", "{B}"}, []string{"{A}", "{B}"}, false, []string{"{A}", "{B}"}},
	{"comment", ": hi\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"bom", "\xEF\xBB\xBFdata: {A}\n\n", []string{"{A}"}, nil, false, []string{"{A}"}},
	{"two boms", "\xEF\xBB\xBF\xEF\xBB\xBFdata: {A}\n\n", nil, nil, false, nil},
	{"bom then blank", "\xEF\xBB\xBF\ndata: {A}\n\n", []string{"{A}"}, nil, true, []string{"{A}"}},
	{"lone cr", "data: {A}\r\rdata: {B}\r\r", []string{"{A}", "{B}"}, []string{"{A}\r\rdata: {B}"}, false, []string{"{A}"}},
	{"lone cr then lf", "data: {A}\r\ndata: {B}\r\r\n", []string{"{A}\n{B}"}, []string{"{A}\n{B}"}, false, []string{"{A}\n{B}"}},
	{"cr inside line", "data: {A}\rdata: {B}\n\n", []string{"{A}\n{B}"}, []string{"{A}\rdata: {B}"}, false, []string{"{A}\n{B}"}},
	{"final cr", "data: {A}\n\r", []string{"{A}"}, []string{"{A}"}, false, nil},
	{"event other", "event: other\ndata: {A}\n\n", nil, nil, false, nil},
	{"event message", "event: message\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"event two spaces", "event:  message\ndata: {A}\n\n", nil, []string{"{A}"}, false, nil},
	{"event trailing space", "event: message \ndata: {A}\n\n", nil, []string{"{A}"}, false, nil},
	{"event empty", "event:\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"event twice", "event: other\nevent: message\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"event reset", "event: other\n\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"event Case", "Event: other\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"several data", "data: {\ndata: \"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\n", []string{"{\n\"jsonrpc\":\"2.0\",\"method\":\"a\"}"}, []string{"{\n\"jsonrpc\":\"2.0\",\"method\":\"a\"}"}, false, []string{"{\n\"jsonrpc\":\"2.0\",\"method\":\"a\"}"}},
	{"data no space", "data:{A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"data two spaces", "data:  {A}\n\n", []string{" {A}"}, []string{"{A}"}, false, []string{" {A}"}},
	{"data trailing space", "data: {A} \n\n", []string{"{A} "}, []string{"{A}"}, false, []string{"{A} "}},
	{"data nbsp", "data: \u00a0{A}\n\n", []string{"\u00a0{A}"}, []string{"{A}"}, false, []string{"\u00a0{A}"}},
	{"data vt", "data: {A}\v\n\n", []string{"{A}\v"}, []string{"{A}"}, false, []string{"{A}\v"}},
	{"data tab", "data:\t{A}\n\n", []string{"\t{A}"}, []string{"{A}"}, false, []string{"\t{A}"}},
	{"data empty", "data:\n\n", nil, nil, false, nil},
	{"data empty line joins", "data:\ndata: {A}\n\n", []string{"\n{A}"}, []string{"\n{A}"}, false, []string{"\n{A}"}},
	{"field without colon", "data\ndata: {A}\n\n", []string{"\n{A}"}, nil, true, []string{"\n{A}"}},
	{"unknown field without colon", "foo\ndata: {A}\n\n", []string{"{A}"}, nil, true, []string{"{A}"}},
	{"unknown field", "foo: bar\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"leading space field", " data: {A}\n\n", nil, nil, false, nil},
	{"no final blank line", "data: {A}\n", nil, []string{"{A}"}, false, nil},
	{"no final newline", "data: {A}", nil, []string{"{A}"}, false, nil},
	{"second event unterminated", "data: {A}\n\ndata: {B}\n", []string{"{A}"}, []string{"{A}", "{B}"}, false, []string{"{A}"}},
	{"invalid utf8", "data: \"\xff\"\n\n", []string{"\"\uFFFD\""}, []string{"\"\xff\""}, false, []string{"\"\uFFFD\""}},
	{"truncated utf8", "data: \"\xe2\x82a\"\n\n", []string{"\"\uFFFDa\""}, []string{"\"\xe2\x82a\""}, false, []string{"\"\uFFFDa\""}},
	{"retry and id", "retry: 10\nid: 1\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"id only event", "id: 1\n\ndata: {A}\n\n", []string{"{A}"}, []string{"{A}"}, false, []string{"{A}"}},
	{"repeated members", "data: {\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"b\"}\n\n", []string{"{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"b\"}"}, []string{"{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"b\"}"}, false, []string{"{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"b\"}"}},
}

func messagesOf(events []Event) []string {
	var out []string
	for _, e := range events {
		if e.IsMessage() {
			out = append(out, e.Data)
		}
	}
	return out
}

func TestSSEReaders(t *testing.T) {
	for _, tc := range sseCases {
		in := []byte(expand(tc.in))
		if got, want := messagesOf(WHATWG(in)), expandAll(tc.whatwg); !slices.Equal(got, want) {
			t.Errorf("%s: WHATWG = %q, want %q", tc.name, got, want)
		}
		got, err := GoSDKMessages(in)
		if want := expandAll(tc.goSDK); !slices.Equal(toStrings(got), want) || (err != nil) != tc.goErr {
			t.Errorf("%s: GoSDKMessages = %q, %v; want %q, error %v", tc.name, got, err, want, tc.goErr)
		}
	}
}

func TestSSETypeScript(t *testing.T) {
	n := testNode(t)
	for _, tc := range sseCases {
		in := []byte(expand(tc.in))
		r, err := n.SSE(in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range r.Events {
			if (e.Type == "" || e.Type == "message") && e.Data != "" {
				got = append(got, e.Data)
			}
		}
		if want := expandAll(tc.ts); !slices.Equal(got, want) || r.Err != "" {
			t.Errorf("%s: TS SDK = %q (err %q), want %q", tc.name, got, r.Err, want)
		}
		if len(r.Messages) != len(got) {
			t.Errorf("%s: TS SDK parsed %d messages from %d events", tc.name, len(r.Messages), len(got))
		}
	}
}

func toStrings(bs [][]byte) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return out
}

// TestSSEIDs: which id each reader reports for an event, and so which
// Last-Event-ID a client resumes with.
func TestSSEIDs(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		whatwg []string // Event.ID of each dispatched event
		goSDK  []string
		ts     []string
	}{
		{"carried over", "id: 7\ndata: a\n\ndata: b\n\n", []string{"7", "7"}, []string{"7", ""}, []string{"7", ""}},
		{"reset by empty id", "id: 7\ndata: a\n\nid\ndata: b\n\n", []string{"7", ""}, []string{"7"}, []string{"7", ""}}, // Go: "id" has no colon
		{"nul ignored", "id: 7\ndata: a\n\nid: x\x00y\ndata: b\n\n", []string{"7", "7"}, []string{"7", "x\x00y"}, []string{"7", ""}},
		{"spaces", "id:  7 \ndata: a\n\n", []string{" 7 "}, []string{"7"}, []string{" 7 "}},
	}
	for _, tc := range cases {
		var got []string
		for _, e := range WHATWG([]byte(tc.in)) {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, tc.whatwg) {
			t.Errorf("%s: WHATWG ids %q, want %q", tc.name, got, tc.whatwg)
		}
		got = nil
		evs, _ := GoSDK([]byte(tc.in))
		for _, e := range evs {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, tc.goSDK) {
			t.Errorf("%s: Go SDK ids %q, want %q", tc.name, got, tc.goSDK)
		}
	}
	n := testNode(t)
	for _, tc := range cases {
		r, err := n.SSE([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range r.Events {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, tc.ts) {
			t.Errorf("%s: TS ids %q, want %q", tc.name, got, tc.ts)
		}
	}
}

// TestUTF8Decode checks the WHATWG decoder against Node's TextDecoder.
func TestUTF8Decode(t *testing.T) {
	n := testNode(t)
	inputs := []string{
		"", "abc", "\xEF\xBB\xBFx", "\xEF\xBB\xBF\xEF\xBB\xBFx", "\xff", "\xe2\x82", "\xe2\x82a", "\xed\xa0\x80",
		"\xf0\x9f\x98", "\xf0\x9f\x98\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xf4\x90\x80\x80", "\xf5", "a\x80b", "\xef\xbb",
	}
	for _, in := range inputs {
		want, err := n.Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := utf8DecodeWHATWG([]byte(in)); got != want {
			t.Errorf("decode %q = %q, Node TextDecoder %q", in, got, want)
		}
	}
}
