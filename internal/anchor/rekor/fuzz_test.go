package rekor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
)

// FuzzRekorEntry: ParseEntry and ParseTrustedRoot read what a bundle and
// --rekor-root give, bounded, and Check of whatever parses never panics,
// fails only with anchor.ErrInvalid, and passes only for the fixture's
// record in the fixture's log (the one entry that is valid).
func FuzzRekorEntry(f *testing.F) {
	fx := newFixture(f)
	valid, err := rekor.MarshalEntry(fx.entry)
	if err != nil {
		f.Fatal(err)
	}
	tr, err := rekor.ParseTrustedRoot(fx.root)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid, fx.root)
	f.Add(valid, []byte(`{}`))
	f.Add([]byte(`{"logIndex":"1"}`), fx.root)
	f.Add(valid[:len(valid)/2], fx.root[:len(fx.root)/2])
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, entry, root []byte) {
		rtr := tr
		if r, err := rekor.ParseTrustedRoot(root); err == nil {
			rtr = r
		} else if len(root) > rekor.MaxRootBytes {
			return
		}
		e, err := rekor.ParseEntry(entry)
		if err != nil {
			if !errors.Is(err, anchor.ErrInvalid) {
				t.Fatalf("ParseEntry: %v, not anchor.ErrInvalid", err)
			}
			return
		}
		c, err := rekor.Check(e, fx.stmt, fx.producer.Public(), rtr, at)
		if err != nil {
			if !errors.Is(err, anchor.ErrInvalid) {
				t.Fatalf("Check: %v, not anchor.ErrInvalid", err)
			}
			return
		}
		if c.Index != 5 || c.Size != 6 {
			t.Fatalf("Check passed %+v", c)
		}
	})
}
