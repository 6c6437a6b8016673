package transcript

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"slices"
	"strconv"
)

// The payload pack (spec/transcript.md, "Payloads"): every retained payload
// is one entry of the append-only file PackFile,
//
//	<64 lowercase hex of the commitment> SP <decimal length> [SP <32 lowercase hex salt>] LF <bytes> LF
//
// appended before the line that commits to it. Without a salt the
// commitment is SHA-256(bytes); with one it is SaltedDigest(salt, bytes)
// (format v3: a commitment nobody can test a guess against without the
// salt, which is kept with the bytes and withheld with them). The pack is the payload
// bytes' final form: nothing is moved or renamed at seal. A reader indexes
// it by scanning the headers (IndexPack), then reads an entry's bytes where
// the index says they are; the digest in a header is a claim, checked
// against the bytes by whoever reads them.
const (
	// PackFile is the bundle's payload pack.
	PackFile = "payloads.pack"
	// SaltBytes is the length of a payload salt.
	SaltBytes = 16
	// MaxPackHeader bounds an entry header: 64 hex digits, a space, a
	// decimal length of at most 19 digits, a space and a salt, an LF.
	MaxPackHeader = 64 + 1 + 19 + 1 + 2*SaltBytes + 1
)

// Domain separation of salted commitments (spec/transcript.md, "Payloads").
// SaltedPayloadLabel is what a salted payload hash absorbs before the salt.
const (
	SaltedPayloadLabel   = "tracectl salted payload v1\x00"
	saltedArgumentsLabel = "tracectl salted arguments v1\x00"
)

// SaltedDigest is the commitment to a payload's bytes under salt:
// "sha256:" + hex(SHA-256("tracectl salted payload v1" 0x00 || salt ||
// bytes)).
func SaltedDigest(salt, b []byte) string {
	// A frame of the usual size is hashed from one buffer on the stack;
	// the digest is the same either way.
	var buf [2048]byte
	if n := len(SaltedPayloadLabel) + len(salt) + len(b); n <= len(buf) {
		m := copy(buf[:], SaltedPayloadLabel)
		m += copy(buf[m:], salt)
		copy(buf[m:], b)
		sum := sha256.Sum256(buf[:n])
		return digestString(sum[:])
	}
	h := newSaltedHash(salt)
	h.Write(b)
	return digestString(h.Sum(nil))
}

// digestString formats a SHA-256 sum as "sha256:<hex>", in one allocation.
func digestString(sum []byte) string {
	var buf [len("sha256:") + 2*sha256.Size]byte
	copy(buf[:], "sha256:")
	hex.Encode(buf[len("sha256:"):], sum)
	return string(buf[:])
}

// newSaltedHash returns a SHA-256 that has absorbed the payload label and
// salt: write the bytes, and its sum is SaltedDigest's.
func newSaltedHash(salt []byte) hash.Hash {
	h := sha256.New()
	h.Write([]byte(SaltedPayloadLabel))
	h.Write(salt)
	return h
}

// SaltedArgsDigest is the arguments commitment of a request whose payload
// is salted: "sha256:" + hex(SHA-256("tracectl salted arguments v1" 0x00
// || salt || the 32 bytes of plain)), plain being the canonical arguments
// digest (RequestFacts.ArgsDigest) and salt the request payload's. "" for
// "" or a malformed plain digest.
func SaltedArgsDigest(salt []byte, plain string) string {
	raw, err := hex.DecodeString(plain[min(len(plain), len("sha256:")):])
	if plain == "" || err != nil || len(raw) != sha256.Size {
		return ""
	}
	var buf [64 + 2*sha256.Size]byte
	if len(saltedArgumentsLabel)+len(salt)+len(raw) > len(buf) {
		h := sha256.New()
		h.Write([]byte(saltedArgumentsLabel))
		h.Write(salt)
		h.Write(raw)
		return digestString(h.Sum(nil))
	}
	m := copy(buf[:], saltedArgumentsLabel)
	m += copy(buf[m:], salt)
	m += copy(buf[m:], raw)
	sum := sha256.Sum256(buf[:m])
	return digestString(sum[:])
}

