package canon

import (
	"math"
	"strconv"
)

// A number literal is judged from its exact decimal value, which is read off
// the literal's digits without any arithmetic that could round: the value is
// D × 10^q where D is the string of significant digits (no leading or
// trailing zeros). Everything the policies need follows from D and q:
//
//   - D empty: the value is zero (0, -0, 0.0e-5, 0e999) and is written "0".
//   - q >= 0: an integer by value. It is within ±MaxSafeInteger only if it
//     has at most 16 digits (len(D)+q <= 16), which bounds the arithmetic.
//   - q < 0: a non-integer. It survives the binary64 round trip iff the
//     shortest decimal that rounds to the same binary64 is D × 10^q itself;
//     that decimal never has more than 17 significant digits, so longer D is
//     refused without any float work, and so is an adjusted exponent outside
//     the binary64 range.
//
// The work per literal is linear in its length and bounded: a hostile
// exponent (1e999999999999) or a 60 MB run of digits costs one scan.

// Adjusted-exponent bounds (the exponent of the leading significant digit)
// beyond which a non-integer cannot be a binary64: above maxAdjExp it
// overflows, below minAdjExp it rounds to zero.
const (
	maxAdjExp = 308
	minAdjExp = -324
)

// maxSigDigits is the most significant digits the shortest round-trip
// decimal of a binary64 can have.
const maxSigDigits = 17

// expSaturate caps a parsed exponent. Any literal exponent beyond it is far
// outside every policy; capping keeps q's arithmetic in int64 for inputs of
// up to 2^31 bytes.
const expSaturate = 1 << 40

// decimal is the exact value of an RFC 8259 number literal.
type decimal struct {
	neg bool
	n   int64              // number of significant digits (may exceed len(dig))
	dig [maxSigDigits]byte // the first min(n, maxSigDigits) significant digits, ASCII
	q   int64              // value = D × 10^q
}

func (d *decimal) zero() bool { return d.n == 0 }

// adj is the exponent of the leading significant digit.
func (d *decimal) adj() int64 { return d.q + d.n - 1 }

func (d *decimal) digits() []byte { return d.dig[:min(d.n, maxSigDigits)] }

// readDecimal reads tok, which must already match the RFC 8259 grammar.
func readDecimal(tok []byte) decimal {
	var d decimal
	i := 0
	if tok[0] == '-' {
		d.neg = true
		i++
	}
	var frac, zeros int64 // digits after the point; zeros pending after the last nonzero
	inFrac := false
	for ; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '.':
			inFrac = true
			continue
		case c == 'e' || c == 'E':
			d.q = readExponent(tok[i+1:])
			i = len(tok)
			continue
		}
		if inFrac {
			frac++
		}
		if c == '0' {
			if d.n > 0 {
				zeros++
			}
			continue
		}
		for ; zeros > 0; zeros-- {
			d.push('0')
		}
		d.push(c)
	}
	d.q += zeros - frac
	return d
}

func (d *decimal) push(c byte) {
	if d.n < maxSigDigits {
		d.dig[d.n] = c
	}
	d.n++
}

func readExponent(b []byte) int64 {
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	var e int64
	for _, c := range b {
		e = e*10 + int64(c-'0')
		if e > expSaturate {
			e = expSaturate
			break
		}
	}
	if neg {
		return -e
	}
	return e
}

// Reasons a number is unsupported (the Detail of an unsupported_number error).
const (
	whyIntegerRange = "integer outside ±9007199254740991"
	whyNonInteger   = "non-integer number (the policy admits integers only)"
	whyFloatRange   = "non-integer outside the binary64 range"
	whyRounded      = "non-integer whose exact value binary64 cannot hold (it would be rounded)"
)

// judge decides whether the value is admitted under p. It returns "" or the
// reason it is not.
func (d *decimal) judge(p Policy) string {
	switch {
	case d.zero():
		return ""
	case d.q >= 0:
		if _, ok := d.safeInt(); !ok {
			return whyIntegerRange
		}
		return ""
	case p != PolicyMCPDecl:
		return whyNonInteger
	case d.n > maxSigDigits:
		return whyRounded
	case d.adj() > maxAdjExp || d.adj() < minAdjExp:
		return whyFloatRange
	case d.n <= exactSigDigits && d.adj() >= -maxNormalAdjExp && d.adj() <= maxNormalAdjExp:
		// At most 15 significant digits in the normal range: distinct such
		// decimals round to distinct binary64s, so none shorter rounds to
		// the same one and D × 10^q is its shortest decimal (what
		// roundTrips would find, without the float work).
		return ""
	}
	return d.roundTrips()
}

