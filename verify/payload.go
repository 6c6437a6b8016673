package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/transcript"
)

// payload checks one committed payload: its bytes are retained and present
// with the committed digest and length, or they are unavailable. Missing
// bytes are never a pass and never a mismatch.
//
// With keep, the exact bytes are returned when they are available and match
// (ok), so the line's claims about them can be re-derived; bytes longer
// than transcript.MaxDeriveBytes are streamed and returned as nil with ok
// (no derivation reads that far). The returned slice is reused by the next
// call.
func (b *bundleCheck) payload(p transcript.Payload, subject string, keep bool) (body []byte, ok bool) {
	b.red.reds = nil
	if b.partial && !b.disc.disclosed {
		b.disc.undisclosed++
		return nil, false
	}
	if !p.Retained {
		// One summary finding at the end (withheldFindings), not one per
		// payload: digest-only retention of 500 calls is one fact.
		switch {
		case p.OverLimit:
			b.pl.overLimitPayloads++
		case b.header != nil && b.header.Retention == transcript.RetainDigest:
			b.pl.withheld++
		case p.Withheld == transcript.WithheldUnredactable && b.header != nil && b.header.Redaction != nil:
			b.red.unredactable++
		default:
			// Not retained although the declared policy keeps every
			// payload: missing, whatever the caller accepts.
			b.pl.bad++
			b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, subject,
				"not retained, although the header declares retention "+b.retention()+": the bytes are missing")
			return nil, false
		}
		if !b.v.o.AcceptWithheld {
			b.pl.bad++
		}
		if b.pl.withheldFirst == "" {
			b.pl.withheldFirst = subject
		}
		return nil, false
	}
	path := transcript.BlobPath(p.Digest)
	if len(p.Redactions) == 0 {
		return b.blob(path, p.Digest, p.Length, checkPayload, subject, false, keep)
	}
	// A redacted copy: its bytes open its commitment, and the list says
	// exactly which values it hides (redact.Check: each listed pointer
	// holds its class's marker, and the copy parses).
	body, ok = b.blob(path, p.Digest, p.Length, checkPayload, subject, false, true)
	if !ok {
		return nil, false
	}
	reds := make([]redact.Redaction, len(p.Redactions))
	for i, r := range p.Redactions {
		reds[i] = redact.Redaction{Pointer: r.Pointer, Class: redact.Class(r.Class)}
	}
	if body == nil {
		b.pl.bad++
		b.r.add(CodeEvidenceMismatch, checkPayload, StatusFail, subject, "a redacted copy longer than a producer reads: its redaction list cannot be checked")
		return nil, false
	}
	if err := redact.Check(body, reds, canon.Limits{MaxBytes: transcript.MaxDeriveBytes}); err != nil {
		b.pl.bad++
		b.r.add(CodeEvidenceMismatch, checkPayload, StatusFail, subject, "the redaction list does not describe the retained copy: "+err.Error())
		return nil, false
	}
	b.red.redacted++
	b.red.values += int64(len(p.Redactions))
	if b.red.classes == nil {
		b.red.classes = map[string]int64{}
	}
	for _, r := range p.Redactions {
		b.red.classes[r.Class]++
	}
	if b.red.first == "" {
		b.red.first = subject
	}
	b.red.reds = p.Redactions
	return body, true
}

// redactionFindings reports the redacted copies, one finding with the
// counts and classes, and the claims that were not re-derived because a
// redaction covers their source.
func (b *bundleCheck) redactionFindings() {
	if b.red.redacted == 0 {
		return
	}
	classes := make([]string, 0, len(b.red.classes))
	for c, n := range b.red.classes {
		classes = append(classes, fmt.Sprintf("%s %d", c, n))
	}
	slices.Sort(classes)
	detail := fmt.Sprintf("%d payloads retained redacted (%d values: %s; first: %s): each copy opens its commitment and hides exactly the values its list names; the exact bytes are committed (original) under a salt the bundle does not hold, so they are not checked",
		b.red.redacted, b.red.values, strings.Join(classes, ", "), b.red.first)
	if b.red.claimsCovered > 0 {
		detail += fmt.Sprintf("; %d claims not re-derived because a redaction covers their source", b.red.claimsCovered)
	}
	b.r.add(CodePayloadRedacted, checkPayload, StatusInfo, "redacted payloads", detail)
}

