package canon

import (
	"bytes"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits bound what the parser accepts. Both are inclusive: a document of
// exactly MaxBytes bytes, or nested exactly MaxDepth deep, is accepted. Zero
// (or negative) fields take the defaults.
type Limits struct {
	MaxBytes int64 // input length in bytes; at most 2^31-1 is ever accepted
	MaxDepth int   // nesting of arrays and objects ("[]" is depth 1, a scalar 0); at most DepthCeiling
}

// Default limits: real tools/list pages and tool results can be large, so the
// defaults accept a 64 MiB document nested 1,000 deep; anything larger is a
// deliberate choice of the caller.
const (
	DefaultMaxBytes = 64 << 20
	DefaultMaxDepth = 1000
)

// DepthCeiling caps Limits.MaxDepth whatever the caller asks for: the parser
// and the encoder recurse once per level, and a Go stack overflow is fatal,
// not an error. Larger MaxDepth values are treated as DepthCeiling.
const DepthCeiling = 100_000

// maxInput is the largest input the flat tree can address (int32 offsets).
const maxInput = 1<<31 - 1

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	l.MaxDepth = min(l.MaxDepth, DepthCeiling)
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

// node is one value in a flat, document-ordered tree: a subtree occupies a
// contiguous run of nodes starting at its root, so a container's first child
// (if it has any) is the node after it. Children are linked by next. Object members carry
// their key as a span of the source (no escapes) or of Doc.keys (unescaped).
type node struct {
	kind     Kind
	escaped  bool  // string value contains a backslash escape
	keyInBuf bool  // key span is in Doc.keys rather than the source
	dup      bool  // object: some member name repeats (only with AllowDuplicateKeys)
	simple   bool  // number: the literal is already its canonical integer text
	start    int32 // value span in the source
	end      int32
	keyStart int32 // member name (unescaped bytes)
	keyEnd   int32
	keyOff   int32 // offset of the member name's opening quote in the source
	parent   int32
	next     int32 // next sibling, -1 if none
	count    int32 // containers: number of children
	ord      int32 // objects: members in RFC 8785 order are Doc.order[ord:ord+count]
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
	src   []byte
	pos   int
	nodes []node
	keys  []byte
	order []int32
	// sortBuf is scratch for sortMembers, reused across objects.
	sortBuf []memberKey
	opts    ParseOptions
	depth   int
	err     *Error
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
		return nil, &Error{Code: CodeSizeLimit, Offset: o.MaxBytes, Detail: "input of " + strconv.Itoa(len(src)) + " bytes exceeds the size limit of " + strconv.FormatInt(o.MaxBytes, 10)}
	}
	if len(src) > maxInput {
		return nil, &Error{Code: CodeSizeLimit, Offset: maxInput, Detail: "input exceeds 2^31-1 bytes"}
	}
	p := &parser{src: src, opts: o}
	p.nodes = make([]node, 0, nodeEstimate(src))
	p.order = make([]int32, 0, min(bytes.Count(src, []byte{':'}), cap(p.nodes)))
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
	return &Doc{src: src, nodes: p.nodes, keys: p.keys, order: p.order}, nil
}

