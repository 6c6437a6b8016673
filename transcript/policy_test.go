package transcript

import (
	"bytes"
	"testing"
)

// The policy members round-trip through Encode and DecodeLine (the fast
// decoder and the strict one agree), and validation rejects what the
// format forbids.
func TestPolicyMembers(t *testing.T) {
	d := "sha256:" + string(bytes.Repeat([]byte("ab"), 32))
	h := sampleHeader()
	h.Policy = &PolicyRef{Mode: policyEnforce, PolicyDigest: d, PolicyLength: 10, LockDigest: d, LockLength: 3}
	a := sampleAttempt(1, "a1")
	a.Decision = &Decision{Action: decisionDeny, Rule: "no-big", Reason: "because", Declaration: d}
	a.Correlation.ToolUseID = &CorrValue{Valid: true, Value: "toolu_01"}
	s := &Seal{Type: typeSeal, Seq: 3, Attempts: 2, Responses: 1, Denied: 1}
	o := &Observation{Type: typeObservation, Seq: 2, AttemptID: "a1", Kind: ObsDenied, Basis: BasisProducer}
	for _, ev := range []Event{h, a, s, o} {
		line, err := Encode(ev)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		if fast := decodeFast(line); fast == nil {
			t.Errorf("%T: the fast decoder does not read %s", ev, line)
		}
		got, err := DecodeLine(line)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		again, _ := Encode(got)
		if !bytes.Equal(again, line) {
			t.Errorf("%T: round trip\n got %s\nwant %s", ev, again, line)
		}
	}
	bad := []Event{
		&Seal{Type: typeSeal, Seq: 3, Attempts: 2, Responses: 1},
		func() Event {
			a := sampleAttempt(1, "a1")
			a.Decision = &Decision{Action: "maybe", Rule: "r"}
			return a
		}(),
		func() Event { a := sampleAttempt(1, "a1"); a.Decision = &Decision{Action: decisionAllow}; return a }(),
		func() Event { h := sampleHeader(); h.Policy = &PolicyRef{Mode: policyAudit}; return h }(),
		func() Event {
			h := sampleHeader()
			h.Policy = &PolicyRef{Mode: "shadow", PolicyDigest: d}
			return h
		}(),
	}
	for _, ev := range bad {
		if validate(ev) == nil {
			t.Errorf("%T %+v: valid, want invalid", ev, ev)
		}
	}
}

// TestToolUseID: the agent host's tool-use id is read from the request's
// _meta and checked like a correlation id: recorded when it has the safe
// shape, recorded invalid (never copied) otherwise, absent without it.
func TestToolUseID(t *testing.T) {
	req := func(meta string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{` + meta + `}}}`)
	}
	tests := []struct {
		meta string
		want *CorrValue
	}{
		{`"claudecode/toolUseId":"toolu_01ABCdef"`, &CorrValue{Valid: true, Value: "toolu_01ABCdef"}},
		{`"claudecode/toolUseId":"bad id!"`, &CorrValue{Reason: CorrBadCharset}},
		{`"claudecode/toolUseId":7`, &CorrValue{Reason: CorrNotString}},
		{`"other":"x"`, nil},
	}
	for _, tt := range tests {
		f, err := DeriveRequest(req(tt.meta))
		if err != nil {
			t.Fatal(err)
		}
		got := f.Correlation.ToolUseID
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.meta, got, tt.want)
		}
	}
}

// TestToolUseMeta: the header's extra tool-use id keys round-trip, are
// read after the known key, and are refused when more than eight,
// repeated, the known key itself, or of another shape.
func TestToolUseMeta(t *testing.T) {
	h := sampleHeader()
	h.ToolUseMeta = []string{"acme.dev/toolUseId", "x_y-z"}
	line, err := Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"tool_use_meta":["acme.dev/toolUseId","x_y-z"],"type":"header"`)) {
		t.Fatalf("encoded %s", line)
	}
	if fast := decodeFast(line); fast == nil {
		t.Fatalf("the fast decoder does not read %s", line)
	}
	got, err := DecodeLine(line)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Encode(got); !bytes.Equal(again, line) {
		t.Fatalf("round trip\n got %s\nwant %s", again, line)
	}
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"x_y-z":"use-2","acme.dev/toolUseId":"use-1"}}}`)
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, ""},
		{h.ToolUseMeta, "use-1"},
		{[]string{"x_y-z"}, "use-2"},
	} {
		f, err := DeriveRequest(req, tc.keys...)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Correlation.ToolUseID; tc.want == "" && got != nil || tc.want != "" && (got == nil || got.Value != tc.want) {
			t.Errorf("keys %q: tool use id %+v, want %q", tc.keys, got, tc.want)
		}
	}
	for _, keys := range [][]string{
		{}, {"a", "b", "c", "d", "e", "f", "g", "h", "i"}, {"a", "a"}, {"claudecode/toolUseId"},
		{"with space"}, {""}, {string(bytes.Repeat([]byte("k"), 129))},
	} {
		h := sampleHeader()
		h.ToolUseMeta = keys
		if validate(h) == nil {
			t.Errorf("tool_use_meta %q: valid, want invalid", keys)
		}
	}
}
