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
// && || ! and ?:) is compiled, besides its CEL program, into a flat program
// for a small stack machine over the arguments as the gate parsed them,
// with no conversion to CEL values. Flat because a decision runs cold: a
// tree of closures costs a cache miss per node where a program's
// instructions sit side by side.
//
// The native form decides only what it can decide exactly as CEL does:
// a condition that would be an error in CEL (a missing key, a type
// mismatch), or whose operands fall outside the subset at run time (two
// numbers of different kinds, say), is not decided natively: the rule is
// evaluated by its CEL program, so its decision and its reason are CEL's.
// FuzzNative holds the native form to CEL on generated conditions and
// arguments. Metered conditions (plan.go's compile) are never native: their
// cost limit is CEL's to enforce.

// native is a condition compiled to a program; nil when it is outside
// the subset.
type native struct {
	code   []instr
	consts []nval
	keys   []ref.Val // member names as CEL keys, for server and declaration
	res    []*regexp.Regexp
	depth  int // the stack the program needs
}

type opcode uint8

const (
	opArgs      opcode = iota // push the arguments
	opTool                    // push the tool name
	opServer                  // push server
	opDecl                    // push declaration
	opConst                   // push consts[a]
	opSelect                  // pop x; push x.name (name: consts[a].s, keys[a])
	opHas                     // pop x; push has(x.name)
	opIndex                   // pop k, x; push x[k]
	opEq                      // pop y, x; push x == y
	opNe                      // pop y, x; push x != y
	opLt                      // pop y, x; push x < y
	opLe                      // pop y, x; push x <= y
	opGt                      // pop y, x; push x > y
	opGe                      // pop y, x; push x >= y
	opNot                     // pop x; push !x
	opSize                    // pop x; push size(x)
	opStarts                  // pop y, x; push x.startsWith(y)
	opEnds                    // pop y, x; push x.endsWith(y)
	opContains                // pop y, x; push x.contains(y)
	opMatches                 // pop x; push x.matches(res[a])
	opAnd                     // top false: jump to a, keeping it; true: pop it
	opOr                      // top true: jump to a, keeping it; false: pop it
	opBool                    // the top must be a bool
	opJumpFalse               // pop a bool; false: jump to a
	opJump                    // jump to a
)

type instr struct {
	op opcode
	a  int32
}

// maxDepth bounds a native program's stack (deeper conditions are CEL's).
const maxDepth = 8

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
func (n *native) eval(in *Input) (matched, ok bool) {
	return n.run(in, 0, int32(len(n.code)))
}

