package verify

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"sync/atomic"

	"github.com/tracectl/tracectl/transcript"
)

// packState is the bundle's payload pack (spec/transcript.md, "Payloads"),
// opened and indexed at the first payload the transcript commits to. The
// index holds where each entry is, never its bytes: an entry is read, and
// hashed, when a line commits to it.
type packState struct {
	opened bool
	f      fs.File
	ra     io.ReaderAt
	ix     *transcript.PackIndex
	sp     *sharedPack // ra and ix, with the lock Locate takes

	// The line reader's work for the line being checked (stream.go): the
	// pack entries it read and hashed, and the pack it reads them from.
	pre    []prefetched
	cur    *prefetched // the entry the last blob call returned the bytes of
	shared atomic.Pointer[sharedPack]
}

// maxPackEntriesPerLine bounds the pack's index relative to the lines the
// verifier reads: a line commits to at most a few payloads, a snapshot to
// two per page; beyond that the entries are not ones a transcript needs.
const maxPackEntriesPerLine = 8

// openPack opens and indexes the pack once. A bundle without one (written
// before the pack) keeps its payloads as blob files.
func (b *bundleCheck) openPack() *packState {
	p := &b.pk
	if p.opened {
		return p
	}
	p.opened = true
	f, err := openRegular(b.fsys, transcript.PackFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p
	case b.refused(transcript.PackFile, checkPayload, transcript.PackFile, err):
		return p
	case err != nil:
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, transcript.PackFile, "the payload pack cannot be read: "+err.Error())
		return p
	}
	ra := transcript.ReaderAt(f)
	if ra == nil {
		f.Close()
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, transcript.PackFile, "the file system gives no random access to the payload pack")
		return p
	}
	ix, err := transcript.IndexPack(f, min(maxPackEntriesPerLine*max(b.v.o.Limits.MaxTranscriptLines, 1), b.v.o.Limits.MaxPackEntries))
	if err != nil {
		f.Close()
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, transcript.PackFile, "the payload pack cannot be read: "+err.Error())
		return p
	}
	p.f, p.ra, p.ix = f, ra, ix
	p.sp = &sharedPack{ra: ra, ix: ix}
	if _, ok := f.(io.ReaderAt); ok {
		// The file's own ReadAt allows parallel reads: the line reader
		// may prefetch entries from it (stream.go).
		b.pk.shared.Store(p.sp)
	}
	return p
}

// packEntry returns the pack entry holding digest, a reader of its bytes
// and where the entry is; a nil reader when the pack does not hold it.
func (b *bundleCheck) packEntry(digest string) (e transcript.PackEntry, r io.Reader, where string, err error) {
	p := b.openPack()
	if p.ix == nil {
		return e, nil, "", nil
	}
	e, ok, err := p.sp.locate(p.ra, digest)
	if err != nil || !ok {
		return e, nil, "", err
	}
	return e, io.NewSectionReader(p.ra, e.Offset+e.Header, e.Length), entryWhere(e), nil
}

func entryWhere(e transcript.PackEntry) string {
	return transcript.PackFile + " entry at byte " + strconv.FormatInt(e.Offset, 10)
}

// prefetchedEntry returns the entry the line reader read and hashed for
// digest while reading the line being checked, or nil (stream.go).
func (b *bundleCheck) prefetchedEntry(digest string) *prefetched {
	for i := range b.pk.pre {
		if p := &b.pk.pre[i]; !p.used && p.digest == digest {
			p.used = true
			return p
		}
	}
	return nil
}

// readPayload returns the bytes a digest names, from the pack or a blob
// file, up to max bytes; fs.ErrNotExist when neither holds them. The caller
// checks them against the digest.
func (b *bundleCheck) readPayload(digest string, max int64) ([]byte, string, error) {
	e, r, where, err := b.packEntry(digest)
	if err != nil {
		return nil, transcript.PackFile, err
	}
	if r != nil {
		if e.Length > max {
			return nil, where, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, e.Length, max)
		}
		if e.Salt != nil {
			// Manifests and pages are public declarations, committed by
			// their plain digest: a salted entry is not one.
			return nil, where, fmt.Errorf("the %s is salted: not the plain bytes of a manifest or page", where)
		}
		data := make([]byte, e.Length)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, where, err
		}
		return data, where, nil
	}
	path := transcript.BlobPath(digest)
	if path == "" {
		return nil, digest, fmt.Errorf("malformed digest %q", digest)
	}
	data, err := readFile(b.fsys, path, max)
	return data, path, err
}

// packFindings reports a pack that is not whole entries: damage (fail), or
// in a bundle that was never sealed, the torn final entry a crash leaves
// (its bytes are unavailable; tracectl seal --recover cuts it).
func (b *bundleCheck) packFindings() {
	p := &b.pk
	defer b.closePack()
	// Only when every line was read and interpreted: a transcript the
	// verifier stopped in references more than it saw.
	if p.ix != nil && p.ix.Problem == nil && !b.partial && b.tr.interpret && !b.tr.limited && b.malformedAt < 0 {
		p.sp.mu.Lock()
		used := len(p.sp.used)
		p.sp.mu.Unlock()
		if n := p.ix.Distinct() - used; n > 0 {
			why := "a producer writes none: something appended them"
			if b.recovered {
				why = "the payloads of lines an interruption cut before they were written (the producer recovered), or bytes something appended"
			}
			b.r.add(CodePackUnreferenced, checkPayload, StatusInfo, transcript.PackFile,
				fmt.Sprintf("%d of the payload pack's %d distinct entries are referenced by no transcript line or snapshot manifest: bytes no commitment covers, not evidence; %s", n, p.ix.Distinct(), why))
		}
	}
	if p.ix == nil || p.ix.Problem == nil {
		return
	}
	pr := p.ix.Problem
	if pr.Full {
		b.r.add(CodeLimitExceeded, checkPayload, StatusUnsupported, transcript.PackFile,
			fmt.Sprintf("the payload pack has more entries than the verifier indexes (%d; Limits.MaxPackEntries, --max-pack-entries, or 8 per transcript line): the entries after byte %d are not read", p.ix.Len(), pr.Offset))
		return
	}
	if pr.Torn && !b.tr.sealed {
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, transcript.PackFile,
			pr.Error()+": an unsealed bundle's last entry, cut short by a crash (tracectl seal --recover removes it)")
		return
	}
	detail := pr.Error() + ": entries after it are not read"
	if pr.Torn {
		detail += "; a sealed bundle's pack is whole entries (seal and recovery leave no torn tail)"
	}
	b.r.add(CodePackMalformed, checkPayload, StatusFail, transcript.PackFile, detail)
}

// closePack releases the pack; Bundle calls it however verification ends
// (a cancelled context included), packFindings when it does.
func (b *bundleCheck) closePack() {
	if b.pk.f != nil {
		b.pk.f.Close()
		b.pk.f = nil
	}
}
