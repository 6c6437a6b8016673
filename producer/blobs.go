package producer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// blobStore keeps exact bytes content-addressed under blobs/sha256/<hex>.
// A blob is written to a temporary name and renamed, so a crash mid-write
// never leaves a blob whose bytes do not match its name. It is not fsynced
// on its own: a process crash keeps it (the page cache survives), and Close
// and Seal make all of them durable with one syncfs.
type blobStore struct {
	fsys FS
	dir  string // bundle/blobs/sha256
	tmp  atomic.Int64
}

// tmpPrefix marks temporary blob files; recovery removes leftovers (bytes
// that were never referenced by a durable line).
const tmpPrefix = ".tmp-"

// put stores b and returns its digest.
func (s *blobStore) put(b []byte) (string, error) {
	d := canon.SHA256(b)
	return d, s.putDigest(b, d)
}

// putDigest stores b, whose digest d the caller computed.
func (s *blobStore) putDigest(b []byte, d string) error {
	final := filepath.Join(s.dir, d[len("sha256:"):])
	if _, err := s.fsys.Stat(final); err == nil {
		return nil // content-addressed: the same name holds the same bytes
	}
	tmp := filepath.Join(s.dir, tmpPrefix+strconv.FormatInt(s.tmp.Add(1), 10)+"-"+d[len("sha256:"):][:16])
	f, err := s.fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create blob %s: %w", d, err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = s.fsys.Rename(tmp, final)
	}
	if werr != nil {
		_ = s.fsys.Remove(tmp)
		return fmt.Errorf("write blob %s: %w", d, werr)
	}
	return nil
}

// payload commits to b and, when retain allows and b is within the frame
// limit, starts storing it. The blob is written while the line that
// commits to it is appended (its latency hides behind the journal's
// fsync); the caller waits for it before returning, so a blob is complete
// before the call that commits to it returns. A crash in between leaves a
// durable line whose call never returned (never dispatched, never
// delivered) and whose bytes a verifier reports as unavailable.
func (r *Recorder) payload(b []byte, retain bool) (transcript.Payload, func() error) {
	p := transcript.Payload{Digest: canon.SHA256(b), Length: int64(len(b))}
	switch {
	case int64(len(b)) > r.opts.Limits.MaxFrameBytes:
		p.OverLimit = true
	case retain:
		p.Retained = true
		done := make(chan error, 1)
		go func() { done <- r.blobs.putDigest(b, p.Digest) }()
		return p, func() error { return <-done }
	}
	return p, func() error { return nil }
}

// removeTempBlobs deletes temporary blob files a crash left behind and
// returns how many there were.
func removeTempBlobs(fsys FS, dir string) (int, error) {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if len(e.Name()) > len(tmpPrefix) && e.Name()[:len(tmpPrefix)] == tmpPrefix {
			if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