// run runs the program n.code[from:to] (a plan's holds many conditions).
func (n *native) run(call *Input, from, to int32) (matched, ok bool) {
	var st [maxDepth]nval
	sp := 0 // st[:sp] is the stack
	code := n.code[:to]
	for pc := int(from); pc < len(code); pc++ {
		in := code[pc]
		switch in.op {
		case opArgs:
			if call.Args.Valid() {
				st[sp] = fromJSON(call.Args)
			} else {
				st[sp] = nval{k: nObject} // none: the empty map
			}
			sp++
		case opTool:
			st[sp] = nval{k: nString, s: call.Tool}
			sp++
		case opServer, opDecl:
			var r ref.Val
			if in.op == opDecl {
				r = call.declarationValue()
			} else {
				r = call.serverValue()
			}
			v, ok := fromRef(r)
			if !ok {
				return false, false
			}
			st[sp] = v
			sp++
		case opConst:
			st[sp] = n.consts[in.a]
			sp++
		case opSelect, opHas:
			x := &st[sp-1]
			var found bool
			var v nval
			switch x.k {
			case nMap:
				var r ref.Val
				if r, found = x.r.(traits.Mapper).Find(n.keys[in.a]); found && in.op == opSelect {
					if v, ok = fromRef(r); !ok {
						return false, false
					}
				}
			case nObject:
				var m canon.Value
				if m, found = x.v.Get(n.consts[in.a].s); !found && x.v.Valid() && x.v.HasDuplicates() {
					return false, false // a repeated name: CEL's reading, not Get's
				}
				if found && in.op == opSelect {
					v = fromJSON(m)
				}
			default:
				return false, false
			}
			switch {
			case in.op == opHas:
				*x = nval{k: nBool, b: found}
			case !found:
				return false, false // no such key: CEL's error
			default:
				*x = v
			}
		case opIndex:
			sp--
			x, key := &st[sp-1], &st[sp]
			switch {
			case x.k == nObject && key.k == nString:
				m, found := x.v.Get(key.s)
				if !found {
					return false, false
				}
				*x = fromJSON(m)
			case x.k == nArray && key.k == nInt && key.i >= 0 && key.i < int64(x.v.Len()):
				*x = fromJSON(x.v.Elems()[key.i])
			default:
				return false, false
			}
		case opEq, opNe, opLt, opLe, opGt, opGe:
			sp--
			r, ok := compareOp(in.op, &st[sp-1], &st[sp])
			if !ok {
				return false, false
			}
			st[sp-1] = nval{k: nBool, b: r}
		case opNot:
			x := &st[sp-1]
			if x.k != nBool {
				return false, false
			}
			x.b = !x.b
		case opSize:
			x := &st[sp-1]
			switch x.k {
			case nString:
				*x = nval{k: nInt, i: int64(utf8.RuneCountInString(x.s))}
			case nObject, nArray:
				*x = nval{k: nInt, i: int64(x.v.Len())}
			case nMap, nList:
				m, ok := x.r.(traits.Sizer).Size().(types.Int)
				if !ok {
					return false, false
				}
				*x = nval{k: nInt, i: int64(m)}
			default:
				return false, false
			}
		case opStarts, opEnds, opContains:
			sp--
			x, y := &st[sp-1], &st[sp]
			if x.k != nString || y.k != nString {
				return false, false
			}
			var r bool
			switch in.op {
			case opStarts:
				r = strings.HasPrefix(x.s, y.s)
			case opEnds:
				r = strings.HasSuffix(x.s, y.s)
			default:
				r = strings.Contains(x.s, y.s)
			}
			*x = nval{k: nBool, b: r}
		case opMatches:
			x := &st[sp-1]
			if x.k != nString {
				return false, false
			}
			*x = nval{k: nBool, b: n.res[in.a].MatchString(x.s)}
		case opAnd, opOr:
			x := &st[sp-1]
			if x.k != nBool {
				return false, false
			}
			if x.b == (in.op == opOr) {
				pc = int(in.a) - 1
			} else {
				sp--
			}
		case opBool:
			if st[sp-1].k != nBool {
				return false, false
			}
		case opJumpFalse:
			sp--
			if st[sp].k != nBool {
				return false, false
			}
			if !st[sp].b {
				pc = int(in.a) - 1
			}
		case opJump:
			pc = int(in.a) - 1
		}
	}
	if sp != 1 || st[0].k != nBool {
		return false, false
	}
	return st[0].b, true
}

