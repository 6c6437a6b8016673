package canon

import (
	"bytes"
	"encoding/binary"
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
	MaxDepth int   // nesting of arrays and objects ("[]" is depth 1, a scalar 0); at most 100,000 (depthCeiling)
}

// Default limits: real tools/list pages and tool results can be large, so the
// defaults accept a 64 MiB document nested 1,000 deep; anything larger is a
// deliberate choice of the caller.
const (
	DefaultMaxBytes = 64 << 20
	DefaultMaxDepth = 1000
)

// depthCeiling caps Limits.MaxDepth whatever the caller asks for: the parser
// and the encoder recurse once per level, and a Go stack overflow is fatal,
// not an error. Larger MaxDepth values are treated as depthCeiling.
const depthCeiling = 100_000

// maxInput is the largest input the flat tree can address (int32 offsets).
const maxInput = 1<<31 - 1

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	l.MaxDepth = min(l.MaxDepth, depthCeiling)
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
// (if it has any) is the node after it, and the next sibling of node i (if it
// has one) is node i+size (see Doc.size). Nodes are 8 bytes and hold no
// pointers: what the validated source says again cheaply is not stored. The
// kind is the value's first byte; a scalar's end is found by scanning it (a
// string without escapes ends at the next quote), a container's after its
// last child; a member's name is the string before its value's ':'; parents
// come from a walk down from the root, which only pointers (error reports)
// need.
type node struct {
	start int32 // the value's first byte in the source
	// aux depends on the kind: strings 1 when the value has a backslash
	// escape; numbers 1 when the literal is already its canonical integer
	// text; arrays the nodes in their subtree, this one included; objects
	// the offset in Doc.perm of their header (subtree size and member
	// order, see sortMembers); true, false and null 0.
	aux int32
}

// kindOf returns the kind of the value whose first byte is c.
func kindOf(c byte) Kind {
	switch c {
	case '"':
		return KindString
	case '{':
		return KindObject
	case '[':
		return KindArray
	case 't', 'f':
		return KindBool
	case 'n':
		return KindNull
	}
	return KindNumber
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
	keys  []byte // unescaped member names, for the sort only
	perm  []byte
	// members holds the members of the open objects, innermost last; each
	// object sorts its own run when it closes.
	members []memberKey
	// path holds the open containers, outermost first: what an error's
	// pointer is built from while the tree is incomplete.
	path  []frame
	opts  ParseOptions
	depth int
	err   *Error
	// judge, judgeAll: see Doc; judgeUnsorted when an object was listed.
	judge         []int32
	judgeAll      bool
	judgeUnsorted bool
}

// listJudge adds node idx to the judge list, which holds at most one node
// per 64 input bytes (real documents have far fewer decimals; past that,
// check scans every node).
func (p *parser) listJudge(idx int32) {
	switch {
	case p.judgeAll:
	case len(p.judge) >= len(p.src)/64+16:
		p.judge, p.judgeAll = nil, true
	default:
		p.judge = append(p.judge, idx)
	}
}

// frame is an open container and the child being parsed in it.
type frame struct {
	obj     bool
	count   int32 // children completed (an array's current index)
	keyOff  int32 // objects: the current member's name (its opening quote)
	keyNext int   // objects: index in members of the object's first member
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
	// A byte per member and per object (while objects have fewer than 128
	// members and 32 nodes), and every object and every member is a node:
	// about two bytes a node at most. Capacity that is never written costs no
	// memory in a fresh process, and counting members first would cost two
	// passes.
	p.perm = make([]byte, 0, 2*cap(p.nodes))
	p.skipWS()
	if p.pos >= len(src) {
		return nil, p.fail(CodeSyntax, false, p.pos, "empty input")
	}
	if p.value() != nil {
		return nil, p.err
	}
	p.skipWS()
	if p.pos < len(src) {
		return nil, p.fail(CodeTrailingData, false, p.pos, "data after the top-level value: "+quoteBounded(src[p.pos:]))
	}
	if p.judgeUnsorted {
		slices.Sort(p.judge) // objects are listed when they close, after their members
	}
	return &Doc{src: src, nodes: p.nodes, perm: p.perm, judge: p.judge, judgeAll: p.judgeAll}, nil
}