// blob checks that the file at path holds exactly length bytes hashing to
// digest. It reads at most length+1 bytes, streaming them into the hash, so
// memory does not depend on the payload. mismatch findings use the payload
// code, or snapshot_mismatch for snapshot bytes (the caller's check).
//
// With keep and a length within transcript.MaxDeriveBytes, the bytes are
// read into one reused buffer instead (one payload in memory at a time) and
// returned when they match.
func (b *bundleCheck) blob(path, digest string, length int64, check Check, subject string, quarantine, keep bool) ([]byte, bool) {
	mismatch := CodeEvidenceMismatch
	if check == checkSnapshot {
		mismatch = CodeSnapshotMismatch
	}
	if path == "" {
		b.pl.bad++
		b.r.add(CodeTranscriptMalformed, checkTranscript, StatusFail, subject, "malformed digest "+digest)
		return nil, false
	}
	if max := b.v.o.Limits.MaxPayloadBytes; length > max {
		b.pl.bad++
		b.r.add(CodeLimitExceeded, check, StatusUnsupported, subject,
			fmt.Sprintf("commits to %d bytes, more than Limits.MaxPayloadBytes (%d; --max-payload-bytes): not read", length, max))
		return nil, false
	}
	var f io.Reader
	var salt []byte
	b.pl.salt, b.pk.cur = nil, nil
	var pf *prefetched
	if !quarantine {
		pf = b.prefetchedEntry(digest)
	}
	if pf != nil {
		// Read and hashed by the line reader (stream.go): the same entry
		// packEntry gives, the same bytes the reads below would take.
		e := pf.e
		switch {
		case e.Length != length:
			b.pl.bad++
			b.r.add(mismatch, check, StatusFail, subject, fmt.Sprintf("the %s holds %d bytes, the transcript commits to %d", entryWhere(e), e.Length, length))
			return nil, false
		case e.Salt != nil && !b.pl.salted:
			b.pl.bad++
			b.r.add(mismatch, check, StatusFail, subject, fmt.Sprintf("the %s is salted, but %s commits to plain SHA-256 digests", entryWhere(e), b.formatName()))
			return nil, false
		}
		var body []byte
		if keep && length <= transcript.MaxDeriveBytes {
			body = pf.data
		}
		if !pf.hashed {
			if b.pl.hash == nil {
				b.pl.hash, b.pl.buf = sha256.New(), make([]byte, 32<<10)
			}
			pf.hash(b.pl.hash)
		}
		body, ok := b.checked(check, subject, "", &e, int64(len(pf.data)), length, body, pf.err, pf.sum[:], digest, quarantine, e.Salt)
		if ok {
			b.pk.cur = pf
		}
		return body, ok
	}
	if !quarantine {
		e, r, where, err := b.packEntry(digest)
		if err != nil {
			b.pl.bad++
			b.r.add(CodeEvidenceUnavailable, check, StatusUnavailable, subject, "the committed bytes cannot be read from "+transcript.PackFile+": "+err.Error())
			return nil, false
		}
		if r != nil && e.Length != length {
			b.pl.bad++
			b.r.add(mismatch, check, StatusFail, subject, fmt.Sprintf("the %s holds %d bytes, the transcript commits to %d", where, e.Length, length))
			return nil, false
		}
		if r != nil && e.Salt != nil && !b.pl.salted {
			b.pl.bad++
			b.r.add(mismatch, check, StatusFail, subject, fmt.Sprintf("the %s is salted, but %s commits to plain SHA-256 digests", where, b.formatName()))
			return nil, false
		}
		if r != nil {
			f, path, salt = r, "the "+where, e.Salt
		}
	}
	if f == nil {
		file, err := openRegular(b.fsys, path)
		if err != nil {
			b.pl.bad++
			if b.refused(path, check, subject, err) {
				return nil, false
			}
			detail := "the committed bytes are missing from the bundle (" + path + ")"
			if !quarantine {
				detail = "the committed bytes are missing from the bundle (neither " + transcript.PackFile + " nor " + path + " holds them)"
			}
			if !errors.Is(err, fs.ErrNotExist) {
				detail = "the committed bytes cannot be read: " + err.Error()
			}
			b.r.add(CodeEvidenceUnavailable, check, StatusUnavailable, subject, detail)
			return nil, false
		}
		defer file.Close()
		f = file
	}
	if b.pl.hash == nil {
		b.pl.hash, b.pl.buf = sha256.New(), make([]byte, 32<<10)
	}
	h := b.pl.hash
	h.Reset()
	if salt != nil {
		h.Write([]byte(transcript.SaltedPayloadLabel))
		h.Write(salt)
	}
	var n int64
	var body []byte
	var err error
	if keep && length <= transcript.MaxDeriveBytes {
		if int64(cap(b.body)) < length+1 {
			b.body = make([]byte, length+1)
		}
		m, rerr := io.ReadFull(f, b.body[:length+1])
		if errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) {
			rerr = nil
		}
		n, body, err = int64(m), b.body[:m], rerr
		h.Write(body)
	} else {
		// One hash and one buffer for every blob: io.Copy would allocate
		// 32 KiB per payload.
		n, err = io.CopyBuffer(h, io.LimitReader(f, length+1), b.pl.buf)
	}
	return b.checked(check, subject, path, nil, n, length, body, err, h.Sum(b.pl.sum[:0]), digest, quarantine, salt)
}

