package canon

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Limits bound what the parser accepts. Zero fields take the defaults.
type Limits struct {
	MaxBytes int64 // input length in bytes
	MaxDepth int   // nesting of arrays and objects; a scalar document has depth 0
}

// Default limits: real tools/list pages and tool results can be large, so the
// defaults accept a 64 MiB document nested 1,000 deep; anything larger is a
// deliberate choice of the caller.
const (
	DefaultMaxBytes = 64 << 20
	DefaultMaxDepth = 1000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Kind is the JSON type of a value.
type Kind uint8

const (
	KindNull Kind = iota + 1
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "invalid"
}

// node is one value in a flat, document-ordered tree. Containers know their
// first child and child count; children are linked by next. Object members
// carry their key as a span of the source (no escapes) or of Doc.keys
// (unescaped).
type node struct {
	kind     Kind
	escaped  bool  // string value contains a backslash escape
	keyInBuf bool  // key span is in Doc.keys rather than the source
	dup      bool  // object: some member name repeats (only with AllowDuplicateKeys)
	start    int32 // value span in the source
	end      int32
	keyStart int32 // member name (unescaped bytes)
	keyEnd   int32
	keyOff   int32 // offset of the member name's opening quote in the source
	parent   int32
	first    int32 // first child, -1 if none
	next     int32 // next sibling, -1 if none
	count    int32
}

// ParseOptions configure Parse.
type ParseOptions struct {
	Limits
	// AllowDuplicateKeys makes duplicates a property of the tree instead of a
	// parse failure: the object is marked, Value.Get refuses ambiguous names,
	// and canonicalizing any subtree holding it fails with duplicate_key.
	// Callers use it to keep the rest of a document (the other tools of a
	// tools/list page) usable when one part is ambiguous.
	AllowDuplicateKeys bool
}

type parser struct {
	src    []byte
	pos    int
	nodes  []node
	keys   []byte
	opts   ParseOptions
	depth  int
	strBuf []byte
	err    *Error
	// pending is the member name for the next node added (objects only).
	pending    bool
	pendStart  int32
	pendEnd    int32
	pendInBuf  bool
	pendKeyOff int32
}

func parse(src []byte, o ParseOptions) (*Doc, error) {
	o.Limits = o.Limits.withDefaults()
	if int64(len(src)) > o.MaxBytes {
		return nil, &Error{Code: CodeSizeLimit, Offset: o.MaxBytes, Detail: "input exceeds the size limit"}
	}
	if len(src) > 1<<31-1 {
		return nil, &Error{Code: CodeSizeLimit, Offset: 1<<31 - 1, Detail: "input exceeds 2 GiB"}
	}
	p := &parser{src: src, opts: o}
	// A rough guess at node count keeps growth copies off the hot path.
	p.nodes = make([]node, 0, len(src)/8+4)
	p.skipWS()
	if p.pos >= len(src) {
		return nil, p.fail(CodeSyntax, -1, p.pos, "empty input")
	}
	if p.value(-1) != nil {
		return nil, p.err
	}
	p.skipWS()
	if p.pos < len(src) {
		return nil, p.fail(CodeTrailingData, -1, p.pos, "data after the top-level value: "+quoteBounded(src[p.pos:]))
	}
	return &Doc{src: src, nodes: p.nodes, keys: p.keys}, nil
}

// fail records an error located at node n (or, with n == -1 and a pending
// member, at that member) and returns it.
func (p *parser) fail(code Code, n int32, off int, detail string) *Error {
	p.err = &Error{Code: code, Offset: int64(off), Detail: detail}
	p.err.Pointer = pointerOf(p.nodes, p.keys, p.src, n)
	return p.err
}

func (p *parser) skipWS() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) add(n node) int32 {
	if p.pending {
		n.keyStart, n.keyEnd, n.keyInBuf, n.keyOff = p.pendStart, p.pendEnd, p.pendInBuf, p.pendKeyOff
		p.pending = false
	}
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1)
}

