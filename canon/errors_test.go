package canon

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// checkErr asserts that err is a *Error with the given code, pointer and
// offset, reachable through errors.Is and errors.As.
func checkErr(t *testing.T, err error, code Code, ptr string, off int64) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s at %q (byte %d)", code, ptr, off)
	}
	if !errors.Is(err, code) {
		t.Fatalf("errors.Is(%v, %s) = false", err, code)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As(%v, *Error) = false", err)
	}
	if ce.Pointer != ptr || ce.Offset != off {
		t.Fatalf("got %s at %q (byte %d), want %s at %q (byte %d): %v", ce.Code, ce.Pointer, ce.Offset, code, ptr, off, err)
	}
	// Another code must not match.
	other := CodeSyntax
	if code == CodeSyntax {
		other = CodeTrailingData
	}
	if errors.Is(err, other) {
		t.Fatalf("errors.Is(%v, %s) = true", err, other)
	}
}

func TestRejections(t *testing.T) {
	// off < 0 means: the offset of the last occurrence of the marker given
	// in at (so long inputs need no hand counting).
	tests := []struct {
		name string
		in   string
		code Code
		ptr  string
		off  int64
		p    Policy // zero: PolicyMCPDecl
		lim  Limits
	}{
		// syntax
		{name: "empty input", in: ``, code: CodeSyntax, ptr: "", off: 0},
		{name: "only whitespace", in: " \n\t\r", code: CodeSyntax, ptr: "", off: 4},
		{name: "byte order mark", in: "\xef\xbb\xbf{}", code: CodeSyntax, ptr: "", off: 0},
		{name: "unterminated object", in: `{`, code: CodeSyntax, ptr: "", off: 1},
		{name: "unterminated array", in: `[1`, code: CodeSyntax, ptr: "", off: 2},
		{name: "trailing comma in object", in: `{"a":1,}`, code: CodeSyntax, ptr: "", off: 7},
		{name: "trailing comma in array", in: `[1,]`, code: CodeSyntax, ptr: "/1", off: 3},
		{name: "missing colon", in: `{"a" 1}`, code: CodeSyntax, ptr: "", off: 5},
		{name: "missing comma", in: `[1 2]`, code: CodeSyntax, ptr: "", off: 3},
		{name: "non-string member name", in: `{a:1}`, code: CodeSyntax, ptr: "", off: 1},
		{name: "single quotes", in: `['a']`, code: CodeSyntax, ptr: "/0", off: 1},
		{name: "bad literal", in: `{"a":tru}`, code: CodeSyntax, ptr: "/a", off: 5},
		{name: "capitalized literal", in: `[True]`, code: CodeSyntax, ptr: "/0", off: 1},
		{name: "unterminated string", in: `["abc`, code: CodeSyntax, ptr: "/0", off: 5},
		{name: "unterminated escape", in: `"\`, code: CodeSyntax, ptr: "", off: 1},
		{name: "comment", in: `[1,/*x*/2]`, code: CodeSyntax, ptr: "/1", off: 3},
		// trailing_data
		{name: "second value", in: `{} x`, code: CodeTrailingData, ptr: "", off: 3},
		{name: "extra bracket", in: `[1]]`, code: CodeTrailingData, ptr: "", off: 3},
		{name: "two scalars", in: `1 2`, code: CodeTrailingData, ptr: "", off: 2},
		{name: "two objects", in: `{}{}`, code: CodeTrailingData, ptr: "", off: 2},
		{name: "literal run-on", in: `truex`, code: CodeTrailingData, ptr: "", off: 4},
		// invalid_utf8
		{name: "invalid byte in value", in: "[\"a\xff\"]", code: CodeInvalidUTF8, ptr: "/0", off: 3},
		{name: "truncated sequence in name", in: "{\"k\xc3\":1}", code: CodeInvalidUTF8, ptr: "", off: 3},
		{name: "overlong encoding", in: "\"\xc0\xaf\"", code: CodeInvalidUTF8, ptr: "", off: 1},
		{name: "UTF-8 encoded surrogate", in: "\"\xed\xa0\x80\"", code: CodeInvalidUTF8, ptr: "", off: 1},
		{name: "above U+10FFFF", in: "\"\xf4\x90\x80\x80\"", code: CodeInvalidUTF8, ptr: "", off: 1},
		{name: "invalid byte outside strings", in: "[\xff]", code: CodeSyntax, ptr: "/0", off: 1},
		// lone_surrogate
		{name: "lone high", in: `["\ud800"]`, code: CodeLoneSurrogate, ptr: "/0", off: 2},
		{name: "high then text", in: `"\uD800x"`, code: CodeLoneSurrogate, ptr: "", off: 1},
		{name: "high then high", in: `"\ud800\ud800"`, code: CodeLoneSurrogate, ptr: "", off: 1},
		{name: "high then short escape", in: `"\ud800\n"`, code: CodeLoneSurrogate, ptr: "", off: 1},
		{name: "lone low", in: `{"a":"x\udc00"}`, code: CodeLoneSurrogate, ptr: "/a", off: 7},
		{name: "reversed pair", in: `"\udc00\ud800"`, code: CodeLoneSurrogate, ptr: "", off: 1},
		{name: "lone high in name", in: `{"\udbff":1}`, code: CodeLoneSurrogate, ptr: "", off: 2},
		// control_character
		{name: "raw tab", in: "[\"a\tb\"]", code: CodeControlCharacter, ptr: "/0", off: 3},
		{name: "raw NUL", in: "\"\x00\"", code: CodeControlCharacter, ptr: "", off: 1},
		{name: "raw U+001F", in: "\"\x1f\"", code: CodeControlCharacter, ptr: "", off: 1},
		{name: "raw newline in name", in: "{\"a\nb\":1}", code: CodeControlCharacter, ptr: "", off: 3},
		// invalid_escape
		{name: "unknown escape", in: `"\x"`, code: CodeInvalidEscape, ptr: "", off: 1},
		{name: "single quote escape", in: `["\'"]`, code: CodeInvalidEscape, ptr: "/0", off: 2},
		{name: "capital U", in: `"\U0041"`, code: CodeInvalidEscape, ptr: "", off: 1},
		{name: "short \\u", in: `"\u12"`, code: CodeInvalidEscape, ptr: "", off: 1},
		{name: "non-hex \\u", in: `{"k":"ab\u12G4"}`, code: CodeInvalidEscape, ptr: "/k", off: 8},
		// invalid_number
		{name: "leading zero", in: `01`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "negative leading zero", in: `-01`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "leading zero in member", in: `{"n":01}`, code: CodeInvalidNumber, ptr: "/n", off: 5},
		{name: "plus sign", in: `[+1]`, code: CodeInvalidNumber, ptr: "/0", off: 1},
		{name: "leading point", in: `.5`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "trailing point", in: `1.`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "trailing point in array", in: `[1.]`, code: CodeInvalidNumber, ptr: "/0", off: 1},
		{name: "NaN", in: `NaN`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "Infinity", in: `[Infinity]`, code: CodeInvalidNumber, ptr: "/0", off: 1},
		{name: "-Infinity", in: `-Infinity`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "lone minus", in: `-`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "lone minus in array", in: `[-]`, code: CodeInvalidNumber, ptr: "/0", off: 1},
		{name: "double minus", in: `--1`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "empty exponent", in: `1e`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "signed empty exponent", in: `1e+`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "two exponent signs", in: `1E+-1`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "two points", in: `[1.5.2]`, code: CodeInvalidNumber, ptr: "/0", off: 1},
		{name: "hex", in: `0x10`, code: CodeInvalidNumber, ptr: "", off: 0},
		{name: "letter suffix", in: `{"a":[0,12a]}`, code: CodeInvalidNumber, ptr: "/a/1", off: 8},
		// duplicate_key
		{name: "plain duplicate", in: `{"a":1,"a":2}`, code: CodeDuplicateKey, ptr: "/a", off: 7},
		{name: "duplicate after unescaping", in: `{"a":1,"\u0061":2}`, code: CodeDuplicateKey, ptr: "/a", off: 7},
		{name: "escaped first", in: `{"\u0061":1,"a":2}`, code: CodeDuplicateKey, ptr: "/a", off: 12},
		{name: "not adjacent", in: `{"b":1,"a":2,"b":3}`, code: CodeDuplicateKey, ptr: "/b", off: 13},
		{name: "depth 5", in: `{"l1":{"l2":{"l3":{"l4":{"x":1,"y":2,"x":3}}}}}`, code: CodeDuplicateKey, ptr: "/l1/l2/l3/l4/x", off: 37},
		{name: "inside array", in: `[{"a":1},{"b":1,"b":2}]`, code: CodeDuplicateKey, ptr: "/1/b", off: 16},
		{name: "pointer escaping", in: `{"m~n":{"a/b":0,"a/b":0}}`, code: CodeDuplicateKey, ptr: "/m~0n/a~1b", off: 16},
		{name: "surrogate pair vs UTF-8", in: `{"😀":1,"\ud83d\ude00":2}`, code: CodeDuplicateKey, ptr: "/😀", off: 10},
		{name: "same high surrogate", in: `{"😀":1,"😁":2,"😀":3}`, code: CodeDuplicateKey, ptr: "/😀", off: 19},
		{name: "escaped solidus", in: `{"/":1,"\/":2}`, code: CodeDuplicateKey, ptr: "/~1", off: 7},
		{name: "empty name", in: `{"":1,"":2}`, code: CodeDuplicateKey, ptr: "/", off: 6},
		// Two names repeat: the one first in canonical order is reported, at
		// its second occurrence, in small and in wide (sort) objects alike.
		{name: "two repeats", in: `{"b":1,"b":2,"a":3,"a":4}`, code: CodeDuplicateKey, ptr: "/a", off: 19},
		{name: "repeat in order", in: `{"a":1,"a":2,"b":3}`, code: CodeDuplicateKey, ptr: "/a", off: 7},
		{name: "two repeats, wide", in: `{"k00":0,"k01":0,"k02":0,"k03":0,"k04":0,"k05":0,"k06":0,"k07":0,"k08":0,"k09":0,"k10":0,"k11":0,"k12":0,"k13":0,"z":1,"y":2,"z":3,"y":4}`, code: CodeDuplicateKey, ptr: "/y", off: 131},
		// unsupported_number
		{name: "decimal under v02", in: `{"x":[1,0.5]}`, code: CodeUnsupportedNumber, ptr: "/x/1", off: 8, p: PolicyV02},
		{name: "2^53", in: `9007199254740992`, code: CodeUnsupportedNumber, ptr: "", off: 0},
		{name: "rounded decimal", in: `{"m":0.10000000000000000555}`, code: CodeUnsupportedNumber, ptr: "/m", off: 5},
		{name: "first in input order", in: `{"b":1e400,"a":1e-400}`, code: CodeUnsupportedNumber, ptr: "/b", off: 5},
		// depth_limit
		{name: "depth 3 of 3", in: `[[[[1]]]]`, code: CodeDepthLimit, ptr: "/0/0/0", off: 3, lim: Limits{MaxDepth: 3}},
		{name: "object depth", in: `{"a":{"b":{"c":{}}}}`, code: CodeDepthLimit, ptr: "/a/b/c", off: 15, lim: Limits{MaxDepth: 3}},
		// size_limit
		{name: "size limit+1", in: `[1,2,3,4,5]`, code: CodeSizeLimit, ptr: "", off: 10, lim: Limits{MaxBytes: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			if p == 0 {
				p = PolicyMCPDecl
			}
			got, err := appendCanonical([]byte("keep"), []byte(tt.in), p, tt.lim)
			checkErr(t, err, tt.code, tt.ptr, tt.off)
			if string(got) != "keep" {
				t.Errorf("dst changed on error: %q", got)
			}
			// Every entry point reports the same error.
			if tt.lim == (Limits{}) {
				_, err = Canonicalize([]byte(tt.in), p)
				checkErr(t, err, tt.code, tt.ptr, tt.off)
				_, err = Digest([]byte(tt.in), p)
				checkErr(t, err, tt.code, tt.ptr, tt.off)
			}
			var sb strings.Builder
			n, err := WriteCanonical(&sb, []byte(tt.in), p, tt.lim)
			checkErr(t, err, tt.code, tt.ptr, tt.off)
			if n != 0 || sb.Len() != 0 {
				t.Errorf("WriteCanonical wrote %d bytes (%q) before failing", n, sb.String())
			}
			// Wrapping keeps the code reachable.
			if !errors.Is(fmt.Errorf("canonicalize tools/list page: %w", err), tt.code) {
				t.Error("code lost through fmt.Errorf %w")
			}
		})
	}
}

// TestLimitsInclusive checks that both limits accept exactly the limit.
func TestLimitsInclusive(t *testing.T) {
	tests := []struct {
		in   string
		lim  Limits
		want string
	}{
		{`[[[1]]]`, Limits{MaxDepth: 3}, `[[[1]]]`},
		{`{"a":{"b":{"c":1}}}`, Limits{MaxDepth: 3}, `{"a":{"b":{"c":1}}}`},
		{`1`, Limits{MaxDepth: 1}, `1`},
		{`[1,2,3,4]`, Limits{MaxBytes: 9}, `[1,2,3,4]`},
		{` [1, 2] `, Limits{MaxBytes: 8}, `[1,2]`},
	}
	for _, tt := range tests {
		got, err := appendCanonical(nil, []byte(tt.in), PolicyV02, tt.lim)
		if err != nil || string(got) != tt.want {
			t.Errorf("appendCanonical(%q, %+v) = %q, %v; want %q", tt.in, tt.lim, got, err, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a":{"b":1,"\u0062":2}}`), PolicyV02)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	got := err.Error()
	want := `duplicate_key at /a/b (byte 12): duplicate member name "b"`
	if got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// Details quote at most 64 bytes of hostile input, escaped.
	long := `"` + strings.Repeat("\x01", 1000)
	_, err = Canonicalize([]byte(long), PolicyV02)
	checkErr(t, err, CodeControlCharacter, "", 1)
	long = strings.Repeat("[", 10) + "\x00" + strings.Repeat("x", 1000)
	_, err = Canonicalize([]byte(long), PolicyV02)
	if len(err.Error()) > 200 || strings.ContainsRune(err.Error(), 0) {
		t.Errorf("unbounded or unescaped detail: %q", err)
	}
}

