package policy

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/tracectl/tracectl/canon"
)

// Native conditions. A call's decision is made on its way to the server,
// where cel-go's interpreter, run once per call between other processes'
// work, costs microseconds in cache misses alone. A condition written in
// the common subset (the arguments and the tool name read, compared,
// measured and matched, and the server and declaration read the same way;
// && || ! and ?:) is compiled, besides its CEL program, into a small tree
// of Go closures over the arguments as the gate parsed them, with no
// conversion to CEL values.
//
// The native form decides only what it can decide exactly as CEL does:
// a condition that would be an error in CEL (a missing key, a type
// mismatch), or whose operands fall outside the subset at run time (two
// numbers of different kinds, say), is not decided natively: the rule is
// evaluated by its CEL program, so its decision and its reason are CEL's.
// FuzzNative holds the native form to CEL on generated conditions and
// arguments. Metered conditions (plan.go's compile) are never native: their
// cost limit is CEL's to enforce.

// native is a condition compiled to Go; nil when it is outside the subset.
type native struct{ root nfn }

// nfn evaluates a node: ok false means "not decided natively".
type nfn func(c ncall) (v nval, ok bool)

// ncall is one call's input to a native condition.
type ncall struct {
	args        canon.Value // params.arguments; the zero Value: none (an empty map)
	tool        string
	server, dec ref.Val // the snapshot's, as CEL reads them (shared maps)
}

type nkind uint8

const (
	nNull nkind = iota
	nBool
	nInt
	nDouble
	nString
	nObject // v, or none when v is the zero Value
	nArray  // v
	nMap    // r, a traits.Mapper (server, declaration)
	nList   // r, a traits.Lister
)

type nval struct {
	k nkind
	b bool
	i int64
	f float64
	s string
	v canon.Value
	r ref.Val
}

// eval reports the condition's value, or ok false when CEL must decide.
func (n *native) eval(c ncall) (matched, ok bool) {
	v, ok := n.root(c)
	if !ok || v.k != nBool {
		return false, false
	}
	return v.b, true
}

// compileNative returns the native form of a checked expression, or nil.
func compileNative(a *ast.AST) *native {
	f := nativeExpr(a.Expr())
	if f == nil {
		return nil
	}
	return &native{root: f}
}

func nativeExpr(e ast.Expr) nfn {
	switch e.Kind() {
	case ast.LiteralKind:
		v, ok := nativeLiteral(e.AsLiteral())
		if !ok {
			return nil
		}
		return func(ncall) (nval, bool) { return v, true }
	case ast.IdentKind:
		switch e.AsIdent() {
		case "args":
			return func(c ncall) (nval, bool) {
				if !c.args.Valid() {
					return nval{k: nObject}, true // none: the empty map
				}
				return fromJSON(c.args), true
			}
		case "tool":
			return func(c ncall) (nval, bool) { return nval{k: nString, s: c.tool}, true }
		case "server":
			return func(c ncall) (nval, bool) { return fromRef(c.server) }
		case "declaration":
			return func(c ncall) (nval, bool) { return fromRef(c.dec) }
		}
		return nil
	case ast.SelectKind:
		return nativeSelect(e.AsSelect())
	case ast.CallKind:
		return nativeCall(e.AsCall())
	}
	return nil
}

func nativeLiteral(v any) (nval, bool) {
	switch x := v.(type) {
	case types.String:
		return nval{k: nString, s: string(x)}, true
	case types.Int:
		return nval{k: nInt, i: int64(x)}, true
	case types.Double:
		return nval{k: nDouble, f: float64(x)}, true
	case types.Bool:
		return nval{k: nBool, b: bool(x)}, true
	case types.Null:
		return nval{k: nNull}, true
	}
	return nval{}, false // uint, bytes: CEL
}

func nativeSelect(s ast.SelectExpr) nfn {
	op := nativeExpr(s.Operand())
	if op == nil {
		return nil
	}
	name := s.FieldName()
	key := ref.Val(types.String(name))
	if s.IsTestOnly() { // has(x.name)
		return func(c ncall) (nval, bool) {
			o, ok := op(c)
			if ok && o.k == nMap {
				_, found := o.r.(traits.Mapper).Find(key)
				return nval{k: nBool, b: found}, true
			}
			if !ok || o.k != nObject {
				return nval{}, false
			}
			_, found := o.v.Get(name)
			if !found && o.v.Valid() && o.v.HasDuplicates() {
				return nval{}, false // a repeated name: CEL's reading, not Get's
			}
			return nval{k: nBool, b: found}, true
		}
	}
	return func(c ncall) (nval, bool) {
		o, ok := op(c)
		if ok && o.k == nMap {
			if v, found := o.r.(traits.Mapper).Find(key); found {
				return fromRef(v)
			}
			return nval{}, false
		}
		if !ok || o.k != nObject {
			return nval{}, false
		}
		m, found := o.v.Get(name)
		if !found {
			return nval{}, false // no such key: CEL's error
		}
		return fromJSON(m), true
	}
}