// nodeEstimate returns how many nodes to allocate up front so that growth
// copies stay off the hot path. Values are the root, plus the commas between
// siblings, plus one first child per container: 1 + #',' + #'{' + #'['
// bounds them (strings can only add to the counts). Dense documents such as
// [1,1,1,...] hold a node per two bytes, but the estimate is capped at one
// per eight bytes so hostile input cannot make the parser reserve much more
// memory than a real document of its size needs; beyond that, append grows.
func nodeEstimate(src []byte) int {
	n := 1 + bytes.Count(src, []byte{','}) + bytes.Count(src, []byte{'{'}) + bytes.Count(src, []byte{'['})
	return min(n, len(src)/8+64)
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
func (p *parser) value(parent int32) *Error {
	if p.pos >= len(p.src) {
		return p.fail(CodeSyntax, parent, p.pos, "unexpected end of input")
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '"':
		idx := p.add(node{kind: KindString, start: int32(start), parent: parent, next: -1})
		esc, err := p.str(idx)
		if err != nil {
			return err
		}
		n := &p.nodes[idx]
		n.escaped = esc
		n.end = int32(p.pos)
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		idx := p.add(node{kind: KindNumber, start: int32(start), parent: parent, next: -1})
		return p.number(idx)
	case c == '{':
		return p.object(parent)
	case c == '[':
		return p.array(parent)
	}
	for _, lit := range [...]struct {
		text string
		kind Kind
	}{{"null", KindNull}, {"true", KindBool}, {"false", KindBool}} {
		if len(p.src)-p.pos >= len(lit.text) && string(p.src[p.pos:p.pos+len(lit.text)]) == lit.text {
			p.pos += len(lit.text)
			p.add(node{kind: lit.kind, start: int32(start), end: int32(p.pos), parent: parent, next: -1})
			return nil
		}
	}
	idx := p.add(node{kind: KindNull, start: int32(start), parent: parent, next: -1})
	switch c := p.src[p.pos]; c {
	case '+', '.', 'N', 'I':
		return p.fail(CodeInvalidNumber, idx, p.pos, "not an RFC 8259 number: "+quoteBounded(p.src[p.pos:min(len(p.src), p.pos+12)]))
	}
	return p.fail(CodeSyntax, idx, p.pos, "unexpected "+quoteBounded(p.src[p.pos:p.pos+1]))
}

func (p *parser) enter(idx int32) *Error {
	p.depth++
	if p.depth > p.opts.MaxDepth {
		return p.fail(CodeDepthLimit, idx, p.pos, "nesting exceeds the depth limit of "+strconv.Itoa(p.opts.MaxDepth))
	}
	return nil
}

func (p *parser) array(parent int32) *Error {
	idx := p.add(node{kind: KindArray, start: int32(p.pos), parent: parent, next: -1})
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
		// While a child is being parsed, it is not yet linked to its
		// predecessor: pointerOf counts the linked siblings to find its
		// index, which is exactly count.
		child := int32(len(p.nodes))
		if err := p.value(idx); err != nil {
			return err
		}
		if prev >= 0 {
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
	idx := p.add(node{kind: KindObject, start: int32(p.pos), parent: parent, next: -1})
	if err := p.enter(idx); err != nil {
		return err
	}
	p.pos++ // {
	p.skipWS()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.depth--
		n := &p.nodes[idx]
		n.end = int32(p.pos)
		n.ord = int32(len(p.order))
		return nil
	}
	prev := int32(-1)
	var count int32
	for {
		if p.pos >= len(p.src) {
			return p.fail(CodeSyntax, idx, p.pos, "unterminated object")
		}
		if p.src[p.pos] != '"' {
			return p.fail(CodeSyntax, idx, p.pos, "expected a member name, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
		keyOff := p.pos
		// Errors inside a member name point at the object.
		esc, err := p.str(idx)
		if err != nil {
			return err
		}
		ks, ke := int32(keyOff+1), int32(p.pos-1)
		if esc {
			k0 := len(p.keys)
			p.keys = unescapeInto(p.keys, p.src[ks:ke])
			ks, ke = int32(k0), int32(len(p.keys))
		}
		p.skipWS()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return p.fail(CodeSyntax, idx, p.pos, "expected ':' after member name")
		}
		p.pos++
		p.skipWS()
		child := int32(len(p.nodes))
		p.pending, p.pendStart, p.pendEnd, p.pendInBuf, p.pendKeyOff = true, ks, ke, esc, int32(keyOff)
		if err := p.value(idx); err != nil {
			return err
		}
		if prev >= 0 {
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
			return p.sortMembers(idx)
		default:
			return p.fail(CodeSyntax, idx, p.pos, "expected ',' or '}' in object, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
	}
}

// sortMembers records the object's members in RFC 8785 order (UTF-16 code
// units of the unescaped names) in p.order and rejects repeated names, which
// the sort makes adjacent. Sorting is O(m log m) per object, so a hostile
// wide object stays cheap, and the encoder reuses the order.
func (p *parser) sortMembers(obj int32) *Error {
	base := len(p.order)
	p.nodes[obj].ord = int32(base)
	for c := obj + 1; c >= 0; c = p.nodes[c].next {
		p.order = append(p.order, c)
	}
	kids := p.order[base:]
	if len(kids) < 2 {
		return nil
	}
	keys := p.sortBuf[:0]
	for _, c := range kids {
		keys = append(keys, p.memberKey(c))
	}
	p.sortBuf = keys
	sorted := true
	for i := 1; i < len(keys); i++ {
		if p.compareKeys(keys[i-1], keys[i]) >= 0 {
			sorted = false
			break
		}
	}
	if sorted { // canonical input: strictly increasing, so no repeats
		return nil
	}
	slices.SortStableFunc(keys, p.compareKeys)
	for i := range keys {
		kids[i] = keys[i].node
	}
	for i := 1; i < len(keys); i++ {
		if p.compareKeys(keys[i-1], keys[i]) == 0 {
			if p.opts.AllowDuplicateKeys {
				p.nodes[obj].dup = true
				return nil
			}
			// Report the second occurrence in document order: the
			// stable sort keeps equal names in document order.
			later := keys[i].node
			return p.fail(CodeDuplicateKey, later, int(p.nodes[later].keyOff), "duplicate member name "+quoteBounded(p.key(later)))
		}
	}
	return nil
}

// memberKey is a member name as the sort sees it: its first 8 bytes as a
// big-endian integer (zero padded), which decides most comparisons without
// touching the name, and no pointers, so sorting needs no write barriers.
type memberKey struct {
	pre  uint64
	node int32
	n    int32 // length of the name in bytes
}

func (p *parser) memberKey(c int32) memberKey {
	k := p.key(c)
	var pre uint64
	for i := range 8 {
		pre <<= 8
		if i < len(k) {
			pre |= uint64(k[i])
		}
	}
	return memberKey{pre: pre, node: c, n: int32(len(k))}
}

// compareKeys is compareUTF16 on the names of a and b.
func (p *parser) compareKeys(a, b memberKey) int {
	if a.pre != b.pre {
		// The first differing byte decides, as in compareUTF16. A zero
		// padding byte stands for the end of the shorter name: every
		// earlier byte is equal, so that name is a prefix of the other.
		shift := 56 - uint(bits.LeadingZeros64(a.pre^b.pre))&^7
		return utf16Order(byte(a.pre>>shift), byte(b.pre>>shift))
	}
	if a.n <= 8 && b.n <= 8 {
		return int(a.n - b.n) // equal up to trailing NUL bytes
	}
	return compareUTF16(p.key(a.node), p.key(b.node))
}

// key returns the unescaped member name of node i.
func (p *parser) key(i int32) []byte {
	n := &p.nodes[i]
	if n.keyInBuf {
		return p.keys[n.keyStart:n.keyEnd]
	}
	return p.src[n.keyStart:n.keyEnd]
}

// str scans the string whose opening quote is at p.pos and leaves p.pos
// after its closing quote. It validates UTF-8, escapes and surrogates, and
// reports whether the string has escapes. Errors point at node idx.
func (p *parser) str(idx int32) (escaped bool, _ *Error) {
	src := p.src
	i := p.pos + 1
	for {
		// Skip plain ASCII (not '"', '\\' or a control character).
		for i < len(src) && plain[src[i]] {
			i++
		}
		if i >= len(src) {
			return false, p.fail(CodeSyntax, idx, i, "unterminated string")
		}
		switch c := src[i]; {
		case c == '"':
			p.pos = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			n, err := p.escape(idx, i)
			if err != nil {
				return false, err
			}
			i += n
		case c < 0x20:
			return false, p.fail(CodeControlCharacter, idx, i, "unescaped control character U+00"+hex2(c)+" in string")
		default:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				return false, p.fail(CodeInvalidUTF8, idx, i, "invalid UTF-8 byte 0x"+hex2(c))
			}
			i += size
		}
	}
}

// plain marks the bytes a string can hold unchanged that need no further
// check: printable ASCII except '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escape checks the escape sequence at src[i] (a backslash) and returns its
// length in bytes (a surrogate pair counts as one 12-byte sequence).
func (p *parser) escape(idx int32, i int) (int, *Error) {
	src := p.src
	if i+1 >= len(src) {
		return 0, p.fail(CodeSyntax, idx, i, "unterminated escape")
	}
	switch src[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, p.fail(CodeInvalidEscape, idx, i, "invalid escape "+quoteBounded(src[i:i+2]))
	}
	r, ok := hex4(src, i+2)
	if !ok {
		return 0, p.fail(CodeInvalidEscape, idx, i, "malformed \\u escape "+quoteBounded(src[i:min(len(src), i+6)]))
	}
	switch {
	case r >= 0xD800 && r <= 0xDBFF:
		r2, ok := rune(0), false
		if i+7 < len(src) && src[i+6] == '\\' && src[i+7] == 'u' {
			r2, ok = hex4(src, i+8)
		}
		if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
			return 0, p.fail(CodeLoneSurrogate, idx, i, "high surrogate "+quoteBounded(src[i:i+6])+" without a following low surrogate")
		}
		return 12, nil
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, p.fail(CodeLoneSurrogate, idx, i, "low surrogate "+quoteBounded(src[i:i+6])+" without a preceding high surrogate")
	}
	return 6, nil
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

// unescapeInto appends the decoded UTF-8 of a string body that str has
// validated.
func unescapeInto(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && raw[j] != '\\' {
			j++
		}
		dst = append(dst, raw[i:j]...)
		if j >= len(raw) {
			break
		}
		i = j + 2
		switch raw[j+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, j+2)
			i = j + 6
			if r >= 0xD800 && r <= 0xDBFF {
				r2, _ := hex4(raw, j+8)
				r = utf16.DecodeRune(r, r2)
				i = j + 12
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, raw[j+1])
		}
	}
	return dst
}

// number checks the RFC 8259 number grammar
//
//	-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
//
// at p.pos and notes whether the literal is already canonical integer text.
func (p *parser) number(idx int32) *Error {
	src := p.src
	i := p.pos
	if src[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		return p.badNumber(idx, i)
	}
	intEnd := i
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || src[i] < '0' || src[i] > '9' {
			return p.badNumber(idx, i)
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
			return p.badNumber(idx, i)
		}
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	}
	if i < len(src) && !isDelim(src[i]) {
		// "01", "1.2.3", "1x": the literal runs on past the grammar.
		return p.badNumber(idx, i)
	}
	n := &p.nodes[idx]
	n.end = int32(i)
	if i == intEnd { // no fraction, no exponent
		digits := src[intStart:intEnd]
		switch {
		case len(digits) == 1 && digits[0] == '0':
			n.simple = intStart == p.pos // "0" yes, "-0" no
		case len(digits) < 16:
			n.simple = true
		case len(digits) == 16:
			n.simple = string(digits) <= "9007199254740991"
		}
	}
	p.pos = i
	return nil
}

// badNumber reports the literal starting at p.pos, which breaks the grammar
// at i.
func (p *parser) badNumber(idx int32, i int) *Error {
	src := p.src
	end := i
	for end < len(src) && end-p.pos < 40 && !isDelim(src[end]) {
		end++
	}
	end = min(len(src), max(end, i+1, p.pos+1))
	return p.fail(CodeInvalidNumber, idx, p.pos, "not an RFC 8259 number: "+quoteBounded(src[p.pos:end]))
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}
