package canon

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/gowebpki/jcs"
)

func TestNumberPolicies(t *testing.T) {
	const no = "-" // unsupported
	tests := []struct {
		in       string
		v02, mcp string
	}{
		// Integers by value, whatever the spelling.
		{"0", "0", "0"},
		{"-0", "0", "0"},
		{"-0.0", "0", "0"},
		{"0.0e-5", "0", "0"},
		{"0e999", "0", "0"},
		{"-0E+999999999999999999999", "0", "0"},
		{"1.0", "1", "1"},
		{"1e3", "1000", "1000"},
		{"1E3", "1000", "1000"},
		{"1e+3", "1000", "1000"},
		{"1.785e9", "1785000000", "1785000000"},
		{"10E-1", "1", "1"},
		{"100e-2", "1", "1"},
		{"-12.50e1", "-125", "-125"},
		{"0.00012e4", no, "1.2"},
		{"1e15", "1000000000000000", "1000000000000000"},
		{"123456789012345", "123456789012345", "123456789012345"},
		// The ±(2^53-1) boundary.
		{"9007199254740991", "9007199254740991", "9007199254740991"},
		{"-9007199254740991", "-9007199254740991", "-9007199254740991"},
		{"9.007199254740991e15", "9007199254740991", "9007199254740991"},
		{"90071992547409910e-1", "9007199254740991", "9007199254740991"},
		{"9007199254740991.000", "9007199254740991", "9007199254740991"},
		{"9007199254740992", no, no},
		{"-9007199254740992", no, no},
		{"9007199254740993", no, no},
		{"9.007199254740992e15", no, no},
		{"1e16", no, no},
		{"1e20", no, no},
		{"1e21", no, no},
		{"1.7976931348623157e308", no, no},
		{"100000000000000000000000000000000000000000000000", no, no},
		// Non-integers: only mcp-decl, and only when binary64 holds the
		// exact value.
		{"0.5", no, "0.5"},
		{"0.7", no, "0.7"},
		{"0.1", no, "0.1"},
		{"4.50", no, "4.5"},
		{"-1.5", no, "-1.5"},
		{"2e-3", no, "0.002"},
		{"0.000001", no, "0.000001"},
		{"1e-6", no, "0.000001"},
		{"1e-7", no, "1e-7"},
		{"1E-7", no, "1e-7"},
		{"1.5e-7", no, "1.5e-7"},
		{"123e-9", no, "1.23e-7"},
		{"123.456e2", no, "12345.6"},
		{"1234567.0e-3", no, "1234.567"},
		{"0.30000000000000004", no, "0.30000000000000004"},
		{"1424953923781206.2", no, "1424953923781206.2"},
		{"9007199254740991.5", no, no}, // binary64 has no .5 there: rounds
		{"2.2250738585072014e-308", no, "2.2250738585072014e-308"},
		{"1e-300", no, "1e-300"},
		{"1.7976931348623157e-308", no, no}, // subnormal: fewer digits survive
		{"5e-324", no, "5e-324"},
		{"-5e-324", no, "-5e-324"},
		{"4.9e-324", no, no}, // rounds to 5e-324
		{"2e-324", no, no},   // rounds to 0
		{"1e-400", no, no},   // jcs: 0
		{"-1e-400", no, no},  // jcs: 0
		{"1e400", no, no},    // integer by value, far out of range
		{"1.5e400", no, no},  // integer by value
		{"1.5e-400", no, no}, // underflow
		{"0.10000000000000000555", no, no},
		{"0.3000000000000000444", no, no},
		{"3.0000000000000001", no, no}, // rounds to the integer 3
		{"1.23456789012345678", no, no},
		{"9007199254740991.0000000000000000000001", no, no},
		// Hostile exponents and lengths cost one scan.
		{"1e999999999999", no, no},
		{"1e-999999999999", no, no},
		{"1.5e+99999999999999999999999999", no, no},
		{"0." + strings.Repeat("0", 100000) + "1", no, no},
		{"1" + strings.Repeat("0", 100000), no, no},
		{"1" + strings.Repeat("0", 100000) + "e-100000", "1", "1"},
		{"0." + strings.Repeat("0", 100000) + "5e100001", "5", "5"},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			p    Policy
			want string
		}{{PolicyV02, tt.v02}, {PolicyMCPDecl, tt.mcp}} {
			got, why := appendNumber(nil, []byte(tt.in), c.p)
			if c.want == no {
				if why == "" {
					t.Errorf("%.40s under %s = %s, want unsupported", tt.in, c.p, got)
				}
				continue
			}
			if why != "" || string(got) != c.want {
				t.Errorf("%.40s under %s = %q (%s), want %q", tt.in, c.p, got, why, c.want)
			}
			// The parser's shortcut for plain integers agrees.
			doc, err := Canonicalize([]byte("["+tt.in+"]"), c.p)
			if err != nil || string(doc) != "["+c.want+"]" {
				t.Errorf("Canonicalize([%.40s]) under %s = %s, %v", tt.in, c.p, doc, err)
			}
		}
	}
}

