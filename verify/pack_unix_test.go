//go:build unix

package verify_test

import (
	"path/filepath"
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestPackHostile: a pack that is a FIFO or a link is never read.
func TestPackHostile(t *testing.T) {
	fsys, _ := packed(t, verifytest.Standard(t).FS())
	for name, fault := range map[string]func(t *testing.T, dir string){
		"FIFO":         func(t *testing.T, dir string) { mkfifo(t, filepath.Join(dir, transcript.PackFile)) },
		"to /dev/zero": func(t *testing.T, dir string) { symlink(t, "/dev/zero", filepath.Join(dir, transcript.PackFile)) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeBundle(t, fsys)
			fault(t, dir)
			rep, err := bundleWithin(t, dir, trusted(t))
			if rep == nil {
				t.Fatalf("no report: %v", err)
			}
			if rep.Verdict != verify.Failed || !rep.Has(verify.CodeFileRefused) {
				t.Errorf("verdict %s, want failed with file_refused\n%s", rep.Verdict, dump(rep))
			}
		})
	}
}
