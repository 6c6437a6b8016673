package redact

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

var knownCodes = map[Code]bool{
	CodeBadPointer: true, CodeBadPattern: true, CodeEmptyPattern: true, CodeTooManyRules: true,
	CodeInvalidMessage: true, CodeSecretInName: true, CodeAmbiguousPointer: true, CodePointerTooLong: true, CodeBadRedaction: true,
}

// fuzzRules has short operator rules, so that random input meets them.
var fuzzRules = func() *Rules {
	r, err := NewRules(Config{
		Pointers: []string{"/arguments/a", "/result/0", "/_meta/m/1", "/arguments/~1~0"},
		Patterns: []string{`zz`, `(?i)^pw`},
		Limits:   canon.Limits{MaxBytes: 1 << 20, MaxDepth: 64},
	})
	if err != nil {
		panic(err)
	}
	return r
}()

// patternRules has operator patterns and no pointers: what Message hides
// with them, Scan must see.
var patternRules = func() *Rules {
	r, err := NewRules(Config{Patterns: []string{`zz`, `(?i)^pw`, `^[0-9]{4}$`}})
	if err != nil {
		panic(err)
	}
	return r
}()

func FuzzMessage(f *testing.F) {
	for _, s := range samples()[:8] {
		f.Add([]byte(`{"params":{"arguments":{"a":1,"b":` + jsonString(s.value) + `}}}`))
	}
	for _, s := range []string{
		`{"params":{"arguments":{"a":{"x":[1]},"/~":"zz","password":"p"},"_meta":{"m":[0,1]}}}`,
		`{"result":[{"pw":"PWx"},"x"],"result":{"_meta":{"m":{"1":true}}}}`,
		`{"k":"[REDACTED:jwt]","token":"[REDACTED:secret_name]"}`, `"zz"`, `[]`, ` {"a" : "zz" } `,
		`{"AccessKeyId":"AKIAABCDEFGHIJKLMNOP","s":"abcdefghijABCDEFGHIJabcdefghijABCDEFGHIJ"}`,
		`{"pass\u0077ord":"hunter2x","k":"\nsk-ant-\u0061aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`,
		`{" pagetoken":"hunter2x","x\"pagetoken":"y","c":"1234"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, rules := range []*Rules{nil, fuzzRules, patternRules} {
			res, spans, err := message(in, rules)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || !knownCodes[e.Code] {
					t.Fatalf("error without a known code: %v", err)
				}
				continue
			}
			// Untouched bytes are preserved: the output is the input with
			// each span, a whole JSON value, replaced by its marker.
			var want []byte
			at := int64(0)
			for _, s := range spans {
				if s.start < at || s.end <= s.start || s.end > int64(len(in)) {
					t.Fatalf("span [%d,%d) after %d in %d bytes", s.start, s.end, at, len(in))
				}
				if _, err := canon.Parse(in[s.start:s.end], canon.ParseOptions{AllowDuplicateKeys: true}); err != nil {
					t.Fatalf("span %q is not one JSON value: %v", in[s.start:s.end], err)
				}
				want = append(append(want, in[at:s.start]...), marker(s.class)...)
				at = s.end
			}
			want = append(want, in[at:]...)
			if !bytes.Equal(res.Redacted, want) {
				t.Fatalf("output is not the input with its spans replaced:\n in  %q\n out %q", in, res.Redacted)
			}
			if len(res.Redactions) != len(spans) || !slices.IsSortedFunc(res.Redactions, func(a, b Redaction) int { return strings.Compare(a.Pointer, b.Pointer) }) {
				t.Fatalf("redactions %v for %d spans", res.Redactions, len(spans))
			}
			// What Message hides, Scan sees (the recorder relies on it for
			// bytes that do not parse); operator pointers name positions,
			// which bytes alone cannot show.
			if rules != fuzzRules && len(res.Redactions) > 0 && !Scan(in, rules) {
				t.Fatalf("Message redacts %v, Scan sees nothing in %q", res.Redactions, in)
			}
			// The output parses.
			if _, err := canon.Parse(res.Redacted, canon.ParseOptions{AllowDuplicateKeys: true}); err != nil {
				t.Fatalf("output does not parse: %v\n%q", err, res.Redacted)
			}
			// A verifier's checks accept what Message produced.
			if err := Check(res.Redacted, res.Redactions, canon.Limits{}); err != nil {
				t.Fatalf("Check: %v\n%q", err, res.Redacted)
			}
			if got, err := apply(in, res.Redactions, canon.Limits{}); err != nil || !bytes.Equal(got, res.Redacted) {
				t.Fatalf("apply: %v\n got  %q\n want %q", err, got, res.Redacted)
			}
			// Idempotence: redacting twice equals once.
			again, err := Message(res.Redacted, rules)
			if err != nil || len(again.Redactions) != 0 || !bytes.Equal(again.Redacted, res.Redacted) {
				t.Fatalf("second pass: %v %v\n once  %q\n twice %q", again.Redactions, err, res.Redacted, again.Redacted)
			}
		}
	})
}

func FuzzArgv(f *testing.F) {
	f.Add("srv\x00--api-key\x00hunter2\x00--token=x\x00-p\x00pw\x00API_KEY=1")
	f.Add("srv\x00zz\x00--x=pwd\x00[REDACTED:jwt]\x00-p\x0080")
	f.Add("ghp_" + gen(alnum, 36))
	f.Fuzz(func(t *testing.T, joined string) {
		argv := strings.Split(joined, "\x00")
		for _, rules := range []*Rules{nil, fuzzRules, patternRules} {
			orig := slices.Clone(argv)
			out, idx := Argv(argv, rules)
			if !slices.Equal(argv, orig) || len(out) != len(argv) || !slices.IsSorted(idx) {
				t.Fatalf("Argv(%q) = %q %v", argv, out, idx)
			}
			for i := range out {
				if (out[i] != argv[i]) != slices.Contains(idx, i) {
					t.Fatalf("entry %d changed=%v but indices %v", i, out[i] != argv[i], idx)
				}
			}
			again, idx2 := Argv(out, rules)
			if !slices.Equal(again, out) || len(idx2) != 0 {
				t.Fatalf("not idempotent: %q -> %q", out, again)
			}
		}
	})
}
