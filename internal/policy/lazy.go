package policy

import (
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/tracectl/tracectl/canon"
)

// lazyObject is a JSON object as a CEL map whose members are converted
// when a condition reads them (args.text converts text only); anything
// that needs the whole map (iteration, equality, conversion) converts it
// once. It reads as the converted map would: the same values, the same
// errors.
type lazyObject struct {
	v    canon.Value
	full traits.Mapper
	// seen caches the members read so far (conditions often read the same
	// one: args.text in several rules), absent ones as nil; in buf until
	// it outgrows it (growing it from nothing was a tenth of a decision).
	seen []lazyMember
	buf  [4]lazyMember
}

func newLazyObject(v canon.Value) *lazyObject {
	l := &lazyObject{v: v}
	l.seen = l.buf[:0]
	return l
}

type lazyMember struct {
	name string
	val  ref.Val // nil: no such member
}

func (l *lazyObject) whole() traits.Mapper {
	if l.full == nil {
		m := make(map[ref.Val]ref.Val, l.v.Len())
		for _, mem := range l.v.Members() {
			m[types.String(mem.Name)] = jsonValue(mem.Value)
		}
		l.full = types.NewRefValMap(types.DefaultTypeAdapter, m)
	}
	return l.full
}

func (l *lazyObject) Find(key ref.Val) (ref.Val, bool) {
	s, ok := key.(types.String)
	if !ok || l.full != nil {
		return l.whole().Find(key)
	}
	for _, m := range l.seen {
		if m.name == string(s) {
			return m.val, m.val != nil
		}
	}
	var val ref.Val
	if mv, ok := l.v.Get(string(s)); ok {
		val = jsonValue(mv)
	}
	if len(l.seen) < 16 {
		l.seen = append(l.seen, lazyMember{name: string(s), val: val})
	}
	return val, val != nil
}

func (l *lazyObject) Get(key ref.Val) ref.Val {
	if v, ok := l.Find(key); ok {
		return v
	}
	return l.whole().Get(key) // the map's own error
}

func (l *lazyObject) Contains(key ref.Val) ref.Val {
	_, ok := l.Find(key)
	if _, isStr := key.(types.String); !isStr {
		return l.whole().Contains(key)
	}
	return types.Bool(ok)
}

func (l *lazyObject) Size() ref.Val             { return types.Int(l.v.Len()) }
func (l *lazyObject) Iterator() traits.Iterator { return l.whole().Iterator() }
func (l *lazyObject) ConvertToNative(t reflect.Type) (any, error) {
	return l.whole().ConvertToNative(t)
}
func (l *lazyObject) ConvertToType(t ref.Type) ref.Val { return l.whole().ConvertToType(t) }
func (l *lazyObject) Equal(other ref.Val) ref.Val      { return l.whole().Equal(other) }
func (l *lazyObject) Type() ref.Type                   { return types.MapType }
func (l *lazyObject) Value() any                       { return l.whole().Value() }
