package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escapeTerminal makes hostile text safe to print on one line: every
// control character (C0 including LF, CR and TAB, DEL, C1), invalid
// UTF-8, bidirectional controls, line and paragraph separators and
// invisible format characters (Unicode Cf: zero-width spaces and joiners,
// the BOM, soft hyphen) are shown as Go escapes instead of being
// interpreted or hidden by the terminal. A signed producer string can
// therefore neither start a line of its own (a fake "verdict: verified"),
// nor recolour, retitle or reorder what the report prints. (A backslash is
// kept: details quote evidence with strconv.Quote already, and doubling
// its escapes would make them unreadable; text that merely looks like an
// escape cannot act on the terminal.)
func escapeTerminal(s string) string {
	if isSafeText(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case !printable(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isSafeText reports whether s is valid UTF-8 of printable characters
// only: text escapeTerminal returns unchanged.
func isSafeText(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !printable(r) {
			return false
		}
		i += n
	}
	return true
}

// printable reports a character a terminal shows as itself, taking its
// own cell: a graphic character (letters, marks, numbers, punctuation,
// symbols) or the ASCII space. Controls (Cc), format characters (Cf,
// which holds every bidi control but one), separators other than the space
// (Zl, Zp, and Zs like U+00A0 that look like one) and unassigned or
// private-use code points are not.
func printable(r rune) bool {
	if r == ' ' {
		return true
	}
	if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
		return false
	}
	if unicode.Is(unicode.Bidi_Control, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zs, r) {
		return false
	}
	return unicode.IsGraphic(r) && !unicode.Is(unicode.Co, r)
}

// jsonSafe rewrites JSON text (encoding/json's output, which keeps LF, the
// bidi controls and other format characters raw inside strings) so every
// character escapeTerminal would escape appears as a \u escape instead:
// the report parses to the same value, and no raw control, bidi or
// invisible character reaches a terminal or a log viewer. Outside strings
// the JSON text is ASCII punctuation, digits, letters and the whitespace
// of indentation, which is kept.
func jsonSafe(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			out = append(out, c)
			i++
			continue
		}
		switch {
		case c == '\\':
			// An escape encoding/json wrote: copy it whole.
			out = append(out, b[i:min(i+2, len(b))]...)
			i += 2
			continue
		case c == '"':
			inString = false
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if printable(r) && !(r == utf8.RuneError && n == 1) {
			out = append(out, b[i:i+n]...)
		} else {
			out = appendU(out, r) // invalid UTF-8 (never from encoding/json) as U+FFFD
		}
		i += n
	}
	return out
}

// appendU writes r as one \uXXXX escape, or a surrogate pair.
func appendU(out []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	u := func(v rune) {
		out = append(out, '\\', 'u', hex[v>>12&15], hex[v>>8&15], hex[v>>4&15], hex[v&15])
	}
	if r > 0xffff {
		r -= 0x10000
		u(0xd800 + r>>10)
		u(0xdc00 + r&0x3ff)
		return out
	}
	u(r)
	return out
}