// AppendPackHeader appends the header of an entry holding n bytes whose
// commitment is d ("sha256:<hex>"), with salt when it is not nil
// (SaltBytes long).
func AppendPackHeader(dst []byte, d string, n int64, salt []byte) []byte {
	dst = append(dst, d[len("sha256:"):]...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, n, 10)
	if salt != nil {
		dst = append(dst, ' ')
		dst = hex.AppendEncode(dst, salt)
	}
	return append(dst, '\n')
}

// PackEntry is one entry's header, and where it is.
type PackEntry struct {
	Digest string // the commitment its header names, "sha256:<hex>"
	Salt   []byte // nil: the commitment is SHA-256 of the bytes
	Offset int64  // of the header
	Length int64  // of the bytes
	Header int64  // the header's length: the bytes start at Offset+Header
}

// Check says whether b are the entry's bytes: SaltedDigest(Salt, b), or
// SHA-256(b) without a salt, equals Digest.
func (e PackEntry) Check(b []byte) bool {
	if e.Salt != nil {
		return SaltedDigest(e.Salt, b) == e.Digest
	}
	sum := sha256.Sum256(b)
	return "sha256:"+hex.EncodeToString(sum[:]) == e.Digest
}

// PackProblem says where and why a pack stops being readable as entries.
type PackProblem struct {
	Offset int64 // where the entry that cannot be read begins
	// Torn: the pack ends inside this entry (its header or its bytes), as
	// a write cut short by a crash leaves it. Otherwise the bytes there are
	// not an entry (a malformed header, or no LF after the bytes).
	Torn bool
	// Full: IndexPack stopped at its maxEntries; the bytes there may be
	// whole entries, not indexed.
	Full   bool
	Detail string
}

func (p *PackProblem) Error() string {
	return fmt.Sprintf("%s at byte %d: %s", PackFile, p.Offset, p.Detail)
}

// ScanPack reads a pack's entries in order from r, calling fn with each
// entry's header; fn reads the entry's bytes from body (at most its length) or leaves them,
// and ScanPack skips what it did not read. fn sees an entry before ScanPack
// knows it is whole: an entry at or after the returned end is not one. It returns the offset after the
// last whole entry and, when the pack does not end there, the problem (a
// *PackProblem); an error from fn or from reading r is returned as is.
func ScanPack(r io.Reader, fn func(e PackEntry, body io.Reader) error) (end int64, err error) {
	if fn == nil {
		return scanPack(r, nil)
	}
	return scanPack(r, func(h []byte, e PackEntry, body io.Reader) error {
		e.Digest = "sha256:" + string(h[:64])
		if e.Salt != nil {
			e.Salt, _ = hex.DecodeString(string(h[len(h)-2*SaltBytes:]))
		}
		return fn(e, body)
	})
}

