package session

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"

	"github.com/tracectl/tracectl/internal/mcptest"
)

// TestSpecListsInjectedCodes: every JSON-RPC error code the proxy
// synthesizes is in spec/wrap.md with its reason, in one table row.
func TestSpecListsInjectedCodes(t *testing.T) {
	root, err := mcptest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "spec", "wrap.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{mcpwire.CodeAuditUnavailable, mcpwire.CodeTransportFailure, mcpwire.CodeResponseRefused, mcpwire.CodeInvalidRequest} {
		row := "| " + strconv.Itoa(code) + " | `" + mcpwire.ReasonOf(code) + "` |"
		if !strings.Contains(string(b), row) {
			t.Errorf("spec/wrap.md has no row %q", row)
		}
	}
}
