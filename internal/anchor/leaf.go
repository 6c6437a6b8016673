// Package anchor is tracectl's side of anchoring signed statements in a
// transparency log (spec/anchoring.md): the anchor leaf of trace-spec's
// registry-anchor format, the receipts a bundle keeps in anchors/, their
// offline checks, and the client that submits statements to a C2SP
// tlog-tiles log (tracectl log serve, an embedded Tessera log).
//
// The package never reads the clock: checks are pure functions of the
// bytes and keys given, so verify can use them.
package anchor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
)

// MaxStatementBytes bounds a statement the package encodes as a leaf: a
// Trust Record is a few KiB (sign.MaxRecordBytes is far below this), and a
// C2SP tlog-tiles entry is at most 64 KiB - 1 (Tessera's limit).
const MaxStatementBytes = 1<<16 - 1

// ErrLeaf is wrapped by every failure to encode a statement as a leaf.
var ErrLeaf = errors.New("statement has no anchor leaf")

// Leaf returns the anchor leaf of a JSON statement (a signed Trust Record):
// trace-spec's registry-anchor v1 preimage, the bytes of Python's
// json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True):
// members sorted by code point, no whitespace, every character outside
// printable ASCII escaped as \uXXXX (UTF-16 surrogate pairs, lowercase hex)
// except the short escapes \" \\ \n \r \t \b \f. The log's leaf hash is the
// RFC 6962 SHA-256(0x00 || leaf). Only integers are accepted as numbers
// (records are within the TRACE v0.2 boundary): a fraction or exponent
// would print differently in Python, so it is refused, not guessed.
func Leaf(statement []byte) ([]byte, error) {
	if len(statement) > MaxStatementBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrLeaf, len(statement), MaxStatementBytes)
	}
	// Strict parse first: duplicate names, invalid UTF-8, lone surrogates
	// and trailing bytes are refused (encoding/json would accept them).
	if _, err := canon.Parse(statement, canon.ParseOptions{}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLeaf, err)
	}
	d := json.NewDecoder(bytes.NewReader(statement))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLeaf, err)
	}
	out, err := appendLeaf(make([]byte, 0, len(statement)+64), v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLeaf, err)
	}
	return out, nil
}

func appendLeaf(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("number %.40q is not an integer within 64 bits", string(x))
		}
		return strconv.AppendInt(dst, n, 10), nil
	case string:
		return appendString(dst, x), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendLeaf(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		// Go orders strings by UTF-8 bytes, which is code point order.
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		})
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendLeaf(dst, x[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}

const hexDigits = "0123456789abcdef"

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// appendString quotes s as Python's ensure_ascii encoder does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r >= 0x20 && r <= 0x7e:
			dst = append(dst, byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			dst = appendU(appendU(dst, hi), lo)
		case r == utf8.RuneError:
			// canon.Parse refused invalid UTF-8: this is a real U+FFFD.
			dst = appendU(dst, r)
		default:
			dst = appendU(dst, r)
		}
	}
	return append(dst, '"')
}
