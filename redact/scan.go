package redact

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Scan reports whether raw bytes that are not a redactable JSON message (a
// frame the gate refused, say) hold a secret as the rules see one: a
// detector's shape, an operator pattern, or a secret-like member name
// followed by a value. The caller then keeps none of the bytes; when Scan
// finds nothing, the exact bytes hold nothing Message would have hidden
// from any reading of them, and can be kept. rules nil means Default().
func Scan(raw []byte, rules *Rules) bool {
	if rules == nil {
		rules = Default()
	}
	if scanReading(raw, rules) {
		return true
	}
	// A JSON reading decodes escapes: "pass\u0077ord" is a password's
	// name to any peer that parses it.
	return bytes.IndexByte(raw, '\\') >= 0 && scanReading(looseUnescape(raw), rules)
}

// scanReading is Scan on one reading of the bytes.
func scanReading(raw []byte, rules *Rules) bool {
	if rules.classify(raw, &scratch{}) != "" {
		return true
	}
	if !rules.defaults && len(rules.patterns) == 0 {
		return false
	}
	// Every run between two consecutive quotes is a candidate member name
	// or string value (so neither an escaped quote nor an unbalanced one
	// can shift the pairing past one): a secret-like name, whose value is
	// not found by position in bytes that do not parse, or a value an
	// operator's pattern matches whole (a pattern anchored ^...$ matches
	// no longer text).
	prev := bytes.IndexByte(raw, '"')
	for prev >= 0 {
		next := bytes.IndexByte(raw[prev+1:], '"')
		if next < 0 {
			break
		}
		run := raw[prev+1 : prev+1+next]
		if rules.defaults && len(run) <= 2*maxNameLen {
			name := string(run)
			if nameLooksSecret(name, false) || nameLooksSecret(strings.TrimSpace(name), false) {
				return true
			}
		}
		for _, re := range rules.patterns {
			if re.Match(run) {
				return true
			}
		}
		prev += 1 + next
	}
	return false
}

// Policy says what the rules redact, for a record of the policy in force
// (never the rules' text: an operator's pattern can describe the secret).
func (r *Rules) Policy() (defaults bool, pointers, patterns int) {
	return r.defaults, r.nPointers, len(r.patterns)
}

// PolicyID names the built-in detector set: adding or changing a detector
// changes it.
const PolicyID = "tracectl/redact-v1"

// looseUnescape decodes every well-formed JSON escape in b, wherever it
// stands (the bytes need not parse), and keeps everything else as it is:
// never longer than b.
func looseUnescape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			out = append(out, c)
			continue
		}
		switch e := b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
			i++
		case 'b', 'f', 'n', 'r', 't':
			out = append(out, "\b\f\n\r\t"[strings.IndexByte("bfnrt", e)])
			i++
		case 'u':
			r, n := looseRune(b[i:])
			if n == 0 {
				out = append(out, c)
				continue
			}
			out = utf8.AppendRune(out, r)
			i += n - 1
		default:
			out = append(out, c)
		}
	}
	return out
}

// looseRune decodes the \uXXXX escape (or surrogate pair) at the start of
// b, returning the rune and the bytes it spans; n is 0 when b does not
// start with one. A lone surrogate decodes to U+FFFD.
func looseRune(b []byte) (r rune, n int) {
	h := func(b []byte) rune {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return -1
		}
		for _, c := range b[2:6] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return -1
			}
		}
		return hex4(b[2:6])
	}
	r = h(b)
	if r < 0 {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if r2 := h(b[6:]); r2 >= 0 {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}