// exactSigDigits is how many significant decimal digits every normal
// binary64 keeps through decimal-binary-decimal conversion (DBL_DIG), and
// maxNormalAdjExp bounds the adjusted exponents whose 15-digit decimals are
// all normal binary64s (1e-307 and 9.99999999999999e307 are).
const (
	exactSigDigits  = 15
	maxNormalAdjExp = 307
)

// roundTrips judges a non-integer of at most maxSigDigits digits within
// the binary64 exponent range.
func (d *decimal) roundTrips() string {
	// Round to the nearest binary64 (strconv is correctly rounded) and ask
	// for the shortest decimal that rounds back to it: the value survives
	// iff that decimal is D × 10^q. The literal is rebuilt from D and q so
	// its length is bounded whatever the input spelled.
	var lit [maxSigDigits + 8]byte
	b := append(lit[:0], d.digits()...)
	b = append(b, 'e')
	b = strconv.AppendInt(b, d.q, 10)
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f == 0 || math.IsInf(f, 0) {
		return whyFloatRange
	}
	var out [32]byte
	s := strconv.AppendFloat(out[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	sd, adj := splitE(s)
	if adj != d.adj() || string(sd) != string(d.digits()) {
		return whyRounded
	}
	return ""
}

// safeInt returns the value of an integer-valued decimal if it lies within
// ±MaxSafeInteger.
func (d *decimal) safeInt() (int64, bool) {
	if d.q < 0 || d.n+d.q > 16 {
		return 0, false
	}
	var v int64
	for _, c := range d.digits() {
		v = v*10 + int64(c-'0')
	}
	for range d.q {
		v *= 10
	}
	if v > MaxSafeInteger {
		return 0, false
	}
	if d.neg {
		v = -v
	}
	return v, true
}

// splitE splits strconv's shortest 'e' format (d[.ddd]e±xx), in a buffer
// the caller owns, into its significant digits and the exponent of the first
// digit. It rewrites s in place.
func splitE(s []byte) (digits []byte, adj int64) {
	i := 0
	for i < len(s) && s[i] != 'e' {
		i++
	}
	if i > 1 { // drop the point: "d.ddd" -> "dddd"
		s[1] = s[0]
		digits = s[1:i]
	} else {
		digits = s[:1]
	}
	neg := s[i+1] == '-'
	for _, c := range s[i+2:] {
		adj = adj*10 + int64(c-'0')
	}
	if neg {
		adj = -adj
	}
	return digits, adj
}

// appendNumber appends the canonical text of the literal tok under p, or
// returns the reason it is unsupported (and dst unchanged).
func appendNumber(dst, tok []byte, p Policy) ([]byte, string) {
	d := readDecimal(tok)
	if why := d.judge(p); why != "" {
		return dst, why
	}
	return d.appendES6(dst), ""
}

// appendAdmitted appends the canonical text of a literal already judged
// admissible: the text depends only on D and q, because an admitted
// non-integer's D and q are exactly the shortest round-trip digits.
func appendAdmitted(dst, tok []byte) []byte {
	d := readDecimal(tok)
	return d.appendES6(dst)
}

// appendES6 writes D × 10^q as ECMAScript's Number::toString does (the
// number serialization RFC 8785 adopts), given that D is the shortest
// round-trip digit string: plain digits for 1e-6 <= |v| < 1e21, exponent
// form otherwise.
func (d *decimal) appendES6(dst []byte) []byte {
	if d.zero() {
		return append(dst, '0')
	}
	if d.neg {
		dst = append(dst, '-')
	}
	digits := d.digits()
	k := int64(len(digits))
	n := d.adj() + 1 // ES6's n: value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}

// formatES6 is the ES6 text of a finite binary64 as canon writes it: the
// shortest round-trip digits laid out by appendES6. (Exposed to tests, which
// check it against the RFC 8785 author's number sequence.)
func formatES6(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	var out [32]byte
	s := strconv.AppendFloat(out[:0], math.Abs(f), 'e', -1, 64)
	sd, adj := splitE(s)
	d := decimal{neg: f < 0, n: int64(len(sd))}
	copy(d.dig[:], sd)
	d.q = adj - d.n + 1
	return d.appendES6(dst)
}
