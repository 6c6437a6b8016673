package inspect

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/tracectl/tracectl/transcript"
)

// Errors of PayloadBytes.
var (
	// ErrUnavailable: the bytes are not in the bundle (not retained, or
	// missing). Never a pass, never a mismatch.
	ErrUnavailable = errors.New("payload unavailable")
	// ErrMismatch: bytes are present but do not hash to their digest.
	ErrMismatch = errors.New("payload does not match its digest")
	// ErrTooLarge: the payload is longer than the caller's bound.
	ErrTooLarge = errors.New("payload longer than the bound")
)

// PayloadBytes returns the exact bytes the bundle holds for digest, read
// through fsys (verify.DirFS refuses links, FIFOs and devices), at most max
// bytes, checked against the digest. It is the one place this package reads
// payload bytes, so a change of the bundle's payload layout changes it alone.
func PayloadBytes(fsys fs.FS, digest string, max int64) ([]byte, error) {
	path := transcript.BlobPath(digest)
	if path == "" {
		return nil, fmt.Errorf("payload %q: %w: malformed digest", bounded(digest, 80), ErrUnavailable)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w: %w", digest, ErrUnavailable, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w: %w", digest, ErrUnavailable, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("payload %s: %w (%d bytes)", digest, ErrTooLarge, max)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("payload %s: %w", digest, ErrMismatch)
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