// scanPack is ScanPack giving fn the header line (without its LF) and the
// entry without its Digest, and with a non-nil Salt only as a sign that
// the header has one (its bytes are not decoded): nothing is allocated per
// entry unless fn does it.
func scanPack(r io.Reader, fn func(h []byte, e PackEntry, body io.Reader) error) (end int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	lr := &io.LimitedReader{R: br}
	for {
		hdr, err := br.ReadSlice('\n')
		switch {
		case err == io.EOF && len(hdr) == 0:
			return off, nil
		case err == io.EOF:
			return off, &PackProblem{Offset: off, Torn: true, Detail: fmt.Sprintf("%d bytes of a header, then the end", len(hdr))}
		case errors.Is(err, bufio.ErrBufferFull) || len(hdr) > MaxPackHeader:
			return off, &PackProblem{Offset: off, Detail: fmt.Sprintf("no header LF within %d bytes", MaxPackHeader)}
		case err != nil:
			return off, err
		}
		h := hdr[:len(hdr)-1]
		n, salted, ok := lexPackHeader(h)
		if !ok {
			return off, &PackProblem{Offset: off, Detail: "not an entry header (<64 hex> <length> [<32 hex salt>])"}
		}
		hl := int64(len(hdr))
		lr.N = n
		if fn != nil {
			e := PackEntry{Length: n, Offset: off, Header: hl}
			if salted {
				e.Salt = saltPresent
			}
			// h stays valid: nothing is read between ReadSlice and here.
			if err := fn(h, e, lr); err != nil {
				return off, err
			}
		}
		if lr.N > 0 {
			if m, err := br.Discard(int(min(lr.N, int64(^uint(0)>>1)))); int64(m) != lr.N {
				if err == nil || err == io.EOF {
					return off, &PackProblem{Offset: off, Torn: true, Detail: fmt.Sprintf("the header says %d bytes, the pack ends after %d", n, n-lr.N+int64(m))}
				}
				return off, err
			}
		}
		switch b, err := br.ReadByte(); {
		case err == io.EOF:
			return off, &PackProblem{Offset: off, Torn: true, Detail: "the pack ends before the entry's closing LF"}
		case err != nil:
			return off, err
		case b != '\n':
			return off, &PackProblem{Offset: off, Detail: fmt.Sprintf("byte %q after the entry's %d bytes, not LF", b, n)}
		}
		off += hl + n + 1
	}
}

// saltPresent marks, in scanPack's entries, a header with a salt.
var saltPresent = []byte{}

// lowerHexByte marks the bytes of lowercase hexadecimal.
var lowerHexByte = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

func isLowerHex(b []byte) bool {
	for _, c := range b {
		if !lowerHexByte[c] {
			return false
		}
	}
	return true
}

// lexPackHeader checks "<64 lowercase hex> <decimal length>[ <32
// lowercase hex>]" (no LF), the length without a sign or leading zeros,
// and returns the length and whether there is a salt, allocating nothing.
func lexPackHeader(h []byte) (n int64, salted bool, ok bool) {
	if len(h) < 64+2 || h[64] != ' ' || !isLowerHex(h[:64]) {
		return 0, false, false
	}
	num := h[65:]
	if sp := slices.Index(num, ' '); sp >= 0 {
		salt := num[sp+1:]
		if len(salt) != 2*SaltBytes || !isLowerHex(salt) {
			return 0, false, false
		}
		num, salted = num[:sp], true
	}
	if len(num) == 0 || len(num) > 19 || len(num) > 1 && num[0] == '0' {
		return 0, false, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		n = n*10 + int64(c-'0')
	}
	if n < 0 {
		return 0, false, false
	}
	return n, salted, true
}

// parsePackHeader is lexPackHeader, returning the entry's digest and salt.
func parsePackHeader(h []byte) (e PackEntry, ok bool) {
	n, salted, ok := lexPackHeader(h)
	if !ok {
		return e, false
	}
	if salted {
		e.Salt, _ = hex.DecodeString(string(h[len(h)-2*SaltBytes:]))
	}
	e.Digest, e.Length = "sha256:"+string(h[:64]), n
	return e, true
}

// PackIndex locates a pack's entries by digest without holding their bytes:
// 16 bytes per entry. Build it with IndexPack.
type PackIndex struct {
	keys    []packKey
	End     int64        // the offset after the last whole entry
	Problem *PackProblem // where reading stopped before the end, or nil
}

type packKey struct {
	prefix uint64 // the digest's first 8 bytes
	off    int64  // the entry's header
}

