package canon

import (
	"bytes"
	"strconv"
)

// Doc is a parsed JSON document. It keeps the input bytes; every Value can
// give back its exact input span (Raw) as well as canonical bytes.
type Doc struct {
	src   []byte
	nodes []node
	perm  []byte // per object: its members' RFC 8785 order; see sortMembers
	// judge lists, in order, the only nodes a policy can refuse: numbers
	// not already in canonical integer text, and objects with a repeated
	// name; unless judgeAll, when there were too many to list and check
	// looks at every node.
	judge    []int32
	judgeAll bool
}

// Parse parses data strictly (see the package doc) into a Doc without
// applying a number policy: numbers are checked against the RFC 8259 grammar
// and judged by a Policy only when canonicalized.
func Parse(data []byte, o ParseOptions) (*Doc, error) { return parse(data, o) }

// Root returns the top-level value.
func (d *Doc) Root() Value { return Value{d: d, i: 0} }

// Value is a position in a Doc. The zero Value is invalid (Kind 0): its
// accessors return zero results and its Canonical and Digest fail.
type Value struct {
	d *Doc
	i int32
}

func (v Value) n() *node { return &v.d.nodes[v.i] }

// Valid reports whether v refers to a value.
func (v Value) Valid() bool { return v.d != nil }

// Kind returns the JSON type, or 0 for the zero Value.
func (v Value) Kind() Kind {
	if v.d == nil {
		return 0
	}
	return v.d.kind(v.i)
}

func (d *Doc) kind(i int32) Kind { return kindOf(d.src[d.nodes[i].start]) }

// Raw returns the exact input bytes of the value (not a copy).
func (v Value) Raw() []byte {
	if v.d == nil {
		return nil
	}
	return v.d.src[v.n().start:v.d.end(v.i)]
}

// end returns the offset after the last byte of node i.
func (d *Doc) end(i int32) int32 {
	n := &d.nodes[i]
	src := d.src
	switch first := src[n.start]; first {
	case '"':
		if n.aux == 0 {
			return n.start + 2 + int32(bytes.IndexByte(src[n.start+1:], '"'))
		}
		e, _ := stringEnd(src, n.start)
		return e + 1
	case '[', '{':
		// After the last child's value (or the bracket), only whitespace.
		at := n.start + 1
		for c, end := i+1, i+d.size(i); c < end; c += d.size(c) {
			if c+d.size(c) == end {
				at = d.end(c)
			}
		}
		for src[at] != first+2 { // ']' is '['+2, '}' is '{'+2
			at++
		}
		return at + 1
	case 't', 'n':
		return n.start + 4
	case 'f':
		return n.start + 5
	}
	j := int(n.start) + 1
	for j < len(src) && numberByte[src[j]] {
		j++
	}
	return int32(j)
}

// size returns the number of nodes in the subtree at i, this one included.
func (d *Doc) size(i int32) int32 {
	n := &d.nodes[i]
	switch d.src[n.start] {
	case '[':
		return n.aux
	case '{':
		h, _ := d.uvarint(int(n.aux))
		return int32(h >> 2)
	}
	return 1
}

// numberByte marks the bytes a number literal can hold.
var numberByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789.eE+-") {
		t[c] = true
	}
	return t
}()

// Offset returns the byte offset of the value in the input.
func (v Value) Offset() int64 {
	if v.d == nil {
		return 0
	}
	return int64(v.n().start)
}

// Pointer returns the RFC 6901 JSON Pointer of the value in its document.
func (v Value) Pointer() string {
	if v.d == nil {
		return ""
	}
	return v.d.pointer(v.i)
}

// Str returns the decoded text of a string value.
func (v Value) Str() (string, bool) {
	if v.Kind() != KindString {
		return "", false
	}
	n := v.n()
	raw := v.d.src[n.start+1 : v.d.end(v.i)-1]
	if n.aux == 0 {
		return string(raw), true
	}
	return string(unescapeInto(nil, raw)), true
}

// Bool returns the value of a boolean.
func (v Value) Bool() (val, ok bool) {
	if v.Kind() != KindBool {
		return false, false
	}
	return v.d.src[v.n().start] == 't', true
}

// Len returns the number of elements or members.
func (v Value) Len() int {
	switch v.Kind() {
	case KindArray, KindObject:
		n := 0
		for c, end := v.i+1, v.i+v.d.size(v.i); c < end; c += v.d.size(c) {
			n++
		}
		return n
	}
	return 0
}

// Elems returns the elements of an array in order.
func (v Value) Elems() []Value {
	if v.Kind() != KindArray {
		return nil
	}
	out := make([]Value, 0, v.Len())
	for c, end := v.i+1, v.i+v.n().aux; c < end; c += v.d.size(c) {
		out = append(out, Value{d: v.d, i: c})
	}
	return out
}

// Member is one name/value pair of an object.
type Member struct {
	Name  string
	Value Value
}

// Members returns an object's members in document order.
func (v Value) Members() []Member {
	if v.Kind() != KindObject {
		return nil
	}
	out := make([]Member, 0, v.Len())
	for c, keyOff := range v.d.children(v.i) {
		out = append(out, Member{Name: string(keyAt(v.d.src, keyOff)), Value: Value{d: v.d, i: c}})
	}
	return out
}

// RangeMembers calls f with each member of an object in document order,
// until f returns false: the member's decoded name and its value. The name
// is a slice of the input when it has no escapes (read-only, valid as long
// as the input) and a fresh copy otherwise: unlike Members, nothing is
// allocated for plain names.
func (v Value) RangeMembers(f func(name []byte, val Value) bool) {
	if v.Kind() != KindObject {
		return
	}
	for c, keyOff := range v.d.children(v.i) {
		if !f(keyAt(v.d.src, keyOff), Value{d: v.d, i: c}) {
			return
		}
	}
}

