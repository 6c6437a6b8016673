package inspect

import (
	"fmt"
	"io/fs"

	"github.com/tracectl/tracectl/internal/snapdiff"
	"github.com/tracectl/tracectl/snapshot"
)

// MaxManifestReadBytes bounds a snapshot manifest read from a bundle
// (snapshot.MaxManifestBytes); a page is bounded by the ceiling of page
// bytes.
const MaxManifestReadBytes = snapshot.MaxManifestBytes

// SnapshotInput returns the manifest of the snapshot with the given id and
// a LoadFunc of its page bytes, both read through PayloadBytes, so drift can
// be computed from a bundle as from snapshot files.
func (b *Bundle) SnapshotInput(fsys fs.FS, id string) (snapdiff.Input, error) {
	for _, s := range b.Snapshots {
		if s.SnapshotID != id {
			continue
		}
		data, err := PayloadBytes(fsys, s.ManifestDigest, MaxManifestReadBytes)
		if err != nil {
			return snapdiff.Input{}, fmt.Errorf("snapshot %s manifest: %w", id, err)
		}
		m, err := snapshot.ParseManifest(data)
		if err != nil {
			return snapdiff.Input{}, fmt.Errorf("snapshot %s: %w", id, err)
		}
		load := func(digest string) ([]byte, error) {
			return PayloadBytes(fsys, digest, snapshot.CeilingMaxPageBytes)
		}
		return snapdiff.Input{Manifest: m, Load: load}, nil
	}
	return snapdiff.Input{}, fmt.Errorf("no snapshot %q in the bundle", id)
}

// Drift is the declaration drift of one snapshot against the one recorded
// before it.
type Drift struct {
	Old, New string           // snapshot ids
	Result   *snapdiff.Result `json:"result,omitempty"`
	Problem  string           `json:"problem,omitempty"` // why it could not be computed
}

// Drifts compares each snapshot with the previous one.
func (b *Bundle) Drifts(fsys fs.FS) []Drift {
	var out []Drift
	for i := 1; i < len(b.Snapshots); i++ {
		d := Drift{Old: b.Snapshots[i-1].SnapshotID, New: b.Snapshots[i].SnapshotID}
		old, err1 := b.SnapshotInput(fsys, d.Old)
		cur, err2 := b.SnapshotInput(fsys, d.New)
		switch {
		case err1 != nil:
			d.Problem = err1.Error()
		case err2 != nil:
			d.Problem = err2.Error()
		default:
			d.Result = snapdiff.Diff(old, cur)
		}
		out = append(out, d)
	}
	return out
}
