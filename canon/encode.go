package canon

import "io"

// flushAt is the buffer size at which a streaming encoder hands its output
// to the writer, so a digest never holds a second copy of a large document.
const flushAt = 64 << 10

// check judges the subtree at i under p before anything is written, so every
// entry point is all-or-nothing and reports the same error: the refused
// value (unsupported number, or repeated name in an object marked by
// AllowDuplicateKeys) that comes first in the input.
func (d *Doc) check(i int32, p Policy) *Error {
	end := d.subtreeEnd(i)
	var first *Error
	for k := i; k < end; k++ {
		n := &d.nodes[k]
		if first != nil && int64(n.start) > first.Offset {
			break
		}
		switch {
		case n.kind == KindNumber && !n.simple:
			dec := readDecimal(d.src[n.start:n.end])
			if why := dec.judge(p); why != "" {
				return keepFirst(first, &Error{Code: CodeUnsupportedNumber, Pointer: pointerOf(d.nodes, d.keys, d.src, k),
					Offset: int64(n.start), Detail: quoteBounded(d.src[n.start:n.end]) + ": " + why + " (policy " + p.ID() + ")"})
			}
		case n.kind == KindObject && n.dup:
			// The repeated name can sit after values that come later in
			// the scan; keep looking until the scan passes it.
			first = keepFirst(first, d.duplicate(k))
		}
	}
	return first
}

func keepFirst(a, b *Error) *Error {
	if a == nil || (b != nil && b.Offset < a.Offset) {
		return b
	}
	return a
}

// subtreeEnd returns the index after the last node of the subtree at i: the
// tree is in document order, so that is the next sibling of i or of its
// nearest ancestor that has one.
func (d *Doc) subtreeEnd(i int32) int32 {
	for ; i >= 0; i = d.nodes[i].parent {
		if nx := d.nodes[i].next; nx >= 0 {
			return nx
		}
	}
	return int32(len(d.nodes))
}

// duplicate reports the second occurrence of a repeated name in a marked
// object (documents parsed with AllowDuplicateKeys).
func (d *Doc) duplicate(obj int32) *Error {
	seen := map[string]bool{}
	for c := d.firstChild(obj); c >= 0; c = d.nodes[c].next {
		k := string(d.key(c))
		if seen[k] {
			return &Error{Code: CodeDuplicateKey, Pointer: pointerOf(d.nodes, d.keys, d.src, c),
				Offset: int64(d.nodes[c].keyOff), Detail: "duplicate member name " + quoteBounded([]byte(k))}
		}
		seen[k] = true
	}
	return nil
}

// encoder writes the canonical form of a subtree that check has accepted.
type encoder struct {
	d      *Doc
	buf    []byte
	w      io.Writer // nil: keep everything in buf
	n      int64     // bytes flushed to w
	werr   error
	strBuf []byte
}

func (e *encoder) flush() {
	if e.w == nil || len(e.buf) < flushAt {
		return
	}
	if e.werr == nil {
		m, err := e.w.Write(e.buf)
		e.n += int64(m)
		e.werr = err
	}
	e.buf = e.buf[:0]
}

// encode appends the canonical form of node i.
func (e *encoder) encode(i int32) {
	d := e.d
	n := &d.nodes[i]
	switch n.kind {
	case KindNull, KindBool:
		e.buf = append(e.buf, d.src[n.start:n.end]...)
	case KindNumber:
		if n.simple {
			e.buf = append(e.buf, d.src[n.start:n.end]...)
		} else {
			e.buf = appendAdmitted(e.buf, d.src[n.start:n.end])
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
		for c := d.firstChild(i); c >= 0; c = d.nodes[c].next {
			if c != i+1 {
				e.buf = append(e.buf, ',')
			}
			e.encode(c)
			e.flush()
		}
		e.buf = append(e.buf, ']')
	case KindObject:
		e.buf = append(e.buf, '{')
		for j, c := range d.members(i) {
			if j > 0 {
				e.buf = append(e.buf, ',')
			}
			m := &d.nodes[c]
			if m.keyInBuf {
				e.buf = appendString(e.buf, d.keys[m.keyStart:m.keyEnd])
			} else {
				// An unescaped name is its own canonical form.
				e.buf = append(e.buf, d.src[m.keyStart-1:m.keyEnd+1]...)
			}
			e.buf = append(e.buf, ':')
			e.encode(c)
			e.flush()
		}
		e.buf = append(e.buf, '}')
	}
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
