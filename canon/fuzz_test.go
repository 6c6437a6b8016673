package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
)

var knownCodes = map[Code]bool{
	CodeSizeLimit: true, CodeDepthLimit: true, CodeSyntax: true, CodeTrailingData: true, CodeInvalidUTF8: true,
	CodeLoneSurrogate: true, CodeControlCharacter: true, CodeInvalidEscape: true, CodeInvalidNumber: true,
	CodeDuplicateKey: true, CodeUnsupportedNumber: true,
}

// fuzzSeeds are added to the corpus in testdata/fuzz besides these.
var fuzzSeeds = []string{
	``, `0`, `-0`, `1.0`, `1e3`, `0.7`, `4.50`, `5e-324`, `1e-400`, `1e400`, `9007199254740992`, `1e999999999999`,
	`0.10000000000000000555`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, "\"\xff\"", `{"a":1,"\u0061":2}`,
	`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`, `[1,2,[3,{"x":null}]]`,
	`{"a":{"b":{"c":{"d":{"e":{"x":1,"x":2}}}}}}`, `-`, `01`, `.5`, `NaN`, `[1,]`, "\"\t\"", `"\x"`, `{} x`,
	`{"😀":1,"😁":2,"😀":3}`, `{"b":1e400,"a":1e-400}`,
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, mcp bool) {
		p := PolicyV02
		if mcp {
			p = PolicyMCPDecl
		}
		out, err := Canonicalize(data, p)
		d, derr := Digest(data, p)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || !knownCodes[ce.Code] {
				t.Fatalf("error without a known code: %v", err)
			}
			if ce.Offset < 0 || ce.Offset > int64(len(data)) {
				t.Fatalf("offset %d outside the input of %d bytes: %v", ce.Offset, len(data), err)
			}
			if ce.Pointer != "" && ce.Pointer[0] != '/' {
				t.Fatalf("malformed pointer %q", ce.Pointer)
			}
			if !utf8.ValidString(ce.Error()) {
				t.Fatalf("error text is not UTF-8: %q", ce.Error())
			}
			var de *Error
			if !errors.As(derr, &de) || *de != *ce {
				t.Fatalf("Digest reports %v, Canonicalize %v", derr, err)
			}
			return
		}
		if derr != nil || d != SHA256(out) {
			t.Fatalf("Digest = %s, %v; want %s", d, derr, SHA256(out))
		}
		// Idempotent: canonical bytes are their own canonical form.
		again, err := Canonicalize(out, p)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n in  %q\n out %q\n again %q (%v)", data, out, again, err)
		}
		if err := Check(out, p); err != nil {
			t.Fatalf("Check(canonical) = %v", err)
		}
		// The same value: decode both with encoding/json and compare,
		// numbers by exact decimal value.
		var a, b any
		if err := decodeNumbers(data, &a); err != nil {
			t.Fatalf("encoding/json rejects accepted input %q: %v", data, err)
		}
		if err := decodeNumbers(out, &b); err != nil {
			t.Fatalf("encoding/json rejects output %q: %v", out, err)
		}
		if err := sameValue(a, b); err != nil {
			t.Fatalf("value changed: %v\n in  %q\n out %q", err, data, out)
		}
	})
}

