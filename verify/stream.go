package verify

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tracectl/tracectl/transcript"
)

// The transcript is read by two goroutines (run). The line reader splits
// it into lines, decodes each one (transcript.DecodeLine, a pure function
// of the line) and locates and reads the pack entries the line commits
// to; the checker (the caller's goroutine) takes the lines in transcript
// order and does everything else, exactly as if it had read and decoded
// them itself. Hashing the entries and deriving the facts their bytes give
// (also pure functions of the bytes) is done by the reader when the
// checker has batches waiting, else by the checker (lineReader.ahead), so
// neither waits long for the other on two cores. What the reader computes
// depends only on the bundle's bytes and the checker consumes it in order,
// so the report is the same, finding for finding, whoever computed what.
// Neither goroutine reads the clock. Between the two is a bounded channel
// of batches (readAhead of them, each at most batchLines lines,
// batchLineBytes of lines and batchPrefetchBytes of payload bytes), and
// used batches are recycled: the memory in flight does not grow with the
// transcript.
const (
	readAhead          = 2
	batchLines         = 512
	batchLineBytes     = 256 << 10
	batchPrefetchBytes = 1 << 20
	// prefetchMaxEntry: larger entries are read by the checker itself,
	// streamed into the hash as before.
	prefetchMaxEntry = 256 << 10
	// packCacheBytes: the reader reads the pack in chunks of this size,
	// so entries stored in the order lines commit to them cost one read
	// per chunk rather than two per entry.
	packCacheBytes = 256 << 10
)

// lineBatch is a run of lines the reader read, decoded and prefetched.
type lineBatch struct {
	buf   []byte // the lines' bytes
	lines []readLine
	pre   []prefetched
	pbuf  []byte     // the bytes of pre
	bytes int        // len(pbuf)
	end   *streamEnd // set on the last batch: why reading stopped
}

type readLine struct {
	line       []byte
	ev         transcript.Event
	err        error
	pre0, pre1 int // the line's prefetched payloads: pre[pre0:pre1]
}

// streamEnd is why the reader stopped, at line idx.
type streamEnd struct {
	kind endKind
	idx  int64
	tail []byte // endEOF: bytes after the last LF (a torn line)
	err  error  // endReadErr
}

type endKind uint8

const (
	endEOF       endKind = iota // the end of the transcript
	endOverBytes                // Limits.MaxTranscriptBytes
	endOverLines                // Limits.MaxTranscriptLines
	endTooLong                  // no LF within MaxLineBytes
	endReadErr                  // a read error
)

// prefetched is a pack entry the reader located and read as the checker
// would have (blob): the entry Locate gave for digest, its bytes as read
// (at most its length), the read error, and (hashed) the hash of the
// bytes, salted as the entry says.
type prefetched struct {
	digest string
	used   bool
	what   uint8 // the payload's role: derivedRequest, derivedResponse, or 0
	// derived: the line reader also derived the facts the checker reads
	// from the bytes (deriveAhead), as the checker would.
	derived bool
	req     *transcript.RequestFacts
	reqErr  error
	resp    respDerived
	e       transcript.PackEntry
	data    []byte
	err     error
	hashed  bool // sum is set
	sum     [sha256.Size]byte
}

// sharedPack is the pack as the checker opened it (openPack), published
// to the reader once it is open. mu serializes Locate (which marks the
// index); ra is an io.ReaderAt of the file itself, which allows parallel
// reads.
type sharedPack struct {
	mu sync.Mutex
	ra io.ReaderAt
	ix *transcript.PackIndex
	// used holds the digests found, by the 8-byte prefix the index tells
	// entries apart by (PackIndex.Distinct): the entries some line or
	// manifest referenced (bounded by the index, ix.Len()).
	used map[uint64]struct{}
}

func (s *sharedPack) locate(r io.ReaderAt, digest string) (transcript.PackEntry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok, err := s.ix.Locate(r, digest)
	if ok && err == nil {
		s.useLocked(digest)
	}
	return e, ok, err
}

// use notes an entry found without the index (the line reader's walk).
func (s *sharedPack) use(digest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.useLocked(digest)
}

func (s *sharedPack) useLocked(digest string) {
	raw, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	if err != nil || len(raw) < 8 {
		return
	}
	if s.used == nil {
		s.used = map[uint64]struct{}{}
	}
	s.used[binary.BigEndian.Uint64(raw)] = struct{}{}
}

