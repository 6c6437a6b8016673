package canon

import (
	"slices"
	"strconv"
	"strings"
)

// Doc is a parsed JSON document. It keeps the input bytes; every Value can
// give back its exact input span (Raw) as well as canonical bytes.
type Doc struct {
	src   []byte
	nodes []node
	keys  []byte
	order []int32 // object members in RFC 8785 order; see node.ord
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
	return v.n().kind
}

// Raw returns the exact input bytes of the value (not a copy).
func (v Value) Raw() []byte {
	if v.d == nil {
		return nil
	}
	n := v.n()
	return v.d.src[n.start:n.end]
}

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
	return pointerOf(v.d.nodes, v.d.keys, v.d.src, v.i)
}

// Str returns the decoded text of a string value.
func (v Value) Str() (string, bool) {
	if v.Kind() != KindString {
		return "", false
	}
	n := v.n()
	raw := v.d.src[n.start+1 : n.end-1]
	if !n.escaped {
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
	if k := v.Kind(); k != KindArray && k != KindObject {
		return 0
	}
	return int(v.n().count)
}

// Elems returns the elements of an array in order.
func (v Value) Elems() []Value {
	if v.Kind() != KindArray {
		return nil
	}
	out := make([]Value, 0, v.n().count)
	for c := v.d.firstChild(v.i); c >= 0; c = v.d.nodes[c].next {
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
	out := make([]Member, 0, v.n().count)
	for c := v.d.firstChild(v.i); c >= 0; c = v.d.nodes[c].next {
		out = append(out, Member{Name: string(v.d.key(c)), Value: Value{d: v.d, i: c}})
	}
	return out
}

// HasDuplicates reports whether this object repeats a member name (possible
// only with ParseOptions.AllowDuplicateKeys).
func (v Value) HasDuplicates() bool { return v.Kind() == KindObject && v.n().dup }

// Get returns the member with the given name. It reports false when the
// name is absent, v is not an object, or the name occurs more than once
// (an ambiguous member is never silently resolved to one of its values).
func (v Value) Get(name string) (Value, bool) {
	if v.Kind() != KindObject {
		return Value{}, false
	}
	found := int32(-1)
	for c := v.d.firstChild(v.i); c >= 0; c = v.d.nodes[c].next {
		if string(v.d.key(c)) == name {
			if found >= 0 {
				return Value{}, false
			}
			found = c
			if !v.n().dup {
				break
			}
		}
	}
	if found < 0 {
		return Value{}, false
	}
	return Value{d: v.d, i: found}, true
}

// firstChild returns the first child of a complete container, or -1.
func (d *Doc) firstChild(i int32) int32 {
	if d.nodes[i].count == 0 {
		return -1
	}
	return i + 1
}

// key returns the unescaped member name of node i.
func (d *Doc) key(i int32) []byte {
	n := &d.nodes[i]
	if n.keyInBuf {
		return d.keys[n.keyStart:n.keyEnd]
	}
	return d.src[n.keyStart:n.keyEnd]
}

// members returns the object's members in RFC 8785 order.
func (d *Doc) members(obj int32) []int32 {
	n := &d.nodes[obj]
	return d.order[n.ord : n.ord+n.count]
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

// pointerOf builds the RFC 6901 pointer of node i by walking to the root.
func pointerOf(nodes []node, keys, src []byte, i int32) string {
	if i < 0 || int(i) >= len(nodes) {
		return ""
	}
	var parts []string
	d := Doc{src: src, nodes: nodes, keys: keys}
	for i >= 0 {
		par := nodes[i].parent
		if par < 0 {
			break
		}
		if nodes[par].kind == KindObject {
			k := string(d.key(i))
			k = strings.ReplaceAll(k, "~", "~0")
			k = strings.ReplaceAll(k, "/", "~1")
			parts = append(parts, k)
		} else {
			idx := 0
			// Count the siblings before i. While the parser is inside i,
			// i is not yet linked to them, and the count is still right.
			for c := par + 1; c >= 0 && c != i; c = nodes[c].next {
				idx++
			}
			parts = append(parts, strconv.Itoa(idx))
		}
		i = par
	}
	slices.Reverse(parts)
	if len(parts) == 0 {
		return ""
	}
	return "/" + strings.Join(parts, "/")
}
