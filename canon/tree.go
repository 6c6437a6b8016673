package canon

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Doc is a parsed JSON document. It keeps the input bytes; every Value can
// give back its exact input span (Raw) as well as canonical bytes.
type Doc struct {
	src   []byte
	nodes []node
	keys  []byte
}

// Parse parses data strictly (see the package doc) into a Doc without
// applying a number policy: numbers are checked against the RFC 8259 grammar
// and judged by a Policy only when canonicalized.
func Parse(data []byte, o ParseOptions) (*Doc, error) { return parse(data, o) }

// Root returns the top-level value.
func (d *Doc) Root() Value { return Value{d: d, i: 0} }

// Value is a position in a Doc. The zero Value is invalid (Kind 0).
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
	n := v.n()
	return v.d.src[n.start:n.end]
}

// Offset returns the byte offset of the value in the input.
func (v Value) Offset() int64 { return int64(v.n().start) }

// Pointer returns the RFC 6901 JSON Pointer of the value in its document.
func (v Value) Pointer() string { return pointerOf(v.d.nodes, v.d.keys, v.d.src, v.i) }

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
	return string(unescape(raw)), true
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
	for c := v.n().first; c >= 0; c = v.d.nodes[c].next {
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
	for c := v.n().first; c >= 0; c = v.d.nodes[c].next {
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
	for c := v.n().first; c >= 0; c = v.d.nodes[c].next {
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

// key returns the unescaped member name of node i.
func (d *Doc) key(i int32) []byte {
	n := &d.nodes[i]
	if n.keyInBuf {
		return d.keys[n.keyStart:n.keyEnd]
	}
	return d.src[n.keyStart:n.keyEnd]
}

// sortedMembers appends the object's member indices to buf in RFC 8785
// order (UTF-16 code units of the unescaped names).
func (d *Doc) sortedMembers(obj int32, buf []int32) []int32 {
	start := len(buf)
	for c := d.nodes[obj].first; c >= 0; c = d.nodes[c].next {
		buf = append(buf, c)
	}
	kids := buf[start:]
	slices.SortFunc(kids, func(a, b int32) int { return compareUTF16(d.key(a), d.key(b)) })
	return buf
}

// compareUTF16 orders two UTF-8 strings by their UTF-16 code units. Byte
// order equals code point order, which differs from UTF-16 order only when a
// supplementary character (surrogate pair, 0xD800..) meets a BMP character
// at or above U+E000, so only the first differing rune needs a closer look.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Unit(ra)) - int(utf16Unit(rb))
}

// utf16Unit returns the first UTF-16 code unit of r. Two different runes
// with the same first unit are both supplementary, and then their order by
// code point equals their order by second unit.
func utf16Unit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
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
			for c := nodes[par].first; c >= 0 && c != i; c = nodes[c].next {
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

// unescape decodes a string body that is known to be valid.
func unescape(raw []byte) []byte {
	p := parser{src: append(append([]byte{'"'}, raw...), '"')}
	p.str(-1)
	return p.strBuf
}