// compareOp is == != < <= > >= on two values of one kind: == and != among
// null, bool, int, double and string, the orderings on two ints, two
// doubles (neither NaN), two strings or two bools. Any other pair is
// CEL's (ok false): its heterogeneous equality and its errors.
func compareOp(op opcode, x, y *nval) (r, ok bool) {
	if x.k != y.k {
		return false, false
	}
	if op == opEq || op == opNe {
		var eq bool
		switch x.k {
		case nNull:
			eq = true
		case nBool:
			eq = x.b == y.b
		case nInt:
			eq = x.i == y.i
		case nDouble:
			eq = x.f == y.f
		case nString:
			eq = x.s == y.s
		default:
			return false, false
		}
		return eq == (op == opEq), true
	}
	var cmp int
	switch x.k {
	case nInt:
		cmp = compare(x.i, y.i)
	case nDouble:
		if math.IsNaN(x.f) || math.IsNaN(y.f) {
			return false, false
		}
		cmp = compare(x.f, y.f)
	case nString:
		cmp = strings.Compare(x.s, y.s)
	case nBool:
		cmp = compare(b2i(x.b), b2i(y.b))
	default:
		return false, false
	}
	switch op {
	case opLt:
		return cmp < 0, true
	case opLe:
		return cmp <= 0, true
	case opGt:
		return cmp > 0, true
	}
	return cmp >= 0, true
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

// link appends the program of m to n, for n.run(c, from, to).
func (n *native) link(m *native) (from, to int32) {
	from = int32(len(n.code))
	cb, rb := int32(len(n.consts)), int32(len(n.res))
	for _, in := range m.code {
		switch in.op {
		case opConst, opSelect, opHas:
			in.a += cb
		case opMatches:
			in.a += rb
		case opAnd, opOr, opJumpFalse, opJump:
			in.a += from
		}
		n.code = append(n.code, in)
	}
	n.consts = append(n.consts, m.consts...)
	n.keys = append(n.keys, m.keys...)
	n.res = append(n.res, m.res...)
	return from, int32(len(n.code))
}

// compileNative returns the native form of a checked expression, or nil.
func compileNative(a *ast.AST) *native {
	n := &native{}
	c := &nativeCompiler{n: n}
	if !c.expr(a.Expr()) || n.depth > maxDepth {
		return nil
	}
	return n
}

type nativeCompiler struct {
	n     *native
	depth int // the stack at this point of the program
}

func (c *nativeCompiler) emit(op opcode, a int32, push int) {
	c.n.code = append(c.n.code, instr{op: op, a: a})
	c.depth += push
	c.n.depth = max(c.n.depth, c.depth)
}

func (c *nativeCompiler) constant(v nval) int32 {
	c.n.consts = append(c.n.consts, v)
	c.n.keys = append(c.n.keys, nil)
	if v.k == nString {
		c.n.keys[len(c.n.keys)-1] = types.String(v.s)
	}
	return int32(len(c.n.consts) - 1)
}

// here is the address of the next instruction.
func (c *nativeCompiler) here() int32 { return int32(len(c.n.code)) }

func (c *nativeCompiler) expr(e ast.Expr) bool {
	switch e.Kind() {
	case ast.LiteralKind:
		v, ok := nativeLiteral(e.AsLiteral())
		if ok {
			c.emit(opConst, c.constant(v), 1)
		}
		return ok
	case ast.IdentKind:
		op, ok := map[string]opcode{"args": opArgs, "tool": opTool, "server": opServer, "declaration": opDecl}[e.AsIdent()]
		if ok {
			c.emit(op, 0, 1)
		}
		return ok
	case ast.SelectKind:
		s := e.AsSelect()
		if !c.expr(s.Operand()) {
			return false
		}
		op := opSelect
		if s.IsTestOnly() { // has(x.name)
			op = opHas
		}
		c.emit(op, c.constant(nval{k: nString, s: s.FieldName()}), 0)
		return true
	case ast.CallKind:
		return c.call(e.AsCall())
	}
	return false
}

// binary and unary are the calls that compile to one instruction after
// their operands (the target first for a member call).
var (
	binary = map[string]opcode{
		operators.Equals: opEq, operators.NotEquals: opNe, operators.Less: opLt, operators.LessEquals: opLe,
		operators.Greater: opGt, operators.GreaterEquals: opGe, operators.Index: opIndex,
	}
	members = map[string]opcode{overloads.StartsWith: opStarts, overloads.EndsWith: opEnds, overloads.Contains: opContains}
)

func (c *nativeCompiler) call(call ast.CallExpr) bool {
	fn, args := call.FunctionName(), call.Args()
	if call.IsMemberFunction() {
		args = append([]ast.Expr{call.Target()}, args...)
	}
	operands := func(es ...ast.Expr) bool {
		for _, e := range es {
			if !c.expr(e) {
				return false
			}
		}
		return true
	}
	switch {
	case (fn == operators.LogicalAnd || fn == operators.LogicalOr) && len(args) == 2:
		op := opAnd
		if fn == operators.LogicalOr {
			op = opOr
		}
		if !c.expr(args[0]) {
			return false
		}
		at := c.here()
		c.emit(op, 0, -1) // pops when it does not jump
		if !c.expr(args[1]) {
			return false
		}
		c.emit(opBool, 0, 0)
		c.n.code[at].a = c.here()
		return true
	case fn == operators.Conditional && len(args) == 3:
		if !c.expr(args[0]) {
			return false
		}
		at := c.here()
		c.emit(opJumpFalse, 0, -1)
		if !c.expr(args[1]) {
			return false
		}
		end := c.here()
		c.emit(opJump, 0, -1) // the other branch pushes its own
		c.n.code[at].a = c.here()
		if !c.expr(args[2]) {
			return false
		}
		c.n.code[end].a = c.here()
		return true
	case fn == operators.LogicalNot && len(args) == 1:
		if !operands(args[0]) {
			return false
		}
		c.emit(opNot, 0, 0)
		return true
	case fn == overloads.Size && len(args) == 1:
		if !operands(args[0]) {
			return false
		}
		c.emit(opSize, 0, 0)
		return true
	case fn == overloads.Matches && call.IsMemberFunction() && len(args) == 2:
		pat, ok := constString(args[1])
		if !ok {
			return false
		}
		re, err := regexp.Compile(pat)
		if err != nil || !operands(args[0]) {
			return false // a bad pattern is CEL's error, at run time
		}
		c.n.res = append(c.n.res, re)
		c.emit(opMatches, int32(len(c.n.res)-1), 0)
		return true
	}
	op, ok := binary[fn]
	if !ok && call.IsMemberFunction() {
		op, ok = members[fn]
	}
	if !ok || len(args) != 2 || !operands(args...) {
		return false
	}
	c.emit(op, 0, -1)
	return true
}

// nativeLiteral reads a literal: a string, int, double, bool or null
// (uint and bytes are CEL's).
func nativeLiteral(v ref.Val) (nval, bool) {
	n, ok := fromRef(v)
	return n, ok && n.k <= nString
}

func constString(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
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
