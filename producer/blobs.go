package producer

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// Payload bytes are kept in two steps.
//
// While recording, each payload is appended to one spool file,
// blobs/.spool, as a frame "<sha256 hex> <length>\n<bytes>\n" — one write to
// a file that already exists, before the line that commits to the payload
// is appended. Creating a file per payload instead would put an inode
// creation into every journal fsync's file-system transaction and make
// strict mode markedly slower than the fsyncs it needs.
//
// Close, Seal, Reopen and Recover then settle the spool: every complete
// frame whose bytes hash to its digest becomes blobs/sha256/<hex> (written
// to a temporary name and renamed, so a blob's bytes always match its
// name), the blobs are made durable with one syncfs, and the spool is
// removed. A frame torn by a crash is dropped: its line, if durable, was
// never acknowledged, and a verifier reports its bytes unavailable. A frame
// whose bytes do not hash to its digest never becomes a blob.
type blobStore struct {
	fsys  FS
	dir   string // bundle/blobs/sha256
	spool string // bundle/blobs/.spool
	mu    sync.Mutex
	f     File // the spool, open for appending; nil until the first payload
	tmp   atomic.Int64
}

const (
	// spoolName is the spool file under blobs/.
	spoolName = ".spool"
	// tmpPrefix marks temporary blob files; settling and recovery remove
	// leftovers (never a blob: a blob only exists after its rename).
	tmpPrefix = ".tmp-"
	// maxSpoolHeader bounds a frame header: 64 hex digits, a space, a
	// decimal length, an LF.
	maxSpoolHeader = 64 + 1 + 20 + 1
)

func newBlobStore(fsys FS, bundle string) *blobStore {
	blobs := filepath.Join(bundle, "blobs")
	return &blobStore{fsys: fsys, dir: filepath.Join(bundle, filepath.FromSlash(transcript.BlobDir)), spool: filepath.Join(blobs, spoolName)}
}

// spoolHeader appends a spool frame's header for n bytes of digest d.
func spoolHeader(dst []byte, d string, n int64) []byte {
	dst = append(dst, d[len("sha256:"):]...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\n')
}

// spoolFile returns the spool, created on the first payload. Called with
// mu held.
func (s *blobStore) spoolFile() (File, error) {
	if s.f == nil {
		f, err := s.fsys.OpenFile(s.spool, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create payload spool: %w", err)
		}
		s.f = f
	}
	return s.f, nil
}

// put appends b (whose digest d the caller computed) to the spool, in one
// write.
func (s *blobStore) put(b []byte, d string) error {
	frame := spoolHeader(make([]byte, 0, len(b)+maxSpoolHeader+1), d, int64(len(b)))
	frame = append(append(frame, b...), '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.spoolFile()
	if err != nil {
		return err
	}
	if _, err := f.Write(frame); err != nil {
		return fmt.Errorf("write payload %s: %w", d, err)
	}
	return nil
}

// putReader appends the n bytes of r (whose digest d the caller computed) to
// the spool: a payload too long to hold in memory. If r yields other bytes,
// settling never makes a blob of them.
func (s *blobStore) putReader(r io.Reader, d string, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.spoolFile()
	if err != nil {
		return err
	}
	if _, err := f.Write(spoolHeader(make([]byte, 0, maxSpoolHeader), d, n)); err != nil {
		return fmt.Errorf("write payload %s: %w", d, err)
	}
	if c, err := io.CopyN(f, r, n); err != nil {
		return fmt.Errorf("write payload %s: %d of %d bytes: %w", d, c, n, err)
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return fmt.Errorf("write payload %s: %w", d, err)
	}
	return nil
}

// payload commits to b and, when retain allows and b is within the frame
// limit, spools it (before the line that commits to it is appended).
func (r *Recorder) payload(b []byte, retain bool) (transcript.Payload, error) {
	p := transcript.Payload{Digest: canon.SHA256(b), Length: int64(len(b))}
	switch {
	case int64(len(b)) > r.opts.Limits.MaxFrameBytes:
		p.OverLimit = true
	case retain:
		if err := r.blobs.put(b, p.Digest); err != nil {
			return p, err
		}
		p.Retained = true
	}
	return p, nil
}

// settle turns the spool into blobs, makes them durable when sync is set,
// and removes the spool. It returns how many blobs it wrote. Every blob
// comes from the spool, so without a spool there is nothing to do.
func (s *blobStore) settle(sync bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		err := s.f.Close()
		s.f = nil
		if err != nil {
			return 0, fmt.Errorf("close payload spool: %w", err)
		}
	}
	if _, err := s.fsys.Stat(s.spool); errors.Is(err, fs.ErrNotExist) {
		return 0, nil // nothing spooled since the last settle: nothing to make durable
	}
	n, err := s.materialize()
	if err != nil {
		return n, err
	}
	if sync {
		if err := s.fsys.SyncFS(s.dir); err != nil {
			return n, fmt.Errorf("sync blobs: %w", err)
		}
	}
	if err := s.fsys.Remove(s.spool); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n, fmt.Errorf("remove payload spool: %w", err)
	}
	if sync {
		if err := syncDir(s.fsys, filepath.Dir(s.spool)); err != nil {
			return n, fmt.Errorf("sync blobs: %w", err)
		}
	}
	return n, nil
}

