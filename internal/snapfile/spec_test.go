package snapfile

import (
	"os"
	"strings"
	"testing"
)

// TestSpecNamesFormat keeps spec/snapshot.md and Format in sync.
func TestSpecNamesFormat(t *testing.T) {
	spec, err := os.ReadFile("../../spec/snapshot.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(spec), "`"+Format+"`") && !strings.Contains(string(spec), `"`+Format+`"`) {
		t.Errorf("Format %q is not in spec/snapshot.md", Format)
	}
}
