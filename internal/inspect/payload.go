package inspect

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"sync"

	"github.com/tracectl/tracectl/transcript"
)

// Errors of PayloadBytes.
var (
	// ErrUnavailable: the bytes are not in the bundle (not retained, or
	// missing). Never a pass, never a mismatch.
	ErrUnavailable = errors.New("payload unavailable")
	// ErrMismatch: bytes are present but do not open their commitment.
	ErrMismatch = errors.New("payload does not match its digest")
	// ErrTooLarge: the payload is longer than the caller's bound.
	ErrTooLarge = errors.New("payload longer than the bound")
)

// The payload reader of the bundle read last: a bundle's pack is indexed
// once, not once per payload.
var lastPayloads struct {
	sync.Mutex
	fsys fs.FS
	p    *transcript.Payloads
}

func payloadsOf(fsys fs.FS) (*transcript.Payloads, error) {
	if !reflect.TypeOf(fsys).Comparable() {
		return transcript.OpenPayloads(fsys)
	}
	lastPayloads.Lock()
	defer lastPayloads.Unlock()
	if lastPayloads.p != nil && lastPayloads.fsys == fsys {
		return lastPayloads.p, nil
	}
	p, err := transcript.OpenPayloads(fsys)
	if err != nil {
		return nil, err
	}
	if lastPayloads.p != nil {
		lastPayloads.p.Close()
	}
	lastPayloads.fsys, lastPayloads.p = fsys, p
	return p, nil
}

// PayloadBytes returns the exact bytes the bundle holds for digest (its
// payload pack, or blob files in bundles from before the pack), read
// through fsys (verify.DirFS refuses links, FIFOs and devices), at most max
// bytes, checked against the commitment (salted in transcript v3). It is
// the one place this package reads payload bytes.
func PayloadBytes(fsys fs.FS, digest string, max int64) ([]byte, error) {
	if transcript.BlobPath(digest) == "" {
		return nil, fmt.Errorf("payload %q: %w: malformed digest", bounded(digest, 80), ErrUnavailable)
	}
	p, err := payloadsOf(fsys)
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w: %w", digest, ErrUnavailable, err)
	}
	if !reflect.TypeOf(fsys).Comparable() {
		defer p.Close()
	}
	b, err := p.Read(digest, max)
	switch {
	case errors.Is(err, transcript.ErrPayloadTooLarge):
		return nil, fmt.Errorf("payload %s: %w (%d bytes)", digest, ErrTooLarge, max)
	case errors.Is(err, transcript.ErrPayloadMismatch):
		return nil, fmt.Errorf("payload %s: %w", digest, ErrMismatch)
	case err != nil:
		return nil, fmt.Errorf("payload %s: %w: %w", digest, ErrUnavailable, err)
	}
	return b, nil
}

// bounded cuts s to at most n bytes (for error messages only).
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
