package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMediaTypesInSpec: every media type a command's --format json
// prints is in spec/README.md's identifier table.
func TestMediaTypesInSpec(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "spec", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range []string{versionMediaType, showMediaType, sealMediaType, keygenMediaType, auditMediaType,
		snapshotMediaType, pinMediaType, proveMediaType, discloseMediaType, attestMediaType, signerJournalMediaType} {
		if !strings.Contains(string(data), "| `"+mt+"` |") {
			t.Errorf("spec/README.md's identifier table lacks %s", mt)
		}
	}
}