// text is a string value's text. One without escapes is its input bytes
// as they are, not copied: a native value lives only while its condition
// is evaluated, within the call's decision, while the input is unchanged.
func text(v canon.Value) string {
	raw := v.Raw()
	if len(raw) < 2 || bytes.IndexByte(raw, '\\') >= 0 {
		s, _ := v.Str()
		return s
	}
	raw = raw[1 : len(raw)-1]
	if len(raw) == 0 {
		return ""
	}
	return unsafe.String(&raw[0], len(raw))
}

// fromRef reads a CEL value natively: ok false for any kind outside the
// subset.
func fromRef(v ref.Val) (nval, bool) {
	switch x := v.(type) {
	case types.String:
		return nval{k: nString, s: string(x)}, true
	case types.Int:
		return nval{k: nInt, i: int64(x)}, true
	case types.Double:
		return nval{k: nDouble, f: float64(x)}, true
	case types.Bool:
		return nval{k: nBool, b: bool(x)}, true
	case types.Null:
		return nval{k: nNull}, true
	case traits.Mapper:
		return nval{k: nMap, r: x}, true
	case traits.Lister:
		return nval{k: nList, r: x}, true
	}
	return nval{}, false
}

// fromJSON is jsonValue's reading of a value, natively.
func fromJSON(v canon.Value) nval {
	switch v.Kind() {
	case canon.KindObject:
		return nval{k: nObject, v: v}
	case canon.KindArray:
		return nval{k: nArray, v: v}
	case canon.KindString:
		return nval{k: nString, s: text(v)}
	case canon.KindBool:
		b, _ := v.Bool()
		return nval{k: nBool, b: b}
	case canon.KindNumber:
		switch n := number(v.Raw()).(type) {
		case types.Int:
			return nval{k: nInt, i: int64(n)}
		case types.Double:
			return nval{k: nDouble, f: float64(n)}
		}
	}
	return nval{k: nNull}
}

func nativeCall(call ast.CallExpr) nfn {
	fn := call.FunctionName()
	var args []nfn
	if call.IsMemberFunction() {
		t := nativeExpr(call.Target())
		if t == nil {
			return nil
		}
		args = append(args, t)
	}
	for _, a := range call.Args() {
		f := nativeExpr(a)
		if f == nil {
			return nil
		}
		args = append(args, f)
	}
	switch {
	case fn == operators.LogicalAnd && len(args) == 2:
		return logical(args[0], args[1], false)
	case fn == operators.LogicalOr && len(args) == 2:
		return logical(args[0], args[1], true)
	case fn == operators.LogicalNot && len(args) == 1:
		x := args[0]
		return func(c ncall) (nval, bool) {
			v, ok := x(c)
			if !ok || v.k != nBool {
				return nval{}, false
			}
			return nval{k: nBool, b: !v.b}, true
		}
	case fn == operators.Conditional && len(args) == 3:
		cond, yes, no := args[0], args[1], args[2]
		return func(c ncall) (nval, bool) {
			v, ok := cond(c)
			if !ok || v.k != nBool {
				return nval{}, false
			}
			if v.b {
				return yes(c)
			}
			return no(c)
		}
	case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
		return equality(args[0], args[1], fn == operators.NotEquals)
	case len(args) == 2 && (fn == operators.Less || fn == operators.LessEquals || fn == operators.Greater || fn == operators.GreaterEquals):
		return ordering(args[0], args[1], fn)
	case fn == operators.Index && len(args) == 2:
		return index(args[0], args[1])
	case fn == overloads.Size && len(args) == 1:
		x := args[0]
		return func(c ncall) (nval, bool) {
			v, ok := x(c)
			if !ok {
				return nval{}, false
			}
			switch v.k {
			case nString:
				return nval{k: nInt, i: int64(utf8.RuneCountInString(v.s))}, true
			case nObject, nArray:
				return nval{k: nInt, i: int64(v.v.Len())}, true
			case nMap, nList:
				if n, ok := v.r.(traits.Sizer).Size().(types.Int); ok {
					return nval{k: nInt, i: int64(n)}, true
				}
			}
			return nval{}, false
		}
	case call.IsMemberFunction() && len(args) == 2 && (fn == overloads.StartsWith || fn == overloads.EndsWith || fn == overloads.Contains):
		test := strings.HasPrefix
		switch fn {
		case overloads.EndsWith:
			test = strings.HasSuffix
		case overloads.Contains:
			test = strings.Contains
		}
		return strings2(args[0], args[1], test)
	case call.IsMemberFunction() && len(args) == 2 && fn == overloads.Matches:
		pat, ok := constString(call.Args()[0])
		if !ok {
			return nil
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil // CEL's error, at run time
		}
		return strings2(args[0], args[1], func(s, _ string) bool { return re.MatchString(s) })
	}
	return nil
}