// TestHostileNumbers: literals the grammar admits but no policy does cost
// one linear scan, however long the digit run or the exponent. (Handing an
// 8 MB digit string to a big-number library costs seconds to minutes.)
func TestHostileNumbers(t *testing.T) {
	n := 8 << 20
	if raceEnabled {
		n = 1 << 20
	}
	for _, lit := range []string{
		"1" + strings.Repeat("0", n),
		"0." + strings.Repeat("0", n) + "1",
		"1." + strings.Repeat("3", n),
		"1" + strings.Repeat("0", n) + "e-" + strconv.Itoa(n),
		"1e" + strings.Repeat("9", n),
		"-0." + strings.Repeat("0", n) + "e-" + strings.Repeat("9", 100),
	} {
		start := time.Now()
		got, err := Canonicalize([]byte(lit), PolicyMCPDecl)
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%.20s... took %v", lit, el)
		}
		if err != nil && !errors.Is(err, CodeUnsupportedNumber) {
			t.Errorf("%.20s...: %v", lit, err)
		}
		if err == nil && string(got) != "1" && string(got) != "0" {
			t.Errorf("%.20s... = %.20s", lit, got)
		}
	}
}

// oracle is the policy written directly with apd, as in the design notes:
// exact decimal arithmetic decides, strconv/jcs formats.
func oracle(tok string, p Policy) (string, bool) {
	var d apd.Decimal
	if _, _, err := d.SetString(tok); err != nil {
		panic(err)
	}
	if d.IsZero() {
		return "0", true
	}
	var ip, frac apd.Decimal
	d.Modf(&ip, &frac)
	if frac.IsZero() {
		max := apd.New(MaxSafeInteger, 0)
		var abs apd.Decimal
		abs.Abs(&d)
		if abs.Cmp(max) > 0 {
			return "", false
		}
		i, err := ip.Int64()
		if err != nil {
			panic(err)
		}
		return strconv.FormatInt(i, 10), true
	}
	if p != PolicyMCPDecl {
		return "", false
	}
	f, err := d.Float64()
	if err != nil || f == 0 || math.IsInf(f, 0) {
		return "", false
	}
	var back apd.Decimal
	if _, err := back.SetFloat64(f); err != nil || d.Cmp(&back) != 0 {
		return "", false
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		panic(err)
	}
	return s, true
}