// Roles of a prefetched payload whose facts deriveAhead derives.
const (
	derivedRequest  = 1 // an attempt's request: transcript.DeriveRequest
	derivedResponse = 2 // an observation's response: deriveResponse
)

// deriveAhead derives, for the prefetched payloads of bt, the facts the
// checker reads from their bytes: pure functions of the bytes, computed
// here rather than there when the checker is the slower of the two. The
// checker uses them only for exactly these bytes (sameBytes).
func deriveAhead(bt *lineBatch, toolUseMeta []string) {
	for i := range bt.pre {
		pf := &bt.pre[i]
		if pf.err != nil || int64(len(pf.data)) != pf.e.Length || len(pf.data) > transcript.MaxDeriveBytes {
			continue
		}
		switch pf.what {
		case derivedRequest:
			pf.req, pf.reqErr = transcript.DeriveRequest(pf.data, toolUseMeta...)
			pf.derived = true
		case derivedResponse:
			pf.resp = deriveResponse(pf.data)
			pf.derived = true
		}
	}
}

// lineReader is the reader goroutine's state.
type lineReader struct {
	br   *bufio.Reader
	lim  Limits
	out  chan *lineBatch
	free chan *lineBatch
	done chan struct{}
	pack *atomic.Pointer[sharedPack]

	cache packCache
	walk  packWalk
	hash  hash.Hash
	stats streamStats

	// The first header's extra tool-use id keys, once it is read, which
	// requests are derived with (the checker's bundleCheck.toolUseMeta).
	headerRead  bool
	toolUseMeta []string
}

func (lr *lineReader) batch() *lineBatch {
	select {
	case bt := <-lr.free:
		return bt
	default:
		return &lineBatch{buf: make([]byte, 0, batchLineBytes), lines: make([]readLine, 0, batchLines)}
	}
}

// send hands bt to the checker; false when the checker has stopped.
func (lr *lineReader) send(bt *lineBatch) bool {
	select {
	case lr.out <- bt:
		return true
	case <-lr.done:
		return false
	}
}

// read reads the transcript to its end or a limit, stopping at the first
// of, in this order: the byte limit, the line limit, a line longer than
// the buffer, the end, a read error (run reports which, at which line).
func (lr *lineReader) read() {
	defer close(lr.out)
	bt := lr.batch()
	var consumed int64
	for idx := int64(0); ; idx++ {
		line, err := lr.br.ReadSlice('\n')
		var end *streamEnd
		switch consumed += int64(len(line)); {
		case consumed > lr.lim.MaxTranscriptBytes:
			end = &streamEnd{kind: endOverBytes}
		case idx == lr.lim.MaxTranscriptLines && len(line) > 0:
			end = &streamEnd{kind: endOverLines}
		case errors.Is(err, bufio.ErrBufferFull):
			end = &streamEnd{kind: endTooLong}
		case errors.Is(err, io.EOF):
			end = &streamEnd{kind: endEOF}
			if len(line) > 0 {
				end.tail = append([]byte(nil), line...)
			}
		case err != nil:
			end = &streamEnd{kind: endReadErr, err: err}
		}
		if end != nil {
			end.idx = idx
			bt.end = end
			lr.ahead(bt)
			lr.send(bt)
			return
		}
		line = line[:len(line)-1]
		if len(bt.lines) == cap(bt.lines) || len(bt.buf)+len(line) > cap(bt.buf) {
			lr.ahead(bt)
			if !lr.send(bt) {
				return
			}
			bt = lr.batch()
		}
		start := len(bt.buf)
		bt.buf = append(bt.buf, line...)
		l := readLine{line: bt.buf[start:len(bt.buf):len(bt.buf)]}
		l.ev, l.err = transcript.DecodeLine(l.line)
		if h, ok := l.ev.(*transcript.Header); ok && l.err == nil && !lr.headerRead {
			// the extra tool-use id keys requests are derived with; a
			// repeated header is refused by the checker, which derives
			// with the first one's keys too
			lr.headerRead, lr.toolUseMeta = true, h.ToolUseMeta
		}
		l.pre0 = len(bt.pre)
		if l.err == nil {
			lr.prefetch(bt, l.ev)
		}
		l.pre1 = len(bt.pre)
		bt.lines = append(bt.lines, l)
	}
}

