package canon

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// jsonGen writes random JSON that is valid under a policy, in random
// spellings: whitespace, escapes (\u with surrogate pairs, \/, short
// escapes), integer spellings (1.0, 1e3, 10E-1) and, when decimals is set,
// non-integers that survive the binary64 round trip.
type jsonGen struct {
	r        *rand.Rand
	decimals bool
	b        []byte
}

var genRunes = []rune{'a', 'b', 'z', 'A', '0', ' ', '"', '\\', '/', '\n', '\t', 0, 0x1f, 0x7f, 0x80, 0xe9, 0x2028, 0x20ac,
	0xd7ff, 0xe000, 0xfb33, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x1f601, 0x10ffff}

func (g *jsonGen) ws() {
	for g.r.IntN(4) == 0 {
		g.b = append(g.b, " \t\n\r"[g.r.IntN(4)])
	}
}

func (g *jsonGen) str(s []rune) {
	g.b = append(g.b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			g.b = append(g.b, '\\', byte(r))
		case r == '/' && g.r.IntN(2) == 0:
			g.b = append(g.b, '\\', '/')
		case r < 0x20 || g.r.IntN(4) == 0:
			if r == '\n' && g.r.IntN(2) == 0 {
				g.b = append(g.b, '\\', 'n')
				continue
			}
			if r >= 0x10000 {
				r -= 0x10000
				g.b = append(g.b, `\u`+hex4s(0xD800+(r>>10))+`\u`+hex4s(0xDC00+(r&0x3ff))...)
				continue
			}
			e := `\u` + hex4s(r)
			if g.r.IntN(2) == 0 {
				e = string(bytes.ToUpper([]byte(e[2:])))
				e = `\u` + e
			}
			g.b = append(g.b, e...)
		default:
			g.b = utf8.AppendRune(g.b, r)
		}
	}
	g.b = append(g.b, '"')
}

func (g *jsonGen) runes() []rune {
	s := make([]rune, g.r.IntN(6))
	for i := range s {
		s[i] = genRunes[g.r.IntN(len(genRunes))]
	}
	return s
}

func (g *jsonGen) number() {
	if g.decimals && g.r.IntN(2) == 0 {
		// A decimal that survives: the shortest text of some double.
		var f float64
		switch g.r.IntN(3) {
		case 0:
			f = float64(g.r.IntN(100000)) / 100
		case 1:
			f = g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(60)-30))
		default:
			f = math.Float64frombits(g.r.Uint64())
			if math.IsNaN(f) || math.IsInf(f, 0) {
				f = 0.7
			}
		}
		if f == math.Trunc(f) && math.Abs(f) > MaxSafeInteger {
			f = 0.5 // an integer beyond the boundary: refused by canon
		}
		g.b = strconv.AppendFloat(g.b, f, []byte{'e', 'E', 'g', 'f'}[g.r.IntN(4)], -1, 64)
		return
	}
	v := g.r.Int64N(MaxSafeInteger+1) >> g.r.IntN(53)
	if g.r.IntN(2) == 0 {
		v = -v
	}
	switch g.r.IntN(4) {
	case 0:
		g.b = strconv.AppendInt(g.b, v, 10)
		g.b = append(g.b, ".0"...)
	case 1:
		if v%1000 == 0 && v != 0 {
			g.b = strconv.AppendInt(g.b, v/1000, 10)
			g.b = append(g.b, "e3"...)
			return
		}
		g.b = strconv.AppendInt(g.b, v, 10)
		if v != 0 {
			g.b = append(g.b, "0E-1"...)
		}
	default:
		g.b = strconv.AppendInt(g.b, v, 10)
	}
}

func (g *jsonGen) value(depth int) {
	g.ws()
	k := g.r.IntN(8)
	if depth > 4 {
		k = g.r.IntN(4)
	}
	switch k {
	case 0:
		g.b = append(g.b, []string{"null", "true", "false"}[g.r.IntN(3)]...)
	case 1:
		g.str(g.runes())
	case 2, 3:
		g.number()
	case 4, 5:
		g.b = append(g.b, '[')
		n := g.r.IntN(5)
		for i := range n {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.value(depth + 1)
		}
		g.ws()
		g.b = append(g.b, ']')
	default:
		g.b = append(g.b, '{')
		seen := map[string]bool{}
		n := g.r.IntN(6)
		for i := 0; i < n; i++ {
			name := g.runes()
			if seen[string(name)] {
				continue
			}
			seen[string(name)] = true
			if len(seen) > 1 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.str(name)
			g.ws()
			g.b = append(g.b, ':')
			g.value(depth + 1)
		}
		g.ws()
		g.b = append(g.b, '}')
	}
	g.ws()
}