// randomLiteral returns an RFC 8259 number literal: random digit strings
// with runs of zeros, random exponents near the binary64 range and the
// shortest, 17-digit and 'f' spellings of random doubles.
func randomLiteral(r *rand.Rand) string {
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			if r.IntN(3) == 0 {
				b[i] = '0'
			} else {
				b[i] = byte('0' + r.IntN(10))
			}
		}
		return string(b)
	}
	switch r.IntN(6) {
	case 0, 1, 2:
		var s string
		if r.IntN(3) == 0 {
			s = "-"
		}
		if r.IntN(3) == 0 {
			s += "0"
		} else {
			s += string(byte('1'+r.IntN(9))) + digits(r.IntN(20))
		}
		if r.IntN(2) == 0 {
			s += "." + digits(1+r.IntN(20))
		}
		if r.IntN(2) == 0 {
			s += []string{"e", "E"}[r.IntN(2)] + []string{"", "+", "-"}[r.IntN(3)] + strconv.Itoa(r.IntN(330))
		}
		return s
	case 3:
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 1.5
		}
		return strconv.FormatFloat(f, 'e', -1, 64)
	case 4:
		f := r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		return strconv.FormatFloat(f, []byte{'e', 'f', 'g'}[r.IntN(3)], []int{-1, 16, 17, 15}[r.IntN(4)], 64)
	default:
		// Integers near the boundary, spelled many ways.
		v := MaxSafeInteger - 5 + r.Int64N(10)
		if r.IntN(2) == 0 {
			v = -v
		}
		s := strconv.FormatInt(v, 10)
		switch r.IntN(3) {
		case 0:
			return s + ".000"
		case 1:
			return s + "0e-1"
		}
		return s
	}
}

// TestNumberOracle checks the digit-string decision procedure against apd.
func TestNumberOracle(t *testing.T) {
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 10_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		tok := randomLiteral(r)
		for _, p := range []Policy{PolicyV02, PolicyMCPDecl} {
			want, ok := oracle(tok, p)
			got, why := appendNumber(nil, []byte(tok), p)
			if ok != (why == "") || string(got) != want {
				t.Fatalf("%s under %s: got %q (%s), oracle %q (ok=%v)", tok, p, got, why, want, ok)
			}
		}
	}
}

// TestFormatES6 pins the layout rules on values around every switch point.
func TestFormatES6(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{123e18, "123000000000000000000"},
		{1.5e21, "1.5e+21"},
		{0.000001, "0.000001"},
		{0.0000015, "0.0000015"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{12.5, "12.5"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.SmallestNonzeroFloat64, "5e-324"},
	}
	for _, tt := range tests {
		got := string(formatES6(nil, tt.f))
		if got != tt.want {
			t.Errorf("formatES6(%v) = %q, want %q", tt.f, got, tt.want)
		}
		if j, _ := jcs.NumberToJSON(tt.f); j != got {
			t.Errorf("formatES6(%v) = %q, jcs says %q", tt.f, got, j)
		}
	}
}

// The 15-digit shortcut of decimal.judge agrees with the float round trip
// (roundTrips) it skips: random decimals of 1 to 15 significant digits
// across the whole normal range, with the range's edges, all round-trip.
// Just outside (16 digits, or an adjusted exponent of ±308) the shortcut
// does not apply.
func TestJudgeShortcut(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var checked int
	for i := range 20000 {
		n := 1 + r.IntN(exactSigDigits)
		var b strings.Builder
		b.WriteByte(byte('1' + r.IntN(9)))
		for range n - 1 {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		digits := strings.TrimRight(b.String(), "0")
		adj := -maxNormalAdjExp + r.IntN(2*maxNormalAdjExp+1)
		switch i {
		case 0:
			digits, adj = "999999999999999", maxNormalAdjExp
		case 1:
			digits, adj = "1", -maxNormalAdjExp
		case 2:
			digits, adj = "222507385850720", -maxNormalAdjExp-1 // about DBL_MIN: outside
		}
		lit := digits[:1] + "." + digits[1:] + "0e" + strconv.Itoa(adj)
		d := readDecimal([]byte(lit))
		if d.q >= 0 {
			continue // an integer: not judged by the round trip
		}
		inside := d.n <= exactSigDigits && d.adj() >= -maxNormalAdjExp && d.adj() <= maxNormalAdjExp
		if inside != (i != 2) {
			t.Fatalf("%s: shortcut applies %v", lit, inside)
		}
		if inside {
			if why := d.roundTrips(); why != "" {
				t.Fatalf("%s: the shortcut admits it, roundTrips says %s", lit, why)
			}
			checked++
		}
		if got, want := d.judge(PolicyMCPDecl), d.roundTrips(); got != want {
			t.Fatalf("%s: judge %q, roundTrips %q", lit, got, want)
		}
	}
	if checked < 8000 { // the rest are integers
		t.Fatalf("only %d decimals went through the shortcut", checked)
	}
}