func decodeNumbers(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func sameValue(a, b any) error {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return fmt.Errorf("number %s became %T", a, b)
		}
		var x, y apd.Decimal
		if _, _, err := x.SetString(string(a)); err != nil {
			return nil // apd cannot hold the exponent; canon judged it by digits
		}
		if _, _, err := y.SetString(string(bn)); err != nil {
			return err
		}
		if x.Cmp(&y) != 0 {
			return fmt.Errorf("number %s became %s", a, bn)
		}
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return fmt.Errorf("object became %T", b)
		}
		for k, v := range a {
			if err := sameValue(v, bm[k]); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
	case []any:
		ba, ok := b.([]any)
		if !ok || len(a) != len(ba) {
			return fmt.Errorf("array became %T", b)
		}
		for i := range a {
			if err := sameValue(a[i], ba[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	default:
		if a != b {
			return fmt.Errorf("%v became %v", a, b)
		}
	}
	return nil
}

// FuzzParse walks every value of a document parsed with duplicates allowed
// and checks the tree against itself: pointers, raw spans, member access and
// subtree canonicalization.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse(data, ParseOptions{AllowDuplicateKeys: true, Limits: Limits{MaxDepth: 64}})
		_, strictErr := Parse(data, ParseOptions{Limits: Limits{MaxDepth: 64}})
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || !knownCodes[ce.Code] || ce.Code == CodeDuplicateKey || ce.Code == CodeUnsupportedNumber {
				t.Fatalf("unexpected parse error %v", err)
			}
			if strictErr == nil {
				t.Fatal("strict parse accepts what the lenient one refuses")
			}
			return
		}
		dups := false
		var walk func(v Value, ptr string)
		walk = func(v Value, ptr string) {
			if v.Pointer() != ptr {
				t.Fatalf("Pointer = %q, want %q", v.Pointer(), ptr)
			}
			raw := v.Raw()
			if int64(len(data)) < v.Offset()+int64(len(raw)) || !bytes.Equal(data[v.Offset():v.Offset()+int64(len(raw))], raw) {
				t.Fatalf("Raw/Offset mismatch at %q", ptr)
			}
			// Every subtree is valid JSON on its own.
			if sub, err := Parse(raw, ParseOptions{AllowDuplicateKeys: true}); err != nil || sub.Root().Kind() != v.Kind() {
				t.Fatalf("Raw at %q does not re-parse: %v", ptr, err)
			}
			c, err := v.Canonical(PolicyMCPDecl)
			if err == nil {
				if again, err := Canonicalize(c, PolicyMCPDecl); err != nil || !bytes.Equal(again, c) {
					t.Fatalf("subtree at %q not idempotent", ptr)
				}
			} else if !errors.Is(err, CodeDuplicateKey) && !errors.Is(err, CodeUnsupportedNumber) {
				t.Fatalf("subtree at %q: %v", ptr, err)
			}
			switch v.Kind() {
			case KindString:
				s, _ := v.Str()
				if !utf8.ValidString(s) {
					t.Fatalf("Str at %q is not UTF-8", ptr)
				}
			case KindArray:
				for i, e := range v.Elems() {
					walk(e, fmt.Sprintf("%s/%d", ptr, i))
				}
			case KindObject:
				counts := map[string]int{}
				for _, m := range v.Members() {
					counts[m.Name]++
				}
				if v.HasDuplicates() != (len(counts) < v.Len()) {
					t.Fatalf("HasDuplicates wrong at %q", ptr)
				}
				dups = dups || v.HasDuplicates()
				// RangeMembers yields what Members lists, and stops when told.
				i, members := 0, v.Members()
				v.RangeMembers(func(name []byte, val Value) bool {
					if i >= len(members) || string(name) != members[i].Name || val != members[i].Value {
						t.Fatalf("RangeMembers member %d at %q: %q, Members has %d", i, ptr, name, len(members))
					}
					i++
					return true
				})
				if i != len(members) {
					t.Fatalf("RangeMembers yields %d members at %q, Members %d", i, ptr, len(members))
				}
				if len(members) > 1 {
					n := 0
					v.RangeMembers(func([]byte, Value) bool { n++; return false })
					if n != 1 {
						t.Fatalf("RangeMembers went on after false at %q", ptr)
					}
				}
				for _, m := range members {
					got, ok := v.Get(m.Name)
					if ok != (counts[m.Name] == 1) || (ok && got != m.Value) {
						t.Fatalf("Get(%q) at %q = %v", m.Name, ptr, ok)
					}
					tok := strings.ReplaceAll(strings.ReplaceAll(m.Name, "~", "~0"), "/", "~1")
					walk(m.Value, ptr+"/"+tok)
				}
			}
		}
		walk(doc.Root(), "")
		if dups != (strictErr != nil) {
			t.Fatalf("strict parse error %v, duplicates %v", strictErr, dups)
		}
	})
}