// materialize writes a blob for every complete frame of the spool whose
// bytes hash to its digest, streaming (memory does not depend on payload
// sizes). It stops where the spool ends or a frame header is unreadable.
func (s *blobStore) materialize() (int, error) {
	f, err := s.fsys.OpenFile(s.spool, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read payload spool: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	n := 0
	for {
		hdr, err := br.ReadSlice('\n')
		if err != nil || len(hdr) > maxSpoolHeader {
			return n, nil // end, or a torn header
		}
		hexd, lenText, ok := cutSpace(hdr[:len(hdr)-1])
		length, perr := strconv.ParseInt(string(lenText), 10, 64)
		if !ok || len(hexd) != 64 || transcript.BlobPath("sha256:"+string(hexd)) == "" || perr != nil || length < 0 {
			return n, nil
		}
		final := filepath.Join(s.dir, string(hexd))
		if _, err := s.fsys.Stat(final); err == nil {
			if _, err := io.CopyN(io.Discard, br, length+1); err != nil {
				return n, nil
			}
			continue
		}
		st, err := s.writeBlob(final, string(hexd), io.LimitReader(br, length), length)
		switch {
		case err != nil:
			return n, err
		case st == frameShort:
			return n, nil
		case st == frameWritten:
			n++
		}
		// A frame whose bytes do not match its digest is skipped, not
		// trusted; its length still says where the next frame starts (and
		// any misreading of it only yields frames that fail their digest).
		if b, err := br.ReadByte(); err != nil || b != '\n' {
			return n, nil // the spool ends here (a tear at the very end)
		}
	}
}

// Outcomes of writing one frame.
const (
	frameWritten  = iota
	frameMismatch // complete, but the bytes do not hash to the digest
	frameShort    // the spool ends inside the frame
)

// writeBlob streams length bytes from r into final through a temporary
// file, keeping it only if they hash to hexd.
func (s *blobStore) writeBlob(final, hexd string, r io.Reader, length int64) (int, error) {
	tmp := filepath.Join(s.dir, tmpPrefix+strconv.FormatInt(s.tmp.Add(1), 10)+"-"+hexd[:16])
	f, err := s.fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create blob sha256:%s: %w", hexd, err)
	}
	h := sha256.New()
	copied, err := io.Copy(io.MultiWriter(f, h), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil && copied != length:
		_ = s.fsys.Remove(tmp)
		return frameShort, nil
	case err == nil && hex.EncodeToString(h.Sum(nil)) != hexd:
		_ = s.fsys.Remove(tmp)
		return frameMismatch, nil
	case err == nil:
		err = s.fsys.Rename(tmp, final)
	}
	if err != nil {
		_ = s.fsys.Remove(tmp)
		return 0, fmt.Errorf("write blob sha256:%s: %w", hexd, err)
	}
	return frameWritten, nil
}

func cutSpace(b []byte) (before, after []byte, ok bool) {
	for i, c := range b {
		if c == ' ' {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
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
