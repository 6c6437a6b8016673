package clientread

import (
	"math"
	"testing"
)

var jsNumberInputs = []string{
	"", " ", "0", "-0", "+0", "1", " 1 ", "\t1\n", "\uFEFF1", "1\u2028", "\u00a01\u3000", "\u180e1",
	"01", "1.", ".5", "+.5", "-.5e1", ".", "+", "-", "1e", "1e+", "1e-2", "1E2", "1_000", "1,000",
	"0x10", "0X1f", "-0x10", "+0x10", "0x", "0x1p4", "0o17", "0O8", "0b101", "0b2", "0b", "0.1e1000", "1e-400",
	"Infinity", "-Infinity", "+Infinity", "infinity", "inf", "NaN", "nan",
	"9007199254740993", "0x20000000000001", "0x1fffffffffffff1", "123456789012345678901234567890",
	"1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "4.9e-324", "2.4703282292062328e-324",
	"00x1", "0.0x1", "1 2", "true", "null", "0xg", "١", "１",
}

func TestJSNumberNode(t *testing.T) {
	n := testNode(t)
	for _, in := range jsNumberInputs {
		want, wantOK, err := n.Number(in)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := JSNumber(in)
		if ok != wantOK || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("JSNumber(%q) = %v, %v; Node Number = %v, %v", in, got, ok, want, wantOK)
		}
	}
}

func FuzzJSNumber(f *testing.F) {
	for _, in := range jsNumberInputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := testNode(t)
		want, wantOK, err := n.Number(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := JSNumber(s)
		if ok != wantOK || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("JSNumber(%q) = %v, %v; Node Number = %v, %v", s, got, ok, want, wantOK)
		}
	})
}
