package producer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/transcript"
)

// Payload bytes are appended once to the bundle's pack, payloads.pack, as
// an entry "<sha256 hex> <length>\n<bytes>\n" (transcript.ScanPack), in one
// write, before the line that commits to them is appended. The pack is
// their final form: no settle step, no file per payload. A failed write is
// rolled back by truncation, so the pack is always whole entries, and the
// failure is sticky. The pack is fsynced before the journal wherever the
// journal is (strict: each group commit; batch: each interval; always at
// Close and Seal), so a durable line's payload is durable too.
type packStore struct {
	fsys FS
	path string

	mu     sync.Mutex
	f      File
	size   int64 // the pack's length: whole entries only
	synced int64 // bytes [0, synced) are fsynced
	err    error
	buf    []byte // reused for entries up to maxPackBuf

	syncs atomic.Int64
	wb    *writeback // none and batch: starts writeback as entries are written
}

// maxPackBuf bounds the buffer an entry is assembled in; a longer payload
// is written header, bytes, LF (and rolled back as one if any part fails).
const maxPackBuf = 1 << 20

// createPack creates the pack of a new bundle.
func createPack(fsys FS, dir string) (*packStore, error) {
	path := filepath.Join(dir, transcript.PackFile)
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", transcript.PackFile, err)
	}
	return &packStore{fsys: fsys, path: path, f: f}, nil
}

// errPackTorn reports a pack whose last entry a crash cut short.
var errPackTorn = errors.New("the payload pack ends inside an entry")

// openPack opens an existing bundle's pack for appending. A bundle from
// before the pack gets an empty one. The pack must be whole entries unless
// cut is set, in which case a torn final entry (a write a crash cut short:
// its line was never appended, since the line follows the entry) is
// truncated and its length returned. Any other damage is ErrCorrupt.
func openPack(fsys FS, dir string, cut bool) (*packStore, int64, error) {
	path := filepath.Join(dir, transcript.PackFile)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		s, err := createPack(fsys, dir)
		return s, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", transcript.PackFile, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat %s: %w", transcript.PackFile, err)
	}
	end, err := transcript.ScanPack(f, nil)
	var p *transcript.PackProblem
	switch {
	case errors.As(err, &p) && p.Torn && cut:
	case errors.As(err, &p) && p.Torn:
		f.Close()
		return nil, 0, fmt.Errorf("%w (%s): %w", ErrNeedsRecovery, p.Error(), errPackTorn)
	case err != nil:
		f.Close()
		return nil, 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	torn := fi.Size() - end
	if torn > 0 {
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("truncate the torn tail of %s: %w", transcript.PackFile, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("fsync %s: %w", transcript.PackFile, err)
		}
	}
	return &packStore{fsys: fsys, path: path, f: f, size: end, synced: end}, torn, nil
}

func (s *packStore) failLocked(what string, err error) error {
	if terr := s.f.Truncate(s.size); terr != nil {
		err = fmt.Errorf("%w (and the partial entry could not be truncated: %v)", err, terr)
	}
	s.err = fmt.Errorf("%s %s: %w", what, transcript.PackFile, err)
	return s.err
}

// put appends b, whose commitment d the caller computed (with salt, or
// SHA-256 when salt is nil).
func (s *packStore) put(b []byte, d string, salt []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	n := int64(len(b))
	if len(b) <= maxPackBuf {
		e := transcript.AppendPackHeader(s.buf[:0], d, n, salt)
		e = append(append(e, b...), '\n')
		if cap(e) <= maxPackBuf+transcript.MaxPackHeader+1 {
			s.buf = e
		}
		if _, err := s.f.Write(e); err != nil {
			return s.failLocked("write payload "+d+" to", err)
		}
	} else {
		for _, part := range [][]byte{transcript.AppendPackHeader(nil, d, n, salt), b, {'\n'}} {
			if _, err := s.f.Write(part); err != nil {
				return s.failLocked("write payload "+d+" to", err)
			}
		}
	}
	s.size += packEntryLen(n, salt != nil)
	s.wb.note(int(min(n, 1<<30)))
	return nil
}