func constString(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// logical is && (or false) and || (or true): the first operand that
// settles it settles it; anything else (an error, a non-bool) is CEL's,
// whose && and || absorb errors commutatively.
func logical(x, y nfn, or bool) nfn {
	return func(c ncall) (nval, bool) {
		a, ok := x(c)
		if !ok || a.k != nBool {
			return nval{}, false
		}
		if a.b == or {
			return a, true
		}
		b, ok := y(c)
		if !ok || b.k != nBool {
			return nval{}, false
		}
		return b, true
	}
}

// equality is == and != on operands of the same kind among null, bool,
// int, double and string; any other pair is CEL's.
func equality(x, y nfn, negate bool) nfn {
	return func(c ncall) (nval, bool) {
		a, ok := x(c)
		if !ok {
			return nval{}, false
		}
		b, ok := y(c)
		if !ok || a.k != b.k {
			return nval{}, false
		}
		var eq bool
		switch a.k {
		case nNull:
			eq = true
		case nBool:
			eq = a.b == b.b
		case nInt:
			eq = a.i == b.i
		case nDouble:
			eq = a.f == b.f
		case nString:
			eq = a.s == b.s
		default:
			return nval{}, false
		}
		return nval{k: nBool, b: eq != negate}, true
	}
}

// ordering is < <= > >= on two ints, two doubles (neither NaN), two
// strings or two bools; any other pair is CEL's.
func ordering(x, y nfn, op string) nfn {
	return func(c ncall) (nval, bool) {
		a, ok := x(c)
		if !ok {
			return nval{}, false
		}
		b, ok := y(c)
		if !ok || a.k != b.k {
			return nval{}, false
		}
		var cmp int
		switch a.k {
		case nInt:
			cmp = compare(a.i, b.i)
		case nDouble:
			if math.IsNaN(a.f) || math.IsNaN(b.f) {
				return nval{}, false
			}
			cmp = compare(a.f, b.f)
		case nString:
			cmp = strings.Compare(a.s, b.s)
		case nBool:
			cmp = compare(b2i(a.b), b2i(b.b))
		default:
			return nval{}, false
		}
		var r bool
		switch op {
		case operators.Less:
			r = cmp < 0
		case operators.LessEquals:
			r = cmp <= 0
		case operators.Greater:
			r = cmp > 0
		default:
			r = cmp >= 0
		}
		return nval{k: nBool, b: r}, true
	}
}

func compare[T int64 | float64 | int](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// strings2 applies a test to two string operands.
func strings2(x, y nfn, test func(s, t string) bool) nfn {
	return func(c ncall) (nval, bool) {
		a, ok := x(c)
		if !ok || a.k != nString {
			return nval{}, false
		}
		b, ok := y(c)
		if !ok || b.k != nString {
			return nval{}, false
		}
		return nval{k: nBool, b: test(a.s, b.s)}, true
	}
}

// index is x[k]: an object's member by a string, an array's element by an
// int in range; anything else (a missing key, an index out of range) is
// CEL's.
func index(x, k nfn) nfn {
	return func(c ncall) (nval, bool) {
		o, ok := x(c)
		if !ok {
			return nval{}, false
		}
		key, ok := k(c)
		if !ok {
			return nval{}, false
		}
		switch {
		case o.k == nObject && key.k == nString:
			if m, found := o.v.Get(key.s); found {
				return fromJSON(m), true
			}
		case o.k == nArray && key.k == nInt && key.i >= 0 && key.i < int64(o.v.Len()):
			return fromJSON(o.v.Elems()[key.i]), true
		}
		return nval{}, false
	}
}
