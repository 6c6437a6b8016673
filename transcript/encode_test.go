package transcript

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

var randomStrings = []string{"", "a", "attempt", "with \"quotes\" and \\", "\x00\x01\x1f\x7f", "tab\there\nline\r", "\u2028\u2029", "<&>", "é漢字🙂", "\ufeff", "\uff5e~", "🙂x"}

// fill sets every field of v (a pointer to a struct) to a random value;
// pointers are nil half the time.
func fill(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if rng.IntN(2) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(rng, v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(rng, v.Field(i))
		}
	case reflect.String:
		v.SetString(randomStrings[rng.IntN(len(randomStrings))])
	case reflect.Int64:
		switch rng.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(canon.MaxSafeInteger)
		case 2:
			v.SetInt(-rng.Int64N(canon.MaxSafeInteger))
		default:
			v.SetInt(rng.Int64N(1 << 40))
		}
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Slice:
		n := rng.IntN(4)
		if n == 0 {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		n := rng.IntN(4)
		if n == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMap(v.Type())
		for range n {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(rng, k)
			fill(rng, e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	}
}

// Encode is canon.Marshal, byte for byte, for every event type and any
// field values: this equivalence is what lets DecodeLine and the producer
// use it.
func TestEncodeEqualsCanonMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := map[Event]string{&Header{}: typeHeader, &Protocol{}: typeProtocol, &SnapshotEvent{}: typeSnapshot, &Notification{}: typeNotification,
		&Attempt{}: typeAttempt, &Observation{}: typeObservation, &Resolution{}: typeResolution, &Recovery{}: typeRecovery, &Seal{}: typeSeal,
		&Frame{}: typeFrame, &SessionEvent{}: typeSession, &HTTPEvent{}: typeHTTP}
	for proto, typ := range types {
		for i := 0; i < 2000; i++ {
			v := reflect.New(reflect.TypeOf(proto).Elem())
			fill(rng, v.Elem())
			v.Elem().FieldByName("Type").SetString(typ) // Encode writes the event's own type
			ev := v.Interface().(Event)
			want, werr := canon.Marshal(ev)
			got, gerr := Encode(ev)
			if werr != nil || gerr != nil {
				t.Fatalf("%T: canon.Marshal err %v, Encode err %v", ev, werr, gerr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%T:\nEncode      %s\ncanon.Marshal %s", ev, got, want)
			}
		}
	}
	for _, ev := range validEvents() {
		want, _ := canon.Marshal(ev)
		if got, err := Encode(ev); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T: Encode = %s, %v; want %s", ev, got, err, want)
		}
	}
}

// Encode writes an event's own type: an empty Type field is filled, one
// naming another event is refused, for every event type.
func TestEncodeWritesOwnType(t *testing.T) {
	for _, ev := range validEvents() {
		want, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		f := reflect.ValueOf(ev).Elem().FieldByName("Type")
		typ := f.String()
		f.SetString("")
		if got, err := Encode(ev); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T with Type empty: Encode = %s, %v; want %s", ev, got, err, want)
		}
		other := typeSeal
		if typ == typeSeal {
			other = typeFrame
		}
		f.SetString(other)
		if got, err := Encode(ev); !errors.Is(err, errWrongType) {
			t.Errorf("%T with Type %q: Encode = %s, %v; want errWrongType", ev, other, got, err)
		}
		f.SetString(typ)
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		ev   Event
		want error
	}{
		{&Seal{Type: typeSeal, Seq: canon.MaxSafeInteger + 1}, errUnsafeInt},
		{&Recovery{Type: typeRecovery, Detail: "\xff"}, errNotUTF8},
	}
	for _, tt := range tests {
		if _, err := Encode(tt.ev); !errors.Is(err, tt.want) {
			t.Errorf("Encode(%+v) = %v, want %v", tt.ev, err, tt.want)
		}
	}
}
