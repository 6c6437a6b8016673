package httpproxy

import (
	"os"
	"strings"
	"testing"
)

// TestSpecRules: every rule code the proxy records on a refused line is
// documented in spec/http.md's tables (and never renamed there).
func TestSpecRules(t *testing.T) {
	b, err := os.ReadFile("../../spec/http.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range []string{ruleHostNotAllowed, ruleOriginNotAllowed, ruleInflightBudget} {
		if !strings.Contains(string(b), "| `"+rule+"` |") {
			t.Errorf("spec/http.md has no table row for rule %s", rule)
		}
	}
}