// value parses one value as a child of parent and returns non-nil on error.
// The new node's index is len(p.nodes)-1 before children are added.
func (p *parser) value(parent int32) *Error {
	if p.pos >= len(p.src) {
		return p.fail(CodeSyntax, parent, p.pos, "unexpected end of input")
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(parent)
	case c == '[':
		return p.array(parent)
	case c == '"':
		idx := p.add(node{kind: KindString, start: int32(start), parent: parent, first: -1, next: -1})
		esc, err := p.str(idx)
		if err != nil {
			return err
		}
		p.nodes[idx].escaped = esc
		p.nodes[idx].end = int32(p.pos)
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		idx := p.add(node{kind: KindNumber, start: int32(start), parent: parent, first: -1, next: -1})
		if err := p.number(idx); err != nil {
			return err
		}
		p.nodes[idx].end = int32(p.pos)
		return nil
	default:
		for _, lit := range [...]struct {
			text string
			kind Kind
		}{{"null", KindNull}, {"true", KindBool}, {"false", KindBool}} {
			if len(p.src)-p.pos >= len(lit.text) && string(p.src[p.pos:p.pos+len(lit.text)]) == lit.text {
				p.pos += len(lit.text)
				p.add(node{kind: lit.kind, start: int32(start), end: int32(p.pos), parent: parent, first: -1, next: -1})
				return nil
			}
		}
		idx := p.add(node{kind: KindNull, start: int32(start), parent: parent, first: -1, next: -1})
		if c == '+' || c == '.' || c == 'N' || c == 'I' {
			return p.fail(CodeInvalidNumber, idx, p.pos, "not an RFC 8259 number: "+quoteBounded(p.src[p.pos:min(len(p.src), p.pos+12)]))
		}
		return p.fail(CodeSyntax, idx, p.pos, "unexpected "+quoteBounded(p.src[p.pos:p.pos+1]))
	}
}

func (p *parser) enter(idx int32) *Error {
	p.depth++
	if p.depth > p.opts.MaxDepth {
		return p.fail(CodeDepthLimit, idx, p.pos, "nesting exceeds the depth limit")
	}
	return nil
}

