// Package snapfile reads and writes the standalone snapshot file that
// tracectl snapshot writes and tracectl diff reads (spec/snapshot.md 7.1,
// the snapshot file): one self-contained canonical JSON object (RFC 8785):
//
//	{"blobs":{"sha256:<hex>":"<base64>",...},"format":"tracectl.snapshot.file/v1","manifest":{...}}
//
// "manifest" holds the manifest's canonical bytes verbatim, so its digest is
// the SHA-256 of that exact span; "blobs" holds every request and response
// line the manifest commits to, in standard base64, keyed by digest.
package snapfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/snapshot"
)

// Format is the file's format id: a snapshot file's digest can never be
// mistaken for the digest of another object.
const Format = "tracectl.snapshot.file/v1"

// MaxBytes bounds Parse: a manifest at its limit plus the default
// total page bytes in base64, with room to spare.
const MaxBytes = 256 << 20

// ErrInvalid is wrapped by every Parse rejection.
var ErrInvalid = errors.New("invalid snapshot file")

// File is a parsed snapshot file.
type File struct {
	Manifest      *snapshot.Manifest
	ManifestBytes []byte // the exact manifest bytes in the file
	Digest        string // SHA-256 of ManifestBytes
	Blobs         map[string][]byte
}

// Load returns a blob's bytes, or an error wrapping fs.ErrNotExist.
func (f *File) Load(digest string) ([]byte, error) {
	b, ok := f.Blobs[digest]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", digest, fs.ErrNotExist)
	}
	return b, nil
}

// Encode returns the snapshot file for s.
func Encode(s *snapshot.Snapshot) ([]byte, error) {
	blobs := map[string][]byte{}
	for _, p := range s.Pages {
		blobs[canon.SHA256(p.Request)] = p.Request
		blobs[canon.SHA256(p.Response)] = p.Response
	}
	return encodeFile(blobs, s.Bytes), nil
}

func encodeFile(blobs map[string][]byte, manifest []byte) []byte {
	keys := make([]string, 0, len(blobs))
	for k := range blobs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // digests are ASCII: byte order is RFC 8785 order
	size := len(manifest) + 64
	for _, k := range keys {
		size += len(k) + 6 + base64.StdEncoding.EncodedLen(len(blobs[k]))
	}
	b := make([]byte, 0, size)
	b = append(b, `{"blobs":{`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":"`...)
		b = base64.StdEncoding.AppendEncode(b, blobs[k])
		b = append(b, '"')
	}
	b = append(b, `},"format":"`+Format+`","manifest":`...)
	b = append(b, manifest...)
	return append(b, '}')
}

// Parse parses a snapshot file strictly (canonical JSON, exactly the
// three members, a valid manifest, well-formed digests and base64). It does
// not check blob contents against their digests: snapshot.VerifyPages does, and
// reports a mismatch as a mismatch.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", ErrInvalid, len(data), MaxBytes)
	}
	doc, err := canon.Parse(data, canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxBytes}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	root := doc.Root()
	if root.Kind() != canon.KindObject || root.Len() != 3 {
		return nil, fmt.Errorf("%w: want an object with blobs, format and manifest", ErrInvalid)
	}
	format, ok1 := root.Get("format")
	blobs, ok2 := root.Get("blobs")
	mv, ok3 := root.Get("manifest")
	if s, _ := format.Str(); !ok1 || !ok2 || !ok3 || s != Format || blobs.Kind() != canon.KindObject {
		return nil, fmt.Errorf("%w: want format %q with blobs and manifest", ErrInvalid, Format)
	}
	f := &File{ManifestBytes: mv.Raw(), Blobs: make(map[string][]byte, blobs.Len())}
	if f.Manifest, err = snapshot.ParseManifest(f.ManifestBytes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	f.Digest = canon.SHA256(f.ManifestBytes)
	for _, m := range blobs.Members() {
		if _, err := canon.ParseDigest(m.Name); err != nil {
			return nil, fmt.Errorf("%w: blob name: %w", ErrInvalid, err)
		}
		s, ok := m.Value.Str()
		if !ok {
			return nil, fmt.Errorf("%w: blob %s is not a string", ErrInvalid, m.Name)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: blob %s: %w", ErrInvalid, m.Name, err)
		}
		f.Blobs[m.Name] = b
	}
	// The writer's layout is the only one accepted (canonical JSON), so two
	// files holding one snapshot are byte-identical.
	if !bytes.Equal(encodeFile(f.Blobs, f.ManifestBytes), data) {
		return nil, fmt.Errorf("%w: not in canonical form", ErrInvalid)
	}
	return f, nil
}