// HasDuplicates reports whether this object repeats a member name (possible
// only with ParseOptions.AllowDuplicateKeys).
func (v Value) HasDuplicates() bool {
	if v.Kind() != KindObject {
		return false
	}
	flags, _, _ := v.d.object(v.i)
	return flags&permDup != 0
}

// Get returns the member with the given name. It reports false when the
// name is absent, v is not an object, or the name occurs more than once
// (an ambiguous member is never silently resolved to one of its values).
func (v Value) Get(name string) (Value, bool) {
	if v.Kind() != KindObject {
		return Value{}, false
	}
	found := int32(-1)
	for c, keyOff := range v.d.children(v.i) {
		if string(keyAt(v.d.src, keyOff)) == name {
			if found >= 0 {
				return Value{}, false
			}
			found = c
			if !v.HasDuplicates() {
				break
			}
		}
	}
	if found < 0 {
		return Value{}, false
	}
	return Value{d: v.d, i: found}, true
}

// object returns the permutation flags and subtree size of object obj, and
// the offset in d.perm where its permutation starts.
func (d *Doc) object(obj int32) (flags uint64, size int32, at int) {
	h, at := d.uvarint(int(d.nodes[obj].aux))
	return h & 3, int32(h >> 2), at
}

// nameOf returns the offsets of the opening and closing quotes of the name
// of the member whose value starts at v (the string before the ':' before
// v), and whether the name has escapes. A quote inside a name is escaped, so
// it follows an odd run of backslashes.
func nameOf(src []byte, v int32) (open, close int32, esc bool) {
	i := v - 1
	for src[i] != ':' { // whitespace
		i--
	}
	for i--; src[i] != '"'; i-- { // whitespace
	}
	close = i
	for j := i - 1; ; j-- {
		switch src[j] {
		case '\\':
			esc = true
		case '"':
			k := j - 1
			for src[k] == '\\' {
				k--
			}
			if (j-1-k)%2 == 0 {
				return j, close, esc
			}
		}
	}
}

// children yields the children of a complete container in document order,
// with, for an object's members, the offset of the name's opening quote
// (-1 in arrays). The name is found back from its value's start (nameOf),
// never by scanning on from the previous sibling's end: an array's end is
// found by walking its children, so that would make walking an object
// cost its members' whole subtrees (quadratic in nesting).
func (d *Doc) children(i int32) func(yield func(c, keyOff int32) bool) {
	return func(yield func(c, keyOff int32) bool) {
		obj := d.src[d.nodes[i].start] == '{'
		for c, end := i+1, i+d.size(i); c < end; c += d.size(c) {
			keyOff := int32(-1)
			if obj {
				keyOff, _, _ = nameOf(d.src, d.nodes[c].start)
			}
			if !yield(c, keyOff) {
				return
			}
		}
	}
}

// keyAt returns the unescaped text of the validated string whose opening
// quote is at off (a member name): a span of src when it has no escapes.
func keyAt(src []byte, off int32) []byte {
	end, esc := stringEnd(src, off)
	if !esc {
		return src[off+1 : end]
	}
	return unescapeInto(nil, src[off+1:end])
}

// stringEnd returns the offset of the closing quote of the validated string
// whose opening quote is at off, and whether it has escapes.
func stringEnd(src []byte, off int32) (int32, bool) {
	esc := false
	i := off + 1
	for {
		switch src[i] {
		case '"':
			return i, esc
		case '\\':
			esc = true
			i += 2
		default:
			i++
		}
	}
}

// compareUTF16 orders two UTF-8 strings by their UTF-16 code units. It
// returns 0 only for equal strings. Byte order equals code point order,
// which differs from UTF-16 order only where a supplementary character
// (4-byte UTF-8, lead byte F0..F4; a surrogate pair in UTF-16, D800..DFFF)
// meets a character in U+E000..U+FFFF (lead byte EE or EF): the surrogates
// sort first. Only the first differing byte matters. If it is a
// continuation byte, both runes share their lead byte and so their class.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	return utf16Order(a[i], b[i])
}

// utf16Order orders two strings by their first differing UTF-8 bytes ca and
// cb (ca != cb).
func utf16Order(ca, cb byte) int {
	if ca >= 0xEE && cb >= 0xEE && (ca >= 0xF0) != (cb >= 0xF0) {
		if ca >= 0xF0 {
			return -1 // a is a surrogate pair: D800.. < E000..
		}
		return 1
	}
	return int(ca) - int(cb)
}

// pointer builds the RFC 6901 pointer of node i by walking down from the
// root to it: the tree stores no parents, as only error reports and
// Value.Pointer need them.
func (d *Doc) pointer(i int32) string {
	if i <= 0 || int(i) >= len(d.nodes) {
		return ""
	}
	var b []byte
	for at := int32(0); at != i; {
		idx := 0
		for c, keyOff := range d.children(at) {
			if i < c+d.size(c) {
				if keyOff >= 0 {
					b = appendPointerToken(append(b, '/'), keyAt(d.src, keyOff))
				} else {
					b = strconv.AppendInt(append(b, '/'), int64(idx), 10)
				}
				at = c
				break
			}
			idx++
		}
	}
	return string(b)
}

// appendPointerToken appends a reference token, with "~" and "/" escaped
// as RFC 6901 asks.
func appendPointerToken(b, tok []byte) []byte {
	for _, c := range tok {
		switch c {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, c)
		}
	}
	return b
}
