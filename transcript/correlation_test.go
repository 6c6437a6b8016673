package transcript

import (
	"strings"
	"testing"
)

func TestCheckTraceparent(t *testing.T) {
	const ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		in, want string
	}{
		{ok, ""},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", ""}, // a later version may append
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", CorrBadShape},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", CorrBadShape},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", CorrBadShape},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", CorrBadShape},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", CorrBadShape},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", CorrBadShape},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", CorrBadShape},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", CorrBadShape},
		{"", CorrBadShape},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\n", CorrBadCharset},
		{ok + "-" + strings.Repeat("a", maxTraceparentLen), CorrTooLong},
	}
	for _, tt := range tests {
		if got := checkTraceparent(tt.in); got != tt.want {
			t.Errorf("checkTraceparent(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckTracestate(t *testing.T) {
	many := make([]string, maxTracestateMembers+1)
	for i := range many {
		many[i] = "k" + itoa(int64(i)) + "=v"
	}
	tests := []struct {
		in, want string
	}{
		{"congo=t61rcWkgMzE", ""},
		{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", ""},
		{"fw529a3039@dt=00f067aa, ,tenant@vendor=x y", ""},
		{strings.Join(many[:maxTracestateMembers], ","), ""},
		{strings.Join(many, ","), CorrBadShape},
		{"a=1,a=2", CorrBadShape},
		{"Upper=1", CorrBadShape},
		{"k=v=w", CorrBadShape},
		{"k=", CorrBadShape},
		{"k=trailing ", ""}, // trailing OWS belongs to the list, not the value
		{"", CorrBadShape},
		{"k=\x01", CorrBadCharset},
		{"k=" + strings.Repeat("v", maxTracestateLen), CorrTooLong},
	}
	for _, tt := range tests {
		if got := checkTracestate(tt.in); got != tt.want {
			t.Errorf("checkTracestate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckCorrelationID(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"req-42_A", ""},
		{"9f2c1a7e-5b3d-4c2a-8e1f-0a9b8c7d6e5f", ""},
		{strings.Repeat("a", maxCorrelationIDLen), ""},
		{strings.Repeat("a", maxCorrelationIDLen+1), CorrTooLong},
		{"", CorrBadShape},
		{"a\x00b", CorrBadCharset},
		{"a\nb", CorrBadCharset},
		{"\x1b[31mred", CorrBadCharset},
		{"with space", CorrBadCharset},
		{"é", CorrBadCharset},
		{"a.b", CorrBadCharset},
	}
	for _, tt := range tests {
		if got := checkCorrelationID(tt.in); got != tt.want {
			t.Errorf("checkCorrelationID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
