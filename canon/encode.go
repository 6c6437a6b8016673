package canon

import (
	"bytes"
	"io"
	"slices"
)

// flushAt is the buffer size at which a streaming encoder hands its output
// to the writer, so a digest never holds a second copy of a large document.
const flushAt = 64 << 10

// check judges the subtree at i under p before anything is written, so every
// entry point is all-or-nothing and reports the same error: the refused
// value (unsupported number, or repeated name in an object marked by
// AllowDuplicateKeys) that comes first in the input.
func (d *Doc) check(i int32, p Policy) *Error {
	end := i + d.size(i)
	var first *Error
	judge := func(k int32) (stop bool) {
		n := &d.nodes[k]
		if first != nil && int64(n.start) > first.Offset {
			return true
		}
		switch d.src[n.start] {
		case '{':
			if flags, _, _ := d.object(k); flags&permDup != 0 {
				// The repeated name can sit after values that come later
				// in the scan; keep looking until the scan passes it.
				first = keepFirst(first, d.duplicate(k))
			}
		case '"', '[', 't', 'f', 'n':
		default: // a number
			if n.aux != 0 {
				return false
			}
			lit := d.src[n.start:d.end(k)]
			dec := readDecimal(lit)
			if why := dec.judge(p); why != "" {
				first = keepFirst(first, &Error{Code: CodeUnsupportedNumber, Pointer: d.pointer(k),
					Offset: int64(n.start), Detail: quoteBounded(lit) + ": " + why + " (policy " + p.ID() + ")"})
				return true
			}
		}
		return false
	}
	if d.judgeAll {
		for k := i; k < end && !judge(k); k++ {
		}
		return first
	}
	// Only the nodes the parser listed can be refused.
	at, _ := slices.BinarySearch(d.judge, i)
	for _, k := range d.judge[at:] {
		if k >= end || judge(k) {
			break
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

// duplicate reports the second occurrence of a repeated name in a marked
// object (documents parsed with AllowDuplicateKeys).
func (d *Doc) duplicate(obj int32) *Error {
	seen := map[string]bool{}
	for c, keyOff := range d.children(obj) {
		k := string(keyAt(d.src, keyOff))
		if seen[k] {
			return &Error{Code: CodeDuplicateKey, Pointer: d.pointer(c),
				Offset: int64(keyOff), Detail: "duplicate member name " + quoteBounded([]byte(k))}
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
	kids   []int32 // members of the objects being written, innermost last
	// lastWord is the last source offset with 16 bytes from it (see
	// copySrc).
	lastWord int32
}

// copySrc appends src[a:b]. A streaming encoder owns its buffer, so a span
// of at most 16 bytes is copied as one 16-byte block into the spare
// capacity (the bytes past the new end are overwritten by what follows or
// never written out), which is cheaper than a copy call for the member
// names and short values that make up most of a document.
func (e *encoder) copySrc(a, b int32) {
	if l := len(e.buf); e.w != nil && b-a <= 16 && cap(e.buf)-l >= 16 && a <= e.lastWord {
		*(*[16]byte)(e.buf[l : l+16]) = *(*[16]byte)(e.d.src[a : a+16])
		e.buf = e.buf[:l+int(b-a)]
		return
	}
	e.buf = append(e.buf, e.d.src[a:b]...)
}

// uvarint reads the uvarint at d.perm[at:] (written by the parser, so
// well formed) and returns it and the offset after it.
func (d *Doc) uvarint(at int) (uint64, int) {
	var v uint64
	for s := uint(0); ; s += 7 {
		b := d.perm[at]
		at++
		v |= uint64(b&0x7f) << s
		if b < 0x80 {
			return v, at
		}
	}
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
	switch src := d.src; src[n.start] {
	case '"':
		if n.aux == 0 {
			// Validated, no escapes, no control characters: the input
			// bytes are already the canonical form.
			end := n.start + 2 + int32(bytes.IndexByte(src[n.start+1:], '"'))
			e.copySrc(n.start, end)
		} else {
			end, _ := stringEnd(src, n.start)
			e.strBuf = unescapeInto(e.strBuf[:0], src[n.start+1:end])
			e.buf = appendString(e.buf, e.strBuf)
		}
	case '[':
		e.buf = append(e.buf, '[')
		for c, end := i+1, i+n.aux; c < end; c += d.size(c) {
			if c != i+1 {
				e.buf = append(e.buf, ',')
			}
			e.encode(c)
			e.flush()
		}
		e.buf = append(e.buf, ']')
	case '{':
		e.buf = append(e.buf, '{')
		flags, size, at := d.object(i)
		base := len(e.kids)
		for c, end := i+1, i+size; c < end; c += d.size(c) {
			e.kids = append(e.kids, c)
		}
		count := len(e.kids) - base
		var ranked [maxRanked]int32
		if flags&permInOrder == 0 && count <= maxRanked {
			unrank(int(d.perm[at]), count, &ranked)
		}
		for j := range count {
			c := e.kids[base+j]
			switch {
			case flags&permInOrder != 0:
			case count <= maxRanked:
				c = e.kids[base+int(ranked[j])]
			default:
				var o uint64
				o, at = d.uvarint(at)
				c = e.kids[base+int(o)]
			}
			if j > 0 {
				e.buf = append(e.buf, ',')
			}
			keyOff, end, esc := nameOf(src, d.nodes[c].start)
			if !esc {
				// An unescaped name is its own canonical form.
				e.copySrc(keyOff, end+1)
			} else {
				e.strBuf = unescapeInto(e.strBuf[:0], src[keyOff+1:end])
				e.buf = appendString(e.buf, e.strBuf)
			}
			e.buf = append(e.buf, ':')
			e.encode(c)
			e.flush()
		}
		e.kids = e.kids[:base]
		e.buf = append(e.buf, '}')
	case 't', 'f', 'n':
		e.copySrc(n.start, d.end(i))
	default: // a number
		if n.aux != 0 {
			e.copySrc(n.start, d.end(i))
		} else {
			e.buf = appendAdmitted(e.buf, src[n.start:d.end(i)])
		}
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
