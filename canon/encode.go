package canon

import (
	"io"
	"unicode/utf8"
)

// flushAt is the buffer size at which a streaming encoder hands its output
// to the writer, so a digest never holds a second copy of a large document.
const flushAt = 64 << 10

type encoder struct {
	d      *Doc
	p      Policy
	buf    []byte
	w      io.Writer // nil: keep everything in buf
	n      int64     // bytes flushed to w
	werr   error
	stack  []int32 // scratch for member sorting, shared across objects
	strBuf []byte
}

func (e *encoder) flush() {
	if e.w == nil || e.werr != nil || len(e.buf) < flushAt {
		return
	}
	m, err := e.w.Write(e.buf)
	e.n += int64(m)
	e.werr = err
	e.buf = e.buf[:0]
}

// encode writes the canonical form of node i.
func (e *encoder) encode(i int32) *Error {
	d := e.d
	n := &d.nodes[i]
	switch n.kind {
	case KindNull, KindBool:
		e.buf = append(e.buf, d.src[n.start:n.end]...)
	case KindNumber:
		var why string
		e.buf, why = appendNumber(e.buf, d.src[n.start:n.end], e.p)
		if why != "" {
			return &Error{Code: CodeUnsupportedNumber, Pointer: pointerOf(d.nodes, d.keys, d.src, i), Offset: int64(n.start),
				Detail: quoteBounded(d.src[n.start:n.end]) + ": " + why}
		}
	case KindString:
		if !n.escaped {
			// Validated, no escapes, no control characters: the input
			// bytes are already the canonical form.
			e.buf = append(e.buf, d.src[n.start:n.end]...)
		} else {
			e.strBuf = unescapeInto(e.strBuf[:0], d.src[n.start+1:n.end-1])
			e.buf = appendString(e.buf, e.strBuf)
		}
	case KindArray:
		e.buf = append(e.buf, '[')
		for c := n.first; c >= 0; c = d.nodes[c].next {
			if c != n.first {
				e.buf = append(e.buf, ',')
			}
			if err := e.encode(c); err != nil {
				return err
			}
			e.flush()
		}
		e.buf = append(e.buf, ']')
	case KindObject:
		if n.dup {
			return e.duplicate(i)
		}
		base := len(e.stack)
		e.stack = d.sortedMembers(i, e.stack)
		e.buf = append(e.buf, '{')
		for j := base; j < len(e.stack); j++ {
			c := e.stack[j]
			if j != base {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, d.key(c))
			e.buf = append(e.buf, ':')
			if err := e.encode(c); err != nil {
				return err
			}
			e.flush()
		}
		e.stack = e.stack[:base]
		e.buf = append(e.buf, '}')
	}
	return nil
}

// duplicate reports the second occurrence of a repeated name in a marked
// object (documents parsed with AllowDuplicateKeys).
func (e *encoder) duplicate(obj int32) *Error {
	d := e.d
	seen := map[string]bool{}
	for c := d.nodes[obj].first; c >= 0; c = d.nodes[c].next {
		k := string(d.key(c))
		if seen[k] {
			return &Error{Code: CodeDuplicateKey, Pointer: pointerOf(d.nodes, d.keys, d.src, c),
				Offset: int64(d.nodes[c].keyOff), Detail: "duplicate member name " + quoteBounded([]byte(k))}
		}
		seen[k] = true
	}
	return nil
}

func unescapeInto(dst, raw []byte) []byte {
	p := parser{src: append(append(make([]byte, 0, len(raw)+2), '"'), raw...)}
	p.src = append(p.src, '"')
	p.strBuf = dst
	p.str(-1)
	return p.strBuf
}

// appendString writes s (valid UTF-8) with RFC 8785's minimal escapes.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

var _ = utf8.RuneError