// prefetch reads and hashes the pack entries of the payloads ev commits
// to, when the checker has opened the pack.
func (lr *lineReader) prefetch(bt *lineBatch, ev transcript.Event) {
	sp := lr.pack.Load()
	if sp == nil {
		return
	}
	var ps [1]*transcript.Payload
	var what uint8
	switch e := ev.(type) {
	case *transcript.Attempt:
		ps[0], what = &e.Request, derivedRequest
	case *transcript.Observation:
		ps[0], what = e.Response, derivedResponse
	case *transcript.Notification:
		ps[0] = &e.Payload
	case *transcript.Frame:
		ps[0] = &e.Payload
	case *transcript.Protocol:
		ps[0] = e.Payload
	}
	p := ps[0]
	if p == nil || !p.Retained || p.Length < 0 || p.Length > prefetchMaxEntry || bt.bytes+int(p.Length) > batchPrefetchBytes {
		return
	}
	lr.cache.ra = sp.ra
	e, ok := lr.walk.find(&lr.cache, sp.ix.End, p.Digest)
	var err error
	if ok {
		lr.stats.walked++
		sp.use(p.Digest)
	} else {
		// The index's header reads are small and anywhere: straight to
		// the file, not through the cache of the walk's window.
		e, ok, err = sp.locate(sp.ra, p.Digest)
	}
	if err != nil || !ok || e.Length != p.Length {
		return // the checker finds (and reports) the same itself
	}
	// The bytes live in the batch's own buffer (batchPrefetchBytes, kept
	// when the batch is recycled).
	if bt.pbuf == nil {
		bt.pbuf = make([]byte, 0, batchPrefetchBytes)
	}
	off := len(bt.pbuf)
	dst := bt.pbuf[off : off+int(e.Length)]
	n, rerr := lr.cache.ReadAt(dst, e.Offset+e.Header)
	if errors.Is(rerr, io.EOF) {
		rerr = nil
	}
	bt.pbuf = bt.pbuf[:off+n]
	bt.bytes += n
	lr.stats.prefetched++
	bt.pre = append(bt.pre, prefetched{digest: p.Digest, what: what, e: e, data: dst[:n:n], err: rerr})
}

// hash sets pf.sum to the hash of its bytes, salted as its entry says,
// with h.
func (pf *prefetched) hash(h hash.Hash) {
	h.Reset()
	if pf.e.Salt != nil {
		h.Write([]byte(transcript.SaltedPayloadLabel))
		h.Write(pf.e.Salt)
	}
	h.Write(pf.data)
	h.Sum(pf.sum[:0])
	pf.hashed = true
}

// ahead does, when the checker has batches waiting, part of its work on
// bt: hashing the prefetched bytes and deriving their facts. When it has
// none, the reader is the slower of the two and sends bt as it is: the
// checker hashes what is not hashed. Who does the work depends on timing;
// what it computes does not.
func (lr *lineReader) ahead(bt *lineBatch) {
	if len(lr.out) == 0 {
		return
	}
	if lr.hash == nil {
		lr.hash = sha256.New()
	}
	for i := range bt.pre {
		bt.pre[i].hash(lr.hash)
	}
	lr.stats.ahead += int64(len(bt.pre))
	deriveAhead(bt, lr.toolUseMeta)
}

// streamStats counts the line reader's work: entries prefetched, found by
// the walk, and hashed (and derived) ahead of the checker.
type streamStats struct{ prefetched, walked, ahead int64 }

// streamStatsHook, when set (by tests), is called with the line reader's
// counts at the end of each transcript it read.
var streamStatsHook func(streamStats)

// packCache is an io.ReaderAt over the pack that reads it in chunks of
// packCacheBytes: reads in the order of the file cost one read per chunk;
// others go to the file.
type packCache struct {
	ra         io.ReaderAt
	buf        []byte
	start, end int64
}

func (c *packCache) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.start && off+int64(len(p)) <= c.end {
		return copy(p, c.buf[off-c.start:]), nil
	}
	if len(p) >= packCacheBytes || c.buf != nil && (off < c.start || off >= c.end+packCacheBytes) {
		// Large, or not just ahead of the window: an entry away from the
		// walk (found by the index) does not move the window.
		return c.ra.ReadAt(p, off)
	}
	if c.buf == nil {
		c.buf = make([]byte, packCacheBytes)
	}
	n, err := c.ra.ReadAt(c.buf, off)
	c.start, c.end = off, off+int64(n)
	m := copy(p, c.buf[:n])
	if m < len(p) {
		if err == nil {
			err = io.EOF
		}
		return m, err
	}
	return m, nil
}

func (bt *lineBatch) reset() {
	clear(bt.lines) // drop the events
	bt.buf, bt.lines, bt.pre, bt.pbuf, bt.bytes, bt.end = bt.buf[:0], bt.lines[:0], bt.pre[:0], bt.pbuf[:0], 0, nil
}

