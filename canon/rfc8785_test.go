package canon

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRFC8785Sample uses the input and output of RFC 8785 section 3.2.2/3.2.3
// (testdata/rfc8785/sample.*, transcribed from the RFC). Its numbers include
// two that TRACE refuses: 333333333.33333329 is rounded by binary64 and 1E30
// is an integer beyond 2^53. jcs passes them through as the RFC does; canon
// refuses. With the refused values removed, canon writes the RFC's bytes.
func TestRFC8785Sample(t *testing.T) {
	in, want := readFile(t, "rfc8785/sample.in.json"), readFile(t, "rfc8785/sample.out.json")
	if got, err := jcs.Transform(in); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("jcs.Transform disagrees with the RFC transcription:\n got %s (%v)\nwant %s", got, err, want)
	}
	for _, p := range []Policy{PolicyV02, PolicyMCPDecl} {
		_, err := Canonicalize(in, p)
		checkErr(t, err, CodeUnsupportedNumber, "/numbers/0", int64(bytes.Index(in, []byte("333333333.33333329"))))
	}

	in = bytes.Replace(in, []byte("333333333.33333329, 1E30, "), nil, 1)
	want = bytes.Replace(want, []byte("333333333.3333333,1e+30,"), nil, 1)
	got, err := Canonicalize(in, PolicyMCPDecl)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got %s (%v)\nwant %s", got, err, want)
	}
	// Under v02 the first non-integer is refused.
	_, err = Canonicalize(in, PolicyV02)
	checkErr(t, err, CodeUnsupportedNumber, "/numbers/0", int64(bytes.Index(in, []byte("4.50"))))
}

// TestRFC8785Sorting is the RFC's property sorting example: UTF-16 code unit
// order puts U+1F600 (D83D DE00) before U+FB33.
func TestRFC8785Sorting(t *testing.T) {
	in, want := readFile(t, "rfc8785/sorting.in.json"), readFile(t, "rfc8785/sorting.out.json")
	for _, p := range []Policy{PolicyV02, PolicyMCPDecl} {
		got, err := Canonicalize(in, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %s (%v)\nwant %s", p, got, err, want)
		}
	}
	if got, _ := jcs.Transform(in); !bytes.Equal(got, want) {
		t.Errorf("jcs.Transform: got %s", got)
	}
}

func TestUTF16Order(t *testing.T) {
	// Sorted by UTF-16 code units: surrogate pairs (D800-DFFF) sort below
	// U+E000..U+FFFF although their code points are higher.
	sorted := []string{
		"", "\x00", "\x1f", "A", "a", "aa", "ab", "\u007f", "\u0080", "\u00f6", "\u07ff", "\u0800", "\u20ac", "\ud7ff",
		"\U00010000", "\U0001f600", "\U0001f600a", "\U0001f601", "\U0001f7ff", "\U0001f800", "\U0010ffff",
		"\ue000", "\ufb33", "\uffff",
	}
	for i := range sorted {
		for j := range sorted {
			got := compareUTF16([]byte(sorted[i]), []byte(sorted[j]))
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("compareUTF16(%+q, %+q) = %d", sorted[i], sorted[j], got)
			}
		}
	}
	// As keys, in a scrambled order, escaped and raw.
	var b strings.Builder
	b.WriteString("{")
	for i, j := range []int{22, 3, 15, 0, 7, 18, 11, 23, 1, 16, 5, 20, 9, 13, 2, 17, 21, 6, 14, 10, 4, 19, 12, 8} {
		if i > 0 {
			b.WriteString(",")
		}
		if j%2 == 0 {
			b.WriteString(mustQuoteASCII(sorted[j]))
		} else {
			b.Write(appendString(nil, []byte(sorted[j])))
		}
		b.WriteString(":0")
	}
	b.WriteString("}")
	var want []byte
	want = append(want, '{')
	for i, k := range sorted {
		if i > 0 {
			want = append(want, ',')
		}
		want = appendString(want, []byte(k))
		want = append(want, ":0"...)
	}
	want = append(want, '}')
	got, err := Canonicalize([]byte(b.String()), PolicyV02)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("got  %+q (%v)\nwant %+q", got, err, want)
	}
	if j, err := jcs.Transform([]byte(b.String())); err != nil || !bytes.Equal(j, want) {
		t.Errorf("jcs: %+q (%v)", j, err)
	}
}

// mustQuoteASCII writes s as a JSON string using only \u escapes outside
// printable ASCII, with surrogate pairs for supplementary characters.
func mustQuoteASCII(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r >= 0x20 && r < 0x7f && r != '"' && r != '\\':
			b.WriteRune(r)
		case r >= 0x10000:
			r -= 0x10000
			b.WriteString(`\u` + hex4s(0xD800+(r>>10)) + `\u` + hex4s(0xDC00+(r&0x3ff)))
		default:
			b.WriteString(`\u` + hex4s(r))
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hex4s(r rune) string {
	return string([]byte{hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15]})
}