// TestDifferentialJCS: for documents within policy, canon's bytes equal
// gowebpki/jcs.Transform's.
func TestDifferentialJCS(t *testing.T) {
	n := 20_000
	if testing.Short() || raceEnabled {
		n = 2_000
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := range n {
		decimals := i%2 == 1
		g := jsonGen{r: r, decimals: decimals}
		g.value(0)
		p := PolicyV02
		if decimals {
			p = PolicyMCPDecl
		}
		want, err := jcs.Transform(g.b)
		if err != nil {
			t.Fatalf("jcs.Transform(%s): %v", g.b, err)
		}
		got, err := Canonicalize(g.b, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("input %s\ncanon %s (%v)\njcs   %s", g.b, got, err, want)
		}
	}
	// The benchmark document too.
	doc := toolsListDoc(300)
	want, _ := jcs.Transform(doc)
	if got, err := Canonicalize(doc, PolicyMCPDecl); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("tools/list document differs from jcs: %v", err)
	}
}

// TestJCSCoercions: where jcs silently changes a value, canon refuses it.
func TestJCSCoercions(t *testing.T) {
	tests := []struct {
		in      string
		jcsOut  string // what jcs writes instead
		ptr     string
		refusal Code
	}{
		{`9007199254740993`, `9007199254740992`, "", CodeUnsupportedNumber},
		{`[18446744073709551617]`, `[18446744073709552000]`, "/0", CodeUnsupportedNumber},
		{`{"t":1e-400}`, `{"t":0}`, "/t", CodeUnsupportedNumber},
		{`-1e-400`, `0`, "", CodeUnsupportedNumber},
		{`0.10000000000000000555`, `0.1`, "", CodeUnsupportedNumber},
		{`{"x":3.0000000000000001}`, `{"x":3}`, "/x", CodeUnsupportedNumber},
		{`4.9e-324`, `5e-324`, "", CodeUnsupportedNumber},
		{`1e21`, `1e+21`, "", CodeUnsupportedNumber}, // unchanged in value, but beyond 2^53
	}
	for _, tt := range tests {
		got, err := jcs.Transform([]byte(tt.in))
		if err != nil || string(got) != tt.jcsOut {
			t.Errorf("jcs.Transform(%s) = %s, %v; the anchor changed, want %s", tt.in, got, err, tt.jcsOut)
		}
		for _, p := range []Policy{PolicyV02, PolicyMCPDecl} {
			_, err := Canonicalize([]byte(tt.in), p)
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != tt.refusal || ce.Pointer != tt.ptr {
				t.Errorf("%s under %s: %v, want %s at %q", tt.in, p, err, tt.refusal, tt.ptr)
			}
		}
	}
	// -0 is the integer 0 under both policies, and jcs writes 0 too.
	for _, p := range []Policy{PolicyV02, PolicyMCPDecl} {
		got, err := Canonicalize([]byte(`[-0,-0.0,-0e5]`), p)
		j, _ := jcs.Transform([]byte(`[-0,-0.0,-0e5]`))
		if err != nil || string(got) != "[0,0,0]" || !bytes.Equal(got, j) {
			t.Errorf("-0 under %s: %s, %v (jcs %s)", p, got, err, j)
		}
	}
	// What jcs rejects, canon rejects too.
	for _, in := range []string{`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `01`, `+1`, `.5`, `1e400`, `[1,]`} {
		if _, err := jcs.Transform([]byte(in)); err == nil {
			t.Errorf("jcs accepted %s", in)
		}
		if _, err := Canonicalize([]byte(in), PolicyMCPDecl); err == nil {
			t.Errorf("canon accepted %s", in)
		}
	}
}
