package clientread

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// JSNumber is JavaScript's Number(s) for a string s (ECMAScript
// StringToNumber), which the TypeScript SDK's Protocol applies to a
// response's id before it looks the request up (Number(response.id) in
// dist/esm/shared/protocol.js, v1 and v2): so the response ids "1", " 1 ",
// "0x1", "1e0" and 1 all match request 1. The bool is false where Number
// gives NaN.
//
// The string is trimmed of JavaScript white space and line terminators
// (including U+FEFF and every Zs character); "" is 0; then it must be a
// decimal literal with optional sign, fraction and exponent, or
// [+-]Infinity, or an unsigned 0x, 0o or 0b integer (no numeric
// separators). The value is rounded to nearest, ties to even.
func JSNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, isJSWhiteSpace)
	if s == "" {
		return 0, true
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			digits := s[2:]
			for _, c := range digits {
				if !isDigitIn(c, base) {
					return 0, false
				}
			}
			n, ok := new(big.Int).SetString(digits, base)
			if !ok {
				return 0, false
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f, true
		}
	}
	body, neg := s, false
	if body[0] == '+' || body[0] == '-' {
		neg = body[0] == '-'
		body = body[1:]
	}
	if body == "Infinity" {
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if !isStrUnsignedDecimalLiteral(body) {
		return 0, false
	}
	// The syntax is checked above because ParseFloat also takes forms that
	// JavaScript does not ("inf", "nan", "0x1p4", "1_000").
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isJSWhiteSpace is ECMAScript's WhiteSpace or LineTerminator.
func isJSWhiteSpace(r rune) bool {
	switch r {
	case '\t', '\v', '\f', '\uFEFF', '\n', '\r', '\u2028', '\u2029':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

func isDigitIn(c rune, base int) bool {
	switch base {
	case 2:
		return c == '0' || c == '1'
	case 8:
		return c >= '0' && c <= '7'
	default:
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
}

// isStrUnsignedDecimalLiteral reports whether s is digits [. digits] [exp]
// or . digits [exp], with at least one digit in the mantissa.
func isStrUnsignedDecimalLiteral(s string) bool {
	i, n := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		n++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			d++
		}
		if d == 0 {
			return false
		}
	}
	return i == len(s)
}