// TestRFC8785AppendixB is the number serialization table of RFC 8785
// appendix B, and how each policy judges the serialized text.
func TestRFC8785AppendixB(t *testing.T) {
	const v02, mcp, none = 1, 2, 0 // policies that admit the value's text
	tests := []struct {
		bits  uint64
		want  string // "" for NaN and Infinity, which JSON cannot hold
		admit int    // v02|mcp: both; mcp: mcp-decl only; none
	}{
		{0x0000000000000000, "0", v02 | mcp},
		{0x8000000000000000, "0", v02 | mcp}, // minus zero
		{0x0000000000000001, "5e-324", mcp},
		{0x8000000000000001, "-5e-324", mcp},
		{0x7fefffffffffffff, "1.7976931348623157e+308", none},
		{0xffefffffffffffff, "-1.7976931348623157e+308", none},
		{0x4340000000000000, "9007199254740992", none},
		{0xc340000000000000, "-9007199254740992", none},
		{0x4430000000000000, "295147905179352830000", none},
		{0x7fffffffffffffff, "", none}, // NaN
		{0x7ff0000000000000, "", none}, // Infinity
		{0x44b52d02c7e14af5, "9.999999999999997e+22", none},
		{0x44b52d02c7e14af6, "1e+23", none},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23", none},
		{0x444b1ae4d6e2ef4e, "999999999999999700000", none},
		{0x444b1ae4d6e2ef4f, "999999999999999900000", none},
		{0x444b1ae4d6e2ef50, "1e+21", none},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7", mcp},
		{0x3eb0c6f7a0b5ed8d, "0.000001", mcp},
		{0x41b3de4355555553, "333333333.3333332", mcp},
		{0x41b3de4355555554, "333333333.33333325", mcp},
		{0x41b3de4355555555, "333333333.3333333", mcp},
		{0x41b3de4355555556, "333333333.3333334", mcp},
		{0x41b3de4355555557, "333333333.33333343", mcp},
		{0xbecbf647612f3696, "-0.0000033333333333333333", mcp},
		{0x43143ff3c1cb0959, "1424953923781206.2", mcp},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		j, err := jcs.NumberToJSON(f)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%x: jcs.NumberToJSON accepted %v", tt.bits, f)
			}
			continue
		}
		if got := string(formatES6(nil, f)); got != tt.want || j != tt.want {
			t.Errorf("%x: canon %s, jcs %s, want %s", tt.bits, got, j, tt.want)
		}
		for _, c := range []struct {
			p    Policy
			flag int
		}{{PolicyV02, v02}, {PolicyMCPDecl, mcp}} {
			got, err := Canonicalize([]byte(tt.want), c.p)
			if tt.admit&c.flag != 0 {
				if err != nil || string(got) != tt.want {
					t.Errorf("%s under %s = %s, %v", tt.want, c.p, got, err)
				}
			} else if !errors.Is(err, CodeUnsupportedNumber) {
				t.Errorf("%s under %s = %s, %v; want unsupported_number", tt.want, c.p, got, err)
			}
		}
	}
}

// TestGolden canonicalizes every testdata/golden/*.json under both policies
// and compares with the .golden file beside it (go test -update rewrites
// them). Each golden line is "<policy short name>: <canonical bytes>" or
// "<policy short name>: error <code> at <pointer> (byte <offset>)".
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			for _, p := range []struct {
				name string
				p    Policy
			}{{"v02", PolicyV02}, {"mcp-decl", PolicyMCPDecl}} {
				out, err := Canonicalize(in, p.p)
				got.WriteString(p.name + ": ")
				var ce *Error
				switch {
				case errors.As(err, &ce):
					ptr := ce.Pointer
					if ptr == "" {
						ptr = `""`
					}
					got.WriteString("error " + string(ce.Code) + " at " + ptr + " (byte " + strconv.FormatInt(ce.Offset, 10) + ")")
				case err != nil:
					t.Fatal(err)
				default:
					got.Write(out)
				}
				got.WriteByte('\n')
			}
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("got:\n%s\nwant:\n%s", got.Bytes(), want)
			}
		})
	}
}

// TestCompareKeys checks the sort's prefix comparison against compareUTF16
// on names that straddle the 8-byte prefix, share prefixes, end in NUL bytes
// and mix surrogate pairs with U+E000..U+FFFF.
func TestCompareKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "\x00", "\x01", "é", "€", "\ufb33", "\uffff", "\U0001f600", "\U0001f601", "\U00010000", "aaaaaaa"}
	names := make([]string, 4000)
	for i := range names {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		names[i] = b.String()
	}
	var src []byte
	p := &parser{}
	type span struct{ start, end int32 }
	var spans []span
	for _, n := range names {
		start := len(src)
		src = append(src, n...)
		spans = append(spans, span{int32(start), int32(len(src))})
	}
	p.src = src
	key := func(i int32) (m memberKey) {
		p.setMemberKey(&m, i, spans[i].start, spans[i].end, false, 0)
		return m
	}
	for range 20000 {
		i, j := int32(r.IntN(len(names))), int32(r.IntN(len(names)))
		a, b := key(i), key(j)
		got := p.compareKeys(&a, &b)
		want := compareUTF16([]byte(names[i]), []byte(names[j]))
		if (got < 0) != (want < 0) || (got == 0) != (want == 0) {
			t.Fatalf("compareKeys(%+q, %+q) = %d, compareUTF16 = %d", names[i], names[j], got, want)
		}
		if (want == 0) != (names[i] == names[j]) {
			t.Fatalf("compareUTF16(%+q, %+q) = %d", names[i], names[j], want)
		}
	}
}