// packWalk finds pack entries by walking the pack's headers in order, as
// the lines commit to them, instead of searching the index (Locate): a
// binary search of an index of many entries misses the cache at every
// step. It gives only answers Locate would give: the entry it finds for a
// digest is before the index's end, so indexed, and no entry before it has
// the same digest prefix (every one of them was walked over and marked in
// seen), so it is the first entry for the digest. Anything else (a digest
// whose prefix was seen, one not just ahead) is left to Locate.
type packWalk struct {
	off  int64  // the next entry's header
	stop bool   // a header the walk cannot read: walk no further
	seen []byte // bit set of the digest prefixes of the entries walked over (packSeenBits)
	hdr  [transcript.MaxPackHeader]byte
}

// packSeenBits: the bits of seen; a prefix collision (one in 2^22 per
// entry walked) only sends a digest to Locate.
const (
	packSeenBits  = 22
	packWalkAhead = 64 // entries walked over for one digest before giving up
)

func (w *packWalk) find(r io.ReaderAt, end int64, digest string) (transcript.PackEntry, bool) {
	var e transcript.PackEntry
	want, ok := digestPrefix(digest)
	if !ok || w.stop {
		return e, false
	}
	if w.seen == nil {
		w.seen = make([]byte, 1<<packSeenBits/8)
	}
	if w.marked(want) {
		return e, false // an earlier entry may hold it: the index knows which
	}
	hdr := w.hdr[:]
	for range packWalkAhead {
		if w.off >= end {
			return e, false
		}
		n, _ := r.ReadAt(hdr, w.off)
		nl := bytes.IndexByte(hdr[:n], '\n')
		var h packHeader
		if nl < 0 || !h.parse(hdr[:nl]) {
			w.stop = true
			return e, false
		}
		at := w.off
		w.off += int64(nl+1) + h.length + 1
		prefix, _ := digestPrefixHex(h.hex)
		first := !w.marked(prefix)
		w.mark(prefix)
		if prefix == want && string(h.hex) == digest[len("sha256:"):] {
			if !first {
				return e, false
			}
			e = transcript.PackEntry{Digest: digest, Offset: at, Length: h.length, Header: int64(nl + 1)}
			if h.salt != nil {
				e.Salt = make([]byte, transcript.SaltBytes)
				hex.Decode(e.Salt, h.salt)
			}
			return e, true
		}
	}
	return e, false
}

func (w *packWalk) bit(prefix uint64) (int, byte) {
	i := prefix >> (64 - packSeenBits)
	return int(i / 8), 1 << (i % 8)
}

func (w *packWalk) marked(prefix uint64) bool {
	i, m := w.bit(prefix)
	return w.seen[i]&m != 0
}

func (w *packWalk) mark(prefix uint64) {
	i, m := w.bit(prefix)
	w.seen[i] |= m
}

// packHeader is an entry header as transcript's pack reader reads it:
// 64 lowercase hex, SP, a decimal length without sign or leading zeros,
// optionally SP and 32 lowercase hex of salt.
type packHeader struct {
	hex    []byte
	length int64
	salt   []byte
}

func (h *packHeader) parse(b []byte) bool {
	if len(b) < 64+2 || b[64] != ' ' || !lowerHex(b[:64]) {
		return false
	}
	h.hex = b[:64]
	num := b[65:]
	if sp := bytes.IndexByte(num, ' '); sp >= 0 {
		h.salt = num[sp+1:]
		if len(h.salt) != 2*transcript.SaltBytes || !lowerHex(h.salt) {
			return false
		}
		num = num[:sp]
	}
	if len(num) == 0 || len(num) > 18 || len(num) > 1 && num[0] == '0' {
		return false // 18 digits: no overflow (longer ones are left to Locate)
	}
	var n int64
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	h.length = n
	return true
}

func lowerHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// digestPrefix is the first 8 bytes of a "sha256:<64 lowercase hex>"
// digest.
func digestPrefix(d string) (uint64, bool) {
	if len(d) != len("sha256:")+64 || d[:len("sha256:")] != "sha256:" {
		return 0, false
	}
	return digestPrefixHex([]byte(d[len("sha256:"):]))
}

func digestPrefixHex(h []byte) (uint64, bool) {
	var raw [8]byte
	if len(h) < 16 {
		return 0, false
	}
	if _, err := hex.Decode(raw[:], h[:16]); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(raw[:]), true
}
