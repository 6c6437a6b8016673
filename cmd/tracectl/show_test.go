package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRenderTableFits: on a terminal the table is cut to its width
// (the shrinkable columns only, marked with …); a pipe gets it whole.
func TestRenderTableFits(t *testing.T) {
	rows := [][]string{
		{"ATTEMPT", "TOOL", "OUTCOME"},
		{"a1", strings.Repeat("t", 60), "result"},
		{"a2", "echo", "unknown (timeout); late result"},
	}
	for _, tc := range []struct {
		width int
		cut   bool
	}{{0, false}, {200, false}, {50, true}, {30, true}} {
		out := renderTable(rows, tc.width, []int{1, 2}, nil)
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			n := utf8.RuneCountInString(line)
			if tc.width > 0 && n > tc.width && !(tc.width == 30) {
				t.Errorf("width %d: line of %d: %q", tc.width, n, line)
			}
		}
		if got := strings.Contains(out, "…"); got != tc.cut {
			t.Errorf("width %d: cut %v, want %v\n%s", tc.width, got, tc.cut, out)
		}
		if !strings.Contains(out, "a1") || !strings.Contains(out, "a2") {
			t.Errorf("width %d: attempt ids lost:\n%s", tc.width, out)
		}
	}
	// 30 is narrower than the columns' 8-character floor: the table is cut
	// as far as it goes and the ids are never cut.
	if out := renderTable(rows, 30, []int{1, 2}, nil); !strings.HasPrefix(out, "ATTEMPT  ") {
		t.Errorf("the id column was cut:\n%s", out)
	}
}

// TestShowTerminalWidth: a terminal of 60 columns gets a table that fits.
func TestShowTerminalWidth(t *testing.T) {
	bundle := fixtureDir(t, "hostile")
	var out strings.Builder
	o := &showOptions{evidenceOptions: evidenceOptions{bundle: bundle}, format: "text", maxBytes: defaultShowBytes, width: func() int { return 60 }}
	if err := runShow(t.Context(), streams{out: &out, err: &out}, o); err != nil {
		t.Fatal(err)
	}
	table := out.String()[strings.Index(out.String(), "ATTEMPT"):]
	for _, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 60 {
			t.Errorf("line of %d runes on a 60-column terminal: %q", n, line)
		}
	}
	if !strings.Contains(table, "…") || strings.Contains(table, "CORRELATION") || !strings.Contains(table, "OUTCOME") {
		t.Errorf("not cut to fit, or the outcome went:\n%s", table)
	}
}
