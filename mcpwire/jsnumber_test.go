package mcpwire

import (
	"math"
	"testing"
)

func TestJSNumber(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 0, true}, {"  ", 0, true}, {"\ufeff7\u2028", 7, true}, {"0x1F", 31, true}, {"0b101", 5, true}, {"0o17", 15, true},
		{"-0x1", 0, false}, {"1.", 1, true}, {".5", 0.5, true}, {".", 0, false}, {"1e3", 1000, true}, {"1e", 0, false},
		{"+Infinity", math.Inf(1), true}, {"infinity", 0, false}, {"1_000", 0, false}, {"12abc", 0, false}, {"1e400", math.Inf(1), true},
	} {
		got, ok := jsNumber(tc.in)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("JSNumber(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