// IndexPack scans a pack (ScanPack) and indexes every whole entry, at most
// maxEntries of them (0: no limit; beyond it the index stops with a
// Problem). An error reading r is returned; a pack that stops being
// readable is not an error but the index's Problem.
func IndexPack(r io.Reader, maxEntries int64) (*PackIndex, error) {
	ix := &PackIndex{}
	errFull := errors.New("full")
	end, err := scanPack(r, func(h []byte, e PackEntry, _ io.Reader) error {
		if maxEntries > 0 && int64(len(ix.keys)) == maxEntries {
			return errFull
		}
		var raw [8]byte
		hex.Decode(raw[:], h[:16])
		ix.keys = append(ix.keys, packKey{prefix: binary.BigEndian.Uint64(raw[:]), off: e.Offset})
		return nil
	})
	ix.End = end
	var p *PackProblem
	switch {
	case err == errFull:
		ix.Problem = &PackProblem{Offset: end, Full: true, Detail: fmt.Sprintf("more than %d entries: the rest is not indexed", maxEntries)}
	case errors.As(err, &p):
		ix.Problem = p
	case err != nil:
		return nil, err
	}
	// ScanPack shows an entry before it knows the entry is whole: keep only
	// the entries before the end.
	for len(ix.keys) > 0 && ix.keys[len(ix.keys)-1].off >= end {
		ix.keys = ix.keys[:len(ix.keys)-1]
	}
	// Entries in pack order within one prefix, so the first entry for a
	// digest is the one found first.
	slices.SortStableFunc(ix.keys, func(a, b packKey) int {
		switch {
		case a.prefix < b.prefix:
			return -1
		case a.prefix > b.prefix:
			return 1
		}
		return 0
	})
	return ix, nil
}

// Len returns the number of indexed entries.
func (ix *PackIndex) Len() int { return len(ix.keys) }

// Distinct returns the number of distinct digests among the indexed
// entries (an entry stored twice counts once), as far as the index tells
// them apart: by their first 8 bytes.
func (ix *PackIndex) Distinct() int {
	n := 0
	for i, k := range ix.keys {
		if i == 0 || k.prefix != ix.keys[i-1].prefix {
			n++
		}
	}
	return n
}

// Locate returns the first entry whose header names digest, reading the
// candidates' headers from r (the pack) again: the index keeps only where
// they are.
func (ix *PackIndex) Locate(r io.ReaderAt, digest string) (e PackEntry, ok bool, err error) {
	raw, herr := hex.DecodeString(digest[min(len(digest), len("sha256:")):])
	if herr != nil || len(raw) != sha256.Size {
		return e, false, nil
	}
	prefix := binary.BigEndian.Uint64(raw)
	i, _ := slices.BinarySearchFunc(ix.keys, prefix, func(k packKey, p uint64) int {
		switch {
		case k.prefix < p:
			return -1
		case k.prefix > p:
			return 1
		}
		return 0
	})
	var buf [MaxPackHeader]byte
	for ; i < len(ix.keys) && ix.keys[i].prefix == prefix; i++ {
		k := ix.keys[i]
		m, err := r.ReadAt(buf[:], k.off)
		if m == 0 && err != nil {
			return e, false, err
		}
		nl := slices.Index(buf[:m], '\n')
		if nl < 0 {
			return e, false, fmt.Errorf("%s at byte %d: the indexed header is gone", PackFile, k.off)
		}
		h, ok := parsePackHeader(buf[:nl])
		if !ok {
			return e, false, fmt.Errorf("%s at byte %d: the indexed header changed", PackFile, k.off)
		}
		if h.Digest == digest {
			h.Offset, h.Header = k.off, int64(nl+1)
			return h, true, nil
		}
	}
	return e, false, nil
}

// ReaderAt returns f as an io.ReaderAt: f itself when it is one (an
// *os.File, an fstest.MapFS file), else through its io.Seeker; nil when it
// is neither.
func ReaderAt(f fs.File) io.ReaderAt {
	if ra, ok := f.(io.ReaderAt); ok {
		return ra
	}
	if rs, ok := f.(io.ReadSeeker); ok {
		return &seekReaderAt{rs: rs}
	}
	return nil
}

type seekReaderAt struct{ rs io.ReadSeeker }