// nodeEstimate returns how many nodes to allocate up front so that growth
// copies stay off the hot path. Values are the root, plus the commas between
// siblings, plus one first child per container: 1 + #',' + #'{' + #'['
// bounds them (strings can only add to the counts). Dense documents such as
// [1,1,1,...] hold a node per two bytes, but the estimate is capped at one
// per eight bytes so hostile input cannot make the parser reserve much more
// memory than a real document of its size needs; beyond that, append grows.
// (Reserved pages that are never written cost address space, not memory.)
//
// The three counts run over one cache-sized chunk at a time, so the input
// is read from memory once, not three times.
func nodeEstimate(src []byte) int {
	const chunk = 32 << 10
	n, cap8 := 1, len(src)/8+64
	for len(src) > 0 {
		c := src[:min(len(src), chunk)]
		n += bytes.Count(c, []byte{','}) + bytes.Count(c, []byte{'{'}) + bytes.Count(c, []byte{'['})
		src = src[len(c):]
	}
	return min(n, cap8)
}

// fail records an error and returns it. Its pointer is that of the
// innermost open container, or with atChild, of the value being parsed in
// it (the document itself when nothing is open).
func (p *parser) fail(code Code, atChild bool, off int, detail string) *Error {
	p.err = &Error{Code: code, Offset: int64(off), Detail: detail, Pointer: p.pointer(atChild, nil)}
	return p.err
}

// pointer builds the RFC 6901 pointer of the innermost open container (with
// atChild: of its current child; with name: of its member of that name)
// from the path of open containers.
func (p *parser) pointer(atChild bool, name []byte) string {
	n := len(p.path)
	if !atChild {
		n--
	}
	var b []byte
	for j := range max(n, 0) {
		f := &p.path[j]
		if f.obj {
			b = appendPointerToken(append(b, '/'), keyAt(p.src, f.keyOff))
		} else {
			b = strconv.AppendInt(append(b, '/'), int64(f.count), 10)
		}
	}
	if name != nil {
		b = appendPointerToken(append(b, '/'), name)
	}
	return string(b)
}

func (p *parser) skipWS() {
	for p.pos < len(p.src) {
		// Every byte above ' ' ends the run: one comparison for the
		// common case, compact input.
		if c := p.src[p.pos]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
		p.pos++
	}
}

func (p *parser) add(start int) int32 {
	p.nodes = append(p.nodes, node{start: int32(start)})
	return int32(len(p.nodes) - 1)
}

// value parses one value as the current child of the innermost open
// container (or as the document) and returns non-nil on error.
func (p *parser) value() *Error {
	if p.pos >= len(p.src) {
		return p.fail(CodeSyntax, false, p.pos, "unexpected end of input")
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '"':
		idx := p.add(start)
		esc, err := p.str(true)
		if err != nil {
			return err
		}
		if esc {
			p.nodes[idx].aux = 1
		}
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(p.add(start))
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	}
	for _, lit := range [...]string{"null", "true", "false"} {
		if len(p.src)-p.pos >= len(lit) && string(p.src[p.pos:p.pos+len(lit)]) == lit {
			p.pos += len(lit)
			p.add(start)
			return nil
		}
	}
	switch c := p.src[p.pos]; c {
	case '+', '.', 'N', 'I':
		return p.fail(CodeInvalidNumber, true, p.pos, "not an RFC 8259 number: "+quoteBounded(p.src[p.pos:min(len(p.src), p.pos+12)]))
	}
	return p.fail(CodeSyntax, true, p.pos, "unexpected "+quoteBounded(p.src[p.pos:p.pos+1]))
}

