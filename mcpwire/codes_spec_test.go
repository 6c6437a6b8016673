package mcpwire

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSpecListsInjectedCodes: every JSON-RPC error code the recording
// session synthesizes is in spec/wrap.md with its reason, in one table row.
func TestSpecListsInjectedCodes(t *testing.T) {
	b, err := os.ReadFile("../spec/wrap.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{CodeAuditUnavailable, CodeTransportFailure, CodeResponseRefused, CodeInvalidRequest} {
		row := "| " + strconv.Itoa(code) + " | `" + reasonOf(code) + "` |"
		if !strings.Contains(string(b), row) {
			t.Errorf("spec/wrap.md has no row %q", row)
		}
	}
}