func (s *seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := s.rs.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(s.rs, p)
}

// Errors of Payloads.Read.
var (
	ErrPayloadMissing  = errors.New("payload not in the bundle")
	ErrPayloadMismatch = errors.New("payload bytes do not match their digest")
	ErrPayloadTooLarge = errors.New("payload longer than the caller's limit")
)

// Payloads reads a bundle's retained payload bytes by digest: from its
// pack, or, for bundles written before the pack, from blobs/sha256/<hex>.
// Every read checks the bytes against the digest. Pass a file system that
// refuses links and special files (verify.DirFS) for a bundle you did not
// write.
type Payloads struct {
	fsys fs.FS
	pack fs.File
	ra   io.ReaderAt
	ix   *PackIndex
}

// OpenPayloads indexes fsys's pack, when there is one. A pack that stops
// being readable part way is indexed up to there (see Problem).
func OpenPayloads(fsys fs.FS) (*Payloads, error) {
	p := &Payloads{fsys: fsys}
	f, err := openRegularFile(fsys, PackFile)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	ra := ReaderAt(f)
	if ra == nil {
		f.Close()
		return nil, fmt.Errorf("%s: the file system gives no random access", PackFile)
	}
	ix, err := IndexPack(f, 0)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", PackFile, err)
	}
	p.pack, p.ra, p.ix = f, ra, ix
	return p, nil
}

// Read returns the bytes of digest when the bundle holds them, they hash to
// it and they are at most max bytes long.
func (p *Payloads) Read(digest string, max int64) ([]byte, error) {
	_, b, err := p.Entry(digest, max)
	return b, err
}

// Entry is Read with the entry's header: its salt, for copying the entry
// into another pack (a blob file of a bundle from before the pack is a
// plain entry).
func (p *Payloads) Entry(digest string, max int64) (PackEntry, []byte, error) {
	e, b, err := p.entry(digest, max)
	if err == nil {
		e.Digest, e.Length = digest, int64(len(b))
	}
	return e, b, err
}

func (p *Payloads) entry(digest string, max int64) (PackEntry, []byte, error) {
	if p.ix != nil {
		e, ok, err := p.ix.Locate(p.ra, digest)
		if err != nil {
			return e, nil, fmt.Errorf("read %s: %w", PackFile, err)
		}
		if ok {
			if e.Length > max {
				return e, nil, fmt.Errorf("%s: %d bytes: %w (%d)", digest, e.Length, ErrPayloadTooLarge, max)
			}
			b := make([]byte, e.Length)
			if _, err := p.ra.ReadAt(b, e.Offset+e.Header); err != nil {
				return e, nil, fmt.Errorf("read %s: %w", PackFile, err)
			}
			if !e.Check(b) {
				return e, nil, fmt.Errorf("%s: %w", digest, ErrPayloadMismatch)
			}
			return e, b, nil
		}
	}
	var none PackEntry
	path := BlobPath(digest)
	if path == "" {
		return none, nil, fmt.Errorf("%q: %w", digest, ErrPayloadMissing)
	}
	f, err := openRegularFile(p.fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return none, nil, fmt.Errorf("%s: %w", digest, ErrPayloadMissing)
	}
	if err != nil {
		return none, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return none, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return none, nil, fmt.Errorf("%s: %w (%d)", digest, ErrPayloadTooLarge, max)
	}
	b, err = checkPayload(b, digest)
	return none, b, err
}

func checkPayload(b []byte, digest string) ([]byte, error) {
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("%s: %w", digest, ErrPayloadMismatch)
	}
	return b, nil
}

// Close releases the pack.
func (p *Payloads) Close() error {
	if p.pack == nil {
		return nil
	}
	return p.pack.Close()
}

// openRegularFile opens name and refuses anything but a regular file (a
// FIFO would block a reader forever).
func openRegularFile(fsys fs.FS, name string) (fs.File, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s)", name, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