// packEntryLen is the length of the entry of an n-byte payload.
func packEntryLen(n int64, salted bool) int64 {
	digits := int64(1)
	for v := n; v >= 10; v /= 10 {
		digits++
	}
	l := 64 + 1 + digits + 1 + n + 1
	if salted {
		l += 1 + 2*transcript.SaltBytes
	}
	return l
}

// errPayloadChanged reports streamed bytes that did not hash to the digest
// their producer computed: the entry is rolled back.
var errPayloadChanged = errors.New("the streamed payload's bytes do not match its digest")

// putReader appends the n bytes of r, whose digest d the caller computed
// while they streamed past it (a frame too long to hold in memory). The
// bytes are hashed again as they are copied; if r yields other bytes the
// entry is rolled back and errPayloadChanged returned (the pack stays
// usable).
func (s *packStore) putReader(r io.Reader, d string, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := s.f.Write(transcript.AppendPackHeader(nil, d, n, nil)); err != nil {
		return s.failLocked("write payload "+d+" to", err)
	}
	h := sha256.New()
	c, err := io.CopyN(io.MultiWriter(s.f, h), r, n)
	if err == nil {
		_, err = s.f.Write([]byte{'\n'})
	}
	if err == nil && "sha256:"+hex.EncodeToString(h.Sum(nil)) != d {
		if terr := s.f.Truncate(s.size); terr != nil {
			return s.failLocked("roll back payload "+d+" in", terr)
		}
		return fmt.Errorf("payload %s: %w", d, errPayloadChanged)
	}
	if err != nil {
		return s.failLocked(fmt.Sprintf("write payload %s (%d of %d bytes) to", d, c, n), err)
	}
	s.size += packEntryLen(n, false)
	return nil
}

// sync makes every entry appended so far durable.
func (s *packStore) sync() error {
	s.mu.Lock()
	if s.err != nil {
		defer s.mu.Unlock()
		return s.err
	}
	size := s.size
	if s.synced >= size {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	err := s.f.Sync()
	s.syncs.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("fsync %s: %w", transcript.PackFile, err)
		}
		return s.err
	}
	s.synced = max(s.synced, size)
	return nil
}

// close fsyncs (if sync) and closes the pack.
func (s *packStore) close(sync bool) error {
	var err error
	if sync {
		err = s.sync()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return err
	}
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", transcript.PackFile, cerr)
	}
	s.f = nil
	if err == nil && s.err == nil {
		s.err = ErrClosed
	}
	return err
}

// payload commits to b under a new salt and, when retain allows and b is
// within the frame limit, appends it and its salt to the pack (before the
// line that commits to it). Not retained, the salt is dropped: the
// commitment hides the bytes from anyone who guesses them.
func (r *Recorder) payload(b []byte, m *mcpwire.Message, retain bool) (transcript.Payload, error) {
	p, _, err := r.saltedPayload(b, m, retain)
	return p, err
}