// checked judges what was read of a blob at path (or the pack entry e):
// n bytes (body, when kept), hashing to sum, against the committed digest
// and length.
func (b *bundleCheck) checked(check Check, subject, path string, e *transcript.PackEntry, n, length int64, body []byte, err error, sum []byte, digest string, quarantine bool, salt []byte) ([]byte, bool) {
	if e != nil && (err != nil || n != length || !digestIs(digest, sum)) {
		path = "the " + entryWhere(*e)
	}
	mismatch := CodeEvidenceMismatch
	if check == checkSnapshot {
		mismatch = CodeSnapshotMismatch
	}
	if err != nil {
		b.pl.bad++
		b.r.add(CodeEvidenceUnavailable, check, StatusUnavailable, subject, "the committed bytes cannot be read: "+err.Error())
		return nil, false
	}
	switch {
	case n != length:
		b.pl.bad++
		what := fmt.Sprintf("%d bytes", n)
		if n > length {
			what = "more bytes"
		}
		b.r.add(mismatch, check, StatusFail, subject, fmt.Sprintf("%s holds %s, the transcript commits to %d", path, what, length))
		return nil, false
	case !digestIs(digest, sum):
		b.pl.bad++
		b.r.add(mismatch, check, StatusFail, subject, fmt.Sprintf("%s hashes to %s, the transcript commits to %s", path, "sha256:"+hex.EncodeToString(sum), digest))
		return nil, false
	}
	if !quarantine && check == checkPayload {
		b.r.Counts.Payloads++
	}
	b.pl.salt = salt
	return body, true
}

// digestIs says whether digest is "sha256:" and the lowercase hex of sum.
func digestIs(digest string, sum []byte) bool {
	const hexits = "0123456789abcdef"
	if len(digest) != len("sha256:")+2*len(sum) || digest[:len("sha256:")] != "sha256:" {
		return false
	}
	d := digest[len("sha256:"):]
	for i, c := range sum {
		if d[2*i] != hexits[c>>4] || d[2*i+1] != hexits[c&15] {
			return false
		}
	}
	return true
}

// retention returns the header's declared retention, for findings.
func (b *bundleCheck) retention() string {
	if b.header == nil {
		return "(no header)"
	}
	return b.header.Retention
}

// withheldFindings reports the payloads whose bytes the producer's declared
// policy withheld, one finding per reason with the count; accepted
// (Options.AcceptWithheld), one finding stating what was verified instead.
func (b *bundleCheck) withheldFindings() {
	if b.v.o.AcceptWithheld && b.pl.withheld+b.pl.overLimitPayloads+b.red.unredactable > 0 {
		b.r.add(CodeWithheldAccepted, checkPayload, StatusInfo, "withheld payloads",
			fmt.Sprintf("%d payloads withheld by the producer's declared policy (%d by digest-only retention, first: %s; %d longer than the frame limit; %d that could not be redacted exactly), accepted (--accept-withheld): their digests and lengths are verified as committed, not their bytes, nor the claims their bytes would support",
				b.pl.withheld+b.pl.overLimitPayloads+b.red.unredactable, b.pl.withheld, b.pl.withheldFirst, b.pl.overLimitPayloads, b.red.unredactable))
		return
	}
	if b.red.unredactable > 0 {
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, "withheld payloads",
			fmt.Sprintf("%d payloads withheld by the declared redaction policy (%s): they may hold a secret and could not be redacted exactly, so none of their bytes were kept (--accept-withheld accepts them)", b.red.unredactable, b.header.Redaction.Policy))
	}
	if b.pl.withheld > 0 {
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, "withheld payloads",
			fmt.Sprintf("%d payloads withheld by the producer's declared digest-only retention (first: %s), not missing: only their digests and lengths are committed, so their bytes and the claims about them were not checked (--accept-withheld accepts them)", b.pl.withheld, b.pl.withheldFirst))
	}
	if b.pl.overLimitPayloads > 0 {
		b.r.add(CodeEvidenceUnavailable, checkPayload, StatusUnavailable, "withheld payloads",
			fmt.Sprintf("%d payloads withheld: longer than the header's frame limit; only their digests and lengths are committed (--accept-withheld accepts them)", b.pl.overLimitPayloads))
	}
}

// formatName names the header's format for findings.
func (b *bundleCheck) formatName() string {
	if b.header == nil {
		return "the transcript"
	}
	return "format " + b.header.Format
}
