package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escapeTerminal makes hostile text safe to print: control characters
// (including ESC, so no ANSI sequence survives), invalid UTF-8 and
// bidirectional overrides are shown as Go escapes instead of being
// interpreted by the terminal.
func escapeTerminal(s string) string {
	safe := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !printable(r) {
			safe = false
			break
		}
		i += n
	}
	if safe {
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

func printable(r rune) bool {
	if r == '\n' || r == '\t' {
		return true
	}
	if unicode.Is(unicode.Bidi_Control, r) {
		return false
	}
	return unicode.IsPrint(r) || r == ' '
}