// saltedPayload is payload, returning the salt of the commitment to the
// exact bytes too (a request's arguments digest is salted with it; it is
// kept in the pack only when the exact bytes are).
//
// With redaction rules, a retained payload is redacted first: when a value
// is hidden, the pack keeps the redacted copy under its own salt, and the
// line commits to that copy, to the list of what it hides, and to the exact
// bytes under a salt nobody keeps. Bytes that cannot be redacted exactly
// but may hold a secret are not kept at all (WithheldUnredactable).
//
// m, when not nil, is the gate's reading of b (mcpwire.Read): redaction
// walks it instead of parsing b again.
func (r *Recorder) saltedPayload(b []byte, m *mcpwire.Message, retain bool) (transcript.Payload, []byte, error) {
	salt, err := r.newSalt()
	if err != nil {
		return transcript.Payload{}, nil, err
	}
	p := transcript.Payload{Digest: transcript.SaltedDigest(salt, b), Length: int64(len(b))}
	switch {
	case int64(len(b)) > r.opts.Limits.MaxFrameBytes:
		p.OverLimit = true
		return p, salt, nil
	case !retain:
		return p, salt, nil
	}
	if r.rules != nil {
		var res redact.Result
		var rerr error
		if m != nil && len(m.Body) == len(b) {
			res, rerr = redact.MessageParsed(b, m.Root, r.rules)
		} else {
			res, rerr = redact.Message(b, r.rules)
		}
		var re *redact.Error
		notJSON := errors.As(rerr, &re) && re.Code == redact.CodeInvalidMessage
		switch {
		case rerr != nil && !notJSON, notJSON && redact.Scan(b, r.rules), rerr == nil && !fitsLine(res.Redactions):
			// Something to hide that cannot be hidden exactly (a secret in
			// a name, under a repeated name, or where no checkable pointer
			// reaches), or bytes that do not parse but look like they hold
			// a secret: none of them are kept.
			p.Withheld = transcript.WithheldUnredactable
			return p, salt, nil
		case rerr == nil && len(res.Redactions) > 0:
			rsalt, err := r.newSalt()
			if err != nil {
				return p, salt, err
			}
			red := transcript.Payload{Digest: transcript.SaltedDigest(rsalt, res.Redacted), Length: int64(len(res.Redacted)),
				Original: p.Digest, Retained: true}
			for _, x := range res.Redactions {
				red.Redactions = append(red.Redactions, transcript.Redaction{Class: string(x.Class), Pointer: x.Pointer})
			}
			if err := r.pack.put(res.Redacted, red.Digest, rsalt); err != nil {
				return red, salt, err
			}
			return red, salt, nil
		}
	}
	if err := r.pack.put(b, p.Digest, salt); err != nil {
		return p, salt, err
	}
	p.Retained = true
	return p, salt, nil
}

// fitsLine says whether a redaction list fits the line that carries it.
func fitsLine(reds []redact.Redaction) bool {
	if len(reds) > transcript.MaxRedactions {
		return false
	}
	for _, x := range reds {
		if len(x.Pointer) > transcript.MaxRedactionPointer {
			return false
		}
	}
	return true
}

// newSalt reads a payload salt from the recorder's entropy.
func (r *Recorder) newSalt() ([]byte, error) {
	salt := make([]byte, transcript.SaltBytes)
	r.saltMu.Lock()
	_, err := io.ReadFull(r.opts.Entropy, salt)
	r.saltMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: read entropy for a payload salt: %w", ErrAuditUnavailable, err)
	}
	return salt, nil
}

// Bundles written before the pack kept payloads as blobs/sha256/<hex> and,
// while recording, in the spool blobs/.spool (the pack's framing). Reopen
// and Recover of such an unsealed bundle append the spool's whole entries
// whose bytes match their digest to the pack and remove the spool; the
// blobs stay where they are (a verifier reads both), and temporary blob
// files a crash left (.tmp-*, never blobs) are removed.
const (
	legacySpool     = "blobs/.spool"
	legacyTmpPrefix = ".tmp-"
)

// migrateSpool moves a legacy spool's entries into the pack. It returns how
// many it moved.
func (r *Recorder) migrateSpool() (int, error) {
	path := filepath.Join(r.dir, filepath.FromSlash(legacySpool))
	f, err := r.fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", legacySpool, err)
	}
	defer f.Close()
	moved := 0
	_, err = transcript.ScanPack(f, func(e transcript.PackEntry, body io.Reader) error {
		if e.Length > r.opts.Limits.MaxFrameBytes || e.Salt != nil {
			return nil // a legacy spool holds plain entries only
		}
		b := make([]byte, e.Length)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil // torn: the scan reports it
		}
		if !e.Check(b) {
			return nil // damaged: never trusted
		}
		if err := r.pack.put(b, e.Digest, nil); err != nil {
			return err
		}
		moved++
		return nil
	})
	var p *transcript.PackProblem
	if err != nil && !errors.As(err, &p) {
		return moved, err
	}
	if err := r.pack.sync(); err != nil {
		return moved, err
	}
	if err := r.fsys.Remove(path); err != nil {
		return moved, fmt.Errorf("remove %s: %w", legacySpool, err)
	}
	return moved, syncDir(r.fsys, filepath.Dir(path))
}

// removeTempBlobs deletes temporary blob files a crash of a recorder from
// before the pack left behind and returns how many there were.
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
		if strings.HasPrefix(e.Name(), legacyTmpPrefix) && len(e.Name()) > len(legacyTmpPrefix) {
			if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