// enter opens the container just added at idx.
func (p *parser) enter(obj bool) *Error {
	p.depth++
	if p.depth > p.opts.MaxDepth {
		return p.fail(CodeDepthLimit, true, p.pos, "nesting exceeds the depth limit of "+strconv.Itoa(p.opts.MaxDepth))
	}
	p.path = append(p.path, frame{obj: obj, keyNext: len(p.members)})
	return nil
}

// leave closes the innermost container: its subtree is complete.
func (p *parser) leave() {
	p.depth--
	p.path = p.path[:len(p.path)-1]
}

func (p *parser) array() *Error {
	idx := p.add(p.pos)
	if err := p.enter(false); err != nil {
		return err
	}
	p.pos++ // [
	p.skipWS()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.nodes[idx].aux = 1
		p.leave()
		return nil
	}
	f := len(p.path) - 1
	for {
		if err := p.value(); err != nil {
			return err
		}
		p.path[f].count++
		p.skipWS()
		if p.pos >= len(p.src) {
			return p.fail(CodeSyntax, false, p.pos, "unterminated array")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.skipWS()
		case ']':
			p.pos++
			p.nodes[idx].aux = int32(len(p.nodes)) - idx
			p.leave()
			return nil
		default:
			return p.fail(CodeSyntax, false, p.pos, "expected ',' or ']' in array, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
	}
}

func (p *parser) object() *Error {
	idx := p.add(p.pos)
	if err := p.enter(true); err != nil {
		return err
	}
	p.pos++ // {
	p.skipWS()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.nodes[idx].aux = int32(len(p.perm))
		p.perm = append(p.perm, 1<<2|permInOrder) // size 1, no members
		p.leave()
		return nil
	}
	f := len(p.path) - 1
	for {
		if p.pos >= len(p.src) {
			return p.fail(CodeSyntax, false, p.pos, "unterminated object")
		}
		if p.src[p.pos] != '"' {
			return p.fail(CodeSyntax, false, p.pos, "expected a member name, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
		keyOff := p.pos
		// Errors inside a member name point at the object.
		esc, err := p.str(false)
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
			return p.fail(CodeSyntax, false, p.pos, "expected ':' after member name")
		}
		p.pos++
		p.skipWS()
		p.path[f].keyOff = int32(keyOff)
		// Filled in place: a member built whole and then copied in is
		// written in small stores and read back in wide ones, which the
		// CPU cannot forward.
		p.members = append(p.members, memberKey{})
		p.setMemberKey(&p.members[len(p.members)-1], p.path[f].count, ks, ke, esc, int32(keyOff))
		if err := p.value(); err != nil {
			return err
		}
		p.path[f].count++
		p.skipWS()
		if p.pos >= len(p.src) {
			return p.fail(CodeSyntax, false, p.pos, "unterminated object")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.skipWS()
		case '}':
			p.pos++
			if err := p.sortMembers(idx, f); err != nil {
				return err
			}
			p.leave()
			return nil
		default:
			return p.fail(CodeSyntax, false, p.pos, "expected ',' or '}' in object, found "+quoteBounded(p.src[p.pos:p.pos+1]))
		}
	}
}

// sortMembers records the object's members in RFC 8785 order (UTF-16 code
// units of the unescaped names) in p.perm and rejects repeated names, which
// the sort makes adjacent. Sorting is O(m log m) per object, so a hostile
// wide object stays cheap, and the encoder reuses the order.
//
// The order follows a uvarint header: the object's subtree size in nodes
// (see node) <<2 | permInOrder (already sorted: no order follows) | permDup
// (a name repeats; AllowDuplicateKeys only). It is the rank of the
// permutation in a byte for objects of up to maxRanked members, else the
// members' positions in the document as uvarints. Real objects have few
// members and nodes, so an object costs a byte or two, and a member of a
// wide one a byte.
func (p *parser) sortMembers(obj int32, f int) *Error {
	base := p.path[f].keyNext
	keys := p.members[base:]
	defer func() { p.members = p.members[:base] }()
	sorted, dup := true, false
	if len(keys) <= 12 {
		// Insertion sort: stable, and for the few members of real objects
		// cheaper than a generic sort. It stops inserting a name at the
		// first one not greater, so a repeated name meets its twin.
		for i := 1; i < len(keys); i++ {
			x := keys[i]
			j := i
			for ; j > 0; j-- {
				if c := p.compareKeys(&keys[j-1], &x); c <= 0 {
					dup = dup || c == 0
					break
				}
				keys[j] = keys[j-1]
			}
			if j != i {
				keys[j] = x
				sorted = false
			}
		}
		// Canonical input is strictly increasing, so has no repeats.
		sorted = sorted && !dup
	} else {
		for i := 1; i < len(keys); i++ {
			if p.compareKeys(&keys[i-1], &keys[i]) >= 0 {
				sorted = false
				break
			}
		}
		if !sorted {
			slices.SortStableFunc(keys, func(a, b memberKey) int { return p.compareKeys(&a, &b) })
			dup = true // to be seen below
		}
	}
	hdr := uint64(int32(len(p.nodes))-obj) << 2
	if sorted {
		hdr |= permInOrder
	}
	if dup {
		for i := 1; i < len(keys); i++ {
			if p.compareKeys(&keys[i-1], &keys[i]) == 0 {
				if !p.opts.AllowDuplicateKeys {
					// Report the second occurrence in document order: the
					// stable sort keeps equal names in document order.
					later := keys[i]
					name := p.key(later)
					p.err = &Error{Code: CodeDuplicateKey, Offset: int64(later.keyOff), Pointer: p.pointer(false, name),
						Detail: "duplicate member name " + quoteBounded(name)}
					return p.err
				}
				hdr |= permDup
				p.listJudge(obj)
				p.judgeUnsorted = true
				break
			}
		}
	}
	p.nodes[obj].aux = int32(len(p.perm))
	p.perm = binary.AppendUvarint(p.perm, hdr)
	switch {
	case sorted:
	case len(keys) <= maxRanked:
		// The permutation's rank (its Lehmer code) fits in a byte.
		rank := 0
		for k := range keys {
			less := 0
			for _, later := range keys[k+1:] {
				if later.ord < keys[k].ord {
					less++
				}
			}
			rank += less * factorial[len(keys)-1-k]
		}
		p.perm = append(p.perm, byte(rank))
	default:
		for _, k := range keys {
			p.perm = binary.AppendUvarint(p.perm, uint64(k.ord))
		}
	}
	return nil
}

// maxRanked is the most members an object can have for its order to be
// kept as the rank of its permutation, one byte (5! = 120), instead of a
// byte or more per member.
const maxRanked = 5

var factorial = [maxRanked]int{1, 1, 2, 6, 24}

// unrank writes to ord the document positions of the members of an object
// of count <= maxRanked members in canonical order, from the rank that
// sortMembers recorded.
func unrank(rank, count int, ord *[maxRanked]int32) {
	avail := [maxRanked]int32{0, 1, 2, 3, 4}
	for k := range count {
		f := factorial[count-1-k]
		d := rank / f
		rank %= f
		ord[k] = avail[d]
		copy(avail[d:count-1-k], avail[d+1:count-k])
	}
}

// Flags of an object's permutation header (see sortMembers).
const (
	permDup     = 1
	permInOrder = 2
)

// memberKey is a member name as the sort sees it: its first 8 bytes as a
// big-endian integer (zero padded), which decides most comparisons without
// touching the name, and no pointers, so sorting needs no write barriers.
type memberKey struct {
	pre    uint64
	ord    int32 // position among the object's members
	n      int32 // length of the name in bytes
	ks, ke int32 // the unescaped name: a span of the source, or of parser.keys
	keyOff int32 // the name's opening quote in the source
	inBuf  bool
}

func (p *parser) setMemberKey(m *memberKey, ord, ks, ke int32, inBuf bool, keyOff int32) {
	m.ord, m.n, m.ks, m.ke, m.keyOff, m.inBuf = ord, ke-ks, ks, ke, keyOff, inBuf
	k := p.src[ks:ke]
	if inBuf {
		k = p.keys[ks:ke]
	}
	if len(k) >= 8 {
		m.pre = binary.BigEndian.Uint64(k)
		return
	}
	m.pre = 0
	for i, c := range k {
		m.pre |= uint64(c) << (56 - 8*i)
	}
}

// compareKeys is compareUTF16 on the names of a and b.
func (p *parser) compareKeys(a, b *memberKey) int {
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
	return compareUTF16(p.key(*a), p.key(*b))
}

// key returns the unescaped member name of m.
func (p *parser) key(m memberKey) []byte {
	if m.inBuf {
		return p.keys[m.ks:m.ke]
	}
	return p.src[m.ks:m.ke]
}

// str scans the string whose opening quote is at p.pos and leaves p.pos
// after its closing quote. It validates UTF-8, escapes and surrogates, and
// reports whether the string has escapes. Errors point at the value being
// parsed (atChild) or at the innermost container (a member name).
func (p *parser) str(atChild bool) (escaped bool, _ *Error) {
	src := p.src
	i := p.pos + 1
	for {
		// Skip plain ASCII (not '"', '\\' or a control character).
		for i < len(src) && plain[src[i]] {
			i++
		}
		if i >= len(src) {
			return false, p.fail(CodeSyntax, atChild, i, "unterminated string")
		}
		switch c := src[i]; {
		case c == '"':
			p.pos = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			n, err := p.escape(atChild, i)
			if err != nil {
				return false, err
			}
			i += n
		case c < 0x20:
			return false, p.fail(CodeControlCharacter, atChild, i, "unescaped control character U+00"+hex2(c)+" in string")
		default:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				return false, p.fail(CodeInvalidUTF8, atChild, i, "invalid UTF-8 byte 0x"+hex2(c))
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
func (p *parser) escape(atChild bool, i int) (int, *Error) {
	src := p.src
	if i+1 >= len(src) {
		return 0, p.fail(CodeSyntax, atChild, i, "unterminated escape")
	}
	switch src[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, p.fail(CodeInvalidEscape, atChild, i, "invalid escape "+quoteBounded(src[i:i+2]))
	}
	r, ok := hex4(src, i+2)
	if !ok {
		return 0, p.fail(CodeInvalidEscape, atChild, i, "malformed \\u escape "+quoteBounded(src[i:min(len(src), i+6)]))
	}
	switch {
	case r >= 0xD800 && r <= 0xDBFF:
		r2, ok := rune(0), false
		if i+7 < len(src) && src[i+6] == '\\' && src[i+7] == 'u' {
			r2, ok = hex4(src, i+8)
		}
		if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
			return 0, p.fail(CodeLoneSurrogate, atChild, i, "high surrogate "+quoteBounded(src[i:i+6])+" without a following low surrogate")
		}
		return 12, nil
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, p.fail(CodeLoneSurrogate, atChild, i, "low surrogate "+quoteBounded(src[i:i+6])+" without a preceding high surrogate")
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
	if i == intEnd { // no fraction, no exponent
		digits := src[intStart:intEnd]
		simple := false
		switch {
		case len(digits) == 1 && digits[0] == '0':
			simple = intStart == p.pos // "0" yes, "-0" no
		case len(digits) < 16:
			simple = true
		case len(digits) == 16:
			simple = string(digits) <= "9007199254740991"
		}
		if simple {
			p.nodes[idx].aux = 1
		}
	}
	if p.nodes[idx].aux == 0 {
		p.listJudge(idx)
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
	return p.fail(CodeInvalidNumber, true, p.pos, "not an RFC 8259 number: "+quoteBounded(src[p.pos:end]))
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}