func TestInvalidPolicy(t *testing.T) {
	for _, p := range []Policy{0, 3, 255} {
		if _, err := Canonicalize([]byte(`1`), p); err == nil {
			t.Errorf("policy %d accepted", p)
		}
		if _, err := Digest([]byte(`1`), p); err == nil {
			t.Errorf("policy %d accepted by Digest", p)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want Policy
		ok   bool
	}{
		{"v02", PolicyV02, true},
		{"mcp-decl", PolicyMCPDecl, true},
		{PolicyV02ID, PolicyV02, true},
		{PolicyMCPDeclID, PolicyMCPDecl, true},
		{"", 0, false},
		{"V02", 0, false},
		{"float", 0, false},
	}
	for _, tt := range tests {
		got, err := ParsePolicy(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParsePolicy(%q) = %v, %v", tt.in, got, err)
		}
		if tt.ok && got.ID() != tt.in && got.ID() != map[string]string{"v02": PolicyV02ID, "mcp-decl": PolicyMCPDeclID}[tt.in] {
			t.Errorf("ParsePolicy(%q).ID() = %q", tt.in, got.ID())
		}
	}
	// The identifiers are recorded in evidence: pin them.
	if PolicyV02.ID() != "tracectl/jcs-trace-v0.2-int53" || PolicyMCPDecl.ID() != "tracectl/jcs-mcp-decl-exact-binary64" {
		t.Errorf("policy identifiers changed: %q %q", PolicyV02.ID(), PolicyMCPDecl.ID())
	}
}
