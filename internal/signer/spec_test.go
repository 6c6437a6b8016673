package signer

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestSpecCodes: spec/signer.md's code table lists exactly AllCodes, in
// order, and each has its sentinel.
func TestSpecCodes(t *testing.T) {
	b, err := os.ReadFile("../../spec/signer.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile(`(?s)### Codes\n(.*?)\n\n`).FindSubmatch(b)
	if sec == nil {
		t.Fatal("spec/signer.md has no ### Codes table")
	}
	var got []Code
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllSubmatch(sec[1], -1) {
		got = append(got, Code(m[1]))
	}
	if !slices.Equal(got, AllCodes) {
		t.Errorf("spec codes %q, want %q", got, AllCodes)
	}
	for _, c := range AllCodes {
		if codeErrors[c] == nil {
			t.Errorf("%s has no sentinel", c)
		}
	}
}