func (p *parser) array(parent int32) *Error {
	idx := p.add(node{kind: KindArray, start: int32(p.pos), parent: parent, first: -1, next: -1})
	if err := p.enter(idx); err != nil {
		return err
	}
	p.pos++ // [
	p.skipWS()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.depth--
		p.nodes[idx].end = int32(p.pos)
		return nil
	}
	prev := int32(-1)
	var count int32
	for {
		child := int32(len(p.nodes))
		if err := p.value(idx); err != nil {
			return err
		}
		if prev < 0 {
			p.nodes[idx].first = child
		} else {
			p.nodes[prev].next = child
		}
		prev = child
		count++
		p.skipWS()
		if p.pos >= len(p.src) {
			return p.fail(CodeSyntax, idx, p.pos, "unterminated array")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.skipWS()
		case ']':
			p.pos++
			p.depth--
			p.nodes[idx].end = int32(p.pos)
			p.nodes[idx].count = count
			return nil
		default:
			return p.fail(CodeSyntax, idx, p.pos, "expected ',' or ']' in array, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
	}
}

func (p *parser) object(parent int32) *Error {
	idx := p.add(node{kind: KindObject, start: int32(p.pos), parent: parent, first: -1, next: -1})
	if err := p.enter(idx); err != nil {
		return err
	}
	p.pos++ // {
	p.skipWS()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.depth--
		p.nodes[idx].end = int32(p.pos)
		return nil
	}
	prev := int32(-1)
	var count int32
	for {
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			if p.pos >= len(p.src) {
				return p.fail(CodeSyntax, idx, p.pos, "unterminated object")
			}
			return p.fail(CodeSyntax, idx, p.pos, "expected a member name, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
		keyOff := p.pos
		// Parse the name as a provisional string node so errors inside it
		// point at the object; its decoded bytes become the member's key.
		kidx := p.add(node{kind: KindString, start: int32(keyOff), parent: idx, first: -1, next: -1})
		esc, err := p.str(kidx)
		if err != nil {
			err.Pointer = pointerOf(p.nodes, p.keys, p.src, idx)
			return err
		}
		var ks, ke int32
		inBuf := false
		if esc {
			ks = int32(len(p.keys))
			p.keys = append(p.keys, p.strBuf...)
			ke = int32(len(p.keys))
			inBuf = true
		} else {
			ks, ke = int32(keyOff+1), int32(p.pos-1)
		}
		p.nodes = p.nodes[:kidx] // drop the provisional node
		p.skipWS()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return p.fail(CodeSyntax, idx, p.pos, "expected ':' after member name")
		}
		p.pos++
		p.skipWS()
		child := int32(len(p.nodes))
		p.pending, p.pendStart, p.pendEnd, p.pendInBuf, p.pendKeyOff = true, ks, ke, inBuf, int32(keyOff)
		if err := p.value(idx); err != nil {
			return err
		}
		if prev < 0 {
			p.nodes[idx].first = child
		} else {
			p.nodes[prev].next = child
		}
		prev = child
		count++
		p.skipWS()
		if p.pos >= len(p.src) {
			return p.fail(CodeSyntax, idx, p.pos, "unterminated object")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.skipWS()
		case '}':
			p.pos++
			p.depth--
			p.nodes[idx].end = int32(p.pos)
			p.nodes[idx].count = count
			return p.checkDuplicates(idx)
		default:
			return p.fail(CodeSyntax, idx, p.pos, "expected ',' or '}' in object, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
	}
}

// checkDuplicates sorts the object's member names and rejects repeats.
// Sorting is O(m log m) per object, so hostile wide objects stay cheap.
func (p *parser) checkDuplicates(obj int32) *Error {
	n := p.nodes[obj].count
	if n < 2 {
		return nil
	}
	d := Doc{src: p.src, nodes: p.nodes, keys: p.keys}
	kids := d.sortedMembers(obj, nil)
	for i := 1; i < len(kids); i++ {
		if string(d.key(kids[i-1])) == string(d.key(kids[i])) {
			if p.opts.AllowDuplicateKeys {
				p.nodes[obj].dup = true
				return nil
			}
			later := max(kids[i-1], kids[i]) // the second occurrence in document order
			return p.fail(CodeDuplicateKey, later, int(p.nodes[later].keyOff), "duplicate member name "+quoteBounded(d.key(later)))
		}
	}
	return nil
}

// str scans a string starting at p.pos (the opening quote). It validates
// UTF-8, escapes and surrogates; when the string has escapes its decoded
// UTF-8 is left in p.strBuf. It reports whether the string had escapes.
func (p *parser) str(idx int32) (bool, *Error) {
	p.pos++ // opening quote
	src := p.src
	start := p.pos
	// Fast scan for the common case: ASCII without escapes.
	i := p.pos
	for i < len(src) {
		c := src[i]
		if c == '"' {
			p.pos = i + 1
			return false, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	escaped := false
	p.strBuf = p.strBuf[:0]
	p.strBuf = append(p.strBuf, src[start:i]...)
	for {
		if i >= len(src) {
			return false, p.fail(CodeSyntax, idx, i, "unterminated string")
		}
		c := src[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return escaped, nil
		case c < 0x20:
			return false, p.fail(CodeControlCharacter, idx, i, "unescaped control character U+00"+hex2(c)+" in string")
		case c < 0x80:
			if c != '\\' {
				p.strBuf = append(p.strBuf, c)
				i++
				continue
			}
			escaped = true
			if i+1 >= len(src) {
				return false, p.fail(CodeSyntax, idx, i, "unterminated escape")
			}
			e := src[i+1]
			switch e {
			case '"', '\\', '/':
				p.strBuf = append(p.strBuf, e)
				i += 2
			case 'b':
				p.strBuf = append(p.strBuf, '\b')
				i += 2
			case 'f':
				p.strBuf = append(p.strBuf, '\f')
				i += 2
			case 'n':
				p.strBuf = append(p.strBuf, '\n')
				i += 2
			case 'r':
				p.strBuf = append(p.strBuf, '\r')
				i += 2
			case 't':
				p.strBuf = append(p.strBuf, '\t')
				i += 2
			case 'u':
				r, ok := hex4(src, i+2)
				if !ok {
					return false, p.fail(CodeInvalidEscape, idx, i, "malformed \\u escape")
				}
				i += 6
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					r2, ok := rune(0), false
					if i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
						r2, ok = hex4(src, i+2)
					}
					if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
						return false, p.fail(CodeLoneSurrogate, idx, i-6, "high surrogate without a following low surrogate")
					}
					i += 6
					r = utf16.DecodeRune(r, r2)
				case r >= 0xDC00 && r <= 0xDFFF:
					return false, p.fail(CodeLoneSurrogate, idx, i-6, "low surrogate without a preceding high surrogate")
				}
				p.strBuf = utf8.AppendRune(p.strBuf, r)
			default:
				return false, p.fail(CodeInvalidEscape, idx, i, "invalid escape "+quoteBounded(src[i:i+2]))
			}
		default:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				return false, p.fail(CodeInvalidUTF8, idx, i, "invalid UTF-8 byte 0x"+hex2(c))
			}
			p.strBuf = append(p.strBuf, src[i:i+size]...)
			i += size
		}
	}
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

func hex2(c byte) string { return string([]byte{hexDigits[c>>4], hexDigits[c&15]}) }

// number checks the RFC 8259 number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number(idx int32) *Error {
	src := p.src
	i := p.pos
	bad := func() *Error {
		end := i
		for end < len(src) && end-p.pos < 40 && !isDelim(src[end]) {
			end++
		}
		return p.fail(CodeInvalidNumber, idx, p.pos, "not an RFC 8259 number: "+quoteBounded(src[p.pos:max(end, i+1, p.pos+1)]))
	}
	if src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		return bad()
	}
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || src[i] < '0' || src[i] > '9' {
			return bad()
		}
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || src[i] < '0' || src[i] > '9' {
			return bad()
		}
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	}
	if i < len(src) && !isDelim(src[i]) {
		// "01", "1.2.3", "1x": the literal runs on past the grammar.
		return bad()
	}
	p.pos = i
	return nil
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}
