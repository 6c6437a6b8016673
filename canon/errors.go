package canon

import (
	"fmt"
	"strconv"
)

// Code is a stable error code. Codes are part of tracectl's contract
// (spec/canonicalization.md) and are never renamed. A Code is also an error
// value, so callers can write errors.Is(err, canon.CodeDuplicateKey).
type Code string

// Rejection codes, in the order the parser can meet them.
const (
	CodeSizeLimit         Code = "size_limit"         // input longer than Limits.MaxBytes
	CodeDepthLimit        Code = "depth_limit"        // nesting deeper than Limits.MaxDepth
	CodeSyntax            Code = "syntax"             // not RFC 8259 JSON (includes empty input and bad literals)
	CodeTrailingData      Code = "trailing_data"      // non-whitespace after the top-level value
	CodeInvalidUTF8       Code = "invalid_utf8"       // a byte sequence that is not UTF-8
	CodeLoneSurrogate     Code = "lone_surrogate"     // \uD800-\uDFFF escape without its pair, or a reversed pair
	CodeControlCharacter  Code = "control_character"  // U+0000..U+001F unescaped inside a string
	CodeInvalidEscape     Code = "invalid_escape"     // a backslash escape RFC 8259 does not define
	CodeInvalidNumber     Code = "invalid_number"     // a number outside the RFC 8259 grammar: 01, +1, .5, 1., NaN
	CodeDuplicateKey      Code = "duplicate_key"      // a member name repeated in one object, compared after unescaping
	CodeUnsupportedNumber Code = "unsupported_number" // valid JSON whose value the policy cannot represent without coercion
)

func (c Code) Error() string { return string(c) }

// Error is a rejection: what went wrong (Code), where in the value (Pointer,
// RFC 6901), where in the input (Offset, in bytes) and why (Detail).
type Error struct {
	Code    Code
	Pointer string // RFC 6901 JSON Pointer of the offending value ("" is the whole document)
	Offset  int64  // byte offset in the input where the problem was found
	Detail  string // human-readable detail; quoted input is bounded and escaped
}

func (e *Error) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = `""`
	}
	return fmt.Sprintf("%s at %s (byte %d): %s", e.Code, ptr, e.Offset, e.Detail)
}

// Is reports whether target is this error's Code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// quoteBounded quotes at most 64 bytes of input for an error detail.
func quoteBounded(b []byte) string {
	const max = 64
	if len(b) > max {
		return strconv.QuoteToASCII(string(b[:max])) + "..."
	}
	return strconv.QuoteToASCII(string(b))
}
