package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// Checkpoint codes (spec/checkpoints.md).
const (
	CodeCheckpointBound   Code = "checkpoint_bound"   // pass: signed checkpoints commit to the transcript prefixes they name
	CodeCheckpointInvalid Code = "checkpoint_invalid" // a checkpoint fails its record checks, does not commit to the prefix it names, counts other attempts, has another signer, or is not named as a checkpoint
	CodeTailUnsigned      Code = "tail_unsigned"      // unavailable: a bundle without record.json; the lines after its last valid checkpoint are unsigned evidence
)

// checkpointDir and the names in it are the producer's (producer.CheckpointDir).
const checkpointDir = "checkpoints"

// checkpointTmpPrefix marks a checkpoint a crash left half-written: never a
// checkpoint, and not judged.
const checkpointTmpPrefix = ".tmp-"

// MaxCheckpoints bounds the checkpoints a bundle may hold: beyond it none
// is checked (limit_exceeded).
const maxCheckpoints = 100000

// checkpointEntry is one checkpoint: its name, the facts its record signs,
// and what the stream found at the prefix it names.
type checkpointEntry struct {
	file     string // bundle-relative
	lines    int64  // the prefix it names: lines [0, lines)
	hash     string // tool_transcript.hash
	calls    *int64 // tool_transcript.call_count
	signer   string // cnf.jwk thumbprint
	problems []string

	seen     bool // the stream reached the prefix
	root     string
	attempts int64
	interp   bool // the prefix was interpreted: its attempt count is known
}

// checkpointCheck checks a bundle's checkpoints while its transcript is
// streamed (bundleCheck.ck).
type checkpointCheck struct {
	v       *Verifier
	entries []*checkpointEntry // by lines, ascending
	next    int                // the first entry the stream has not reached
	// unsealed: the bundle has no record.json; the last valid checkpoint
	// is what is signed.
	unsealed bool
	torn     int64 // bytes of a torn final line, in an unsealed bundle
}

// readCheckpoints lists and record-checks the bundle's checkpoints. It
// returns nil when the bundle has none.
func (v *Verifier) readCheckpoints(r *Report, fsys fs.FS) *checkpointCheck {
	ents, over := listCheckpoints(fsys)
	if len(ents) == 0 {
		return nil
	}
	k := &checkpointCheck{v: v}
	if over {
		r.add(CodeLimitExceeded, checkTranscript, StatusUnsupported, checkpointDir,
			fmt.Sprintf("more than %d entries (MaxCheckpoints): no checkpoint was checked", maxCheckpoints))
		return k
	}
	judged := 0 // entries judged: checkpoints and names that are none
	for _, e := range ents {
		name := e.Name()
		file := checkpointDir + "/" + name
		if strings.HasPrefix(name, checkpointTmpPrefix) || e.IsDir() {
			continue // a half-written checkpoint a crash left (seal --recover removes it)
		}
		judged++
		n, ok := checkpointLines(name)
		if !ok {
			r.add(CodeCheckpointInvalid, checkTranscript, StatusFail, boundedQuote(file),
				"not a checkpoint name (<lines>.json, lines a decimal without leading zeros): a producer writes no other file here")
			continue
		}
		ce := &checkpointEntry{file: file, lines: n}
		data, err := readFile(fsys, file, sign.MaxRecordBytes)
		if err != nil {
			if !errors.Is(err, ErrNotRegular) { // file_refused says so already
				ce.problems = append(ce.problems, "cannot be read: "+err.Error())
			} else {
				ce.problems = append(ce.problems, "not a regular file")
			}
			k.entries = append(k.entries, ce)
			continue
		}
		scratch := newReport(kindRecord, v.o.At)
		rec := v.checkRecord(scratch, data)
		for _, f := range scratch.Findings {
			// Freshness is judged for the record that is the bundle's
			// signature (record.json, or the last checkpoint of an unsealed
			// bundle), not for every checkpoint of a long session.
			if f.Status == StatusFail && f.Check != checkFreshness {
				ce.problems = append(ce.problems, string(f.Code)+" at "+f.Subject+": "+f.Detail)
			}
		}
		switch {
		case rec == nil:
		case rec.ToolTranscript == nil:
			ce.problems = append(ce.problems, "the record commits to no transcript (no tool_transcript)")
		default:
			ce.hash, ce.calls = rec.ToolTranscript.Hash, rec.ToolTranscript.CallCount
		}
		ce.signer = scratch.Signer
		k.entries = append(k.entries, ce)
	}
	slices.SortFunc(k.entries, func(a, b *checkpointEntry) int { return compareInt(a.lines, b.lines) })
	if judged == 0 {
		return nil
	}
	return k
}

// listCheckpoints reads the entries of checkpoints/, at most
// MaxCheckpoints of them (over: there are more). Nil when there is no such
// directory.
func listCheckpoints(fsys fs.FS) (ents []fs.DirEntry, over bool) {
	f, err := fsys.Open(checkpointDir)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, false
	}
	for {
		batch, err := d.ReadDir(1024)
		ents = append(ents, batch...)
		if len(ents) > maxCheckpoints {
			return ents[:1], true
		}
		if err != nil || len(batch) == 0 {
			return ents, false
		}
	}
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkpointLines parses a checkpoint name: <lines>.json, lines a positive
// decimal without leading zeros.
func checkpointLines(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, ".json")
	if !ok || s == "" || len(s) > 18 || s[0] == '0' {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// at notes the prefix roots the checkpoints name, as the stream passes
// them: called after every complete line. Nil safe.
func (k *checkpointCheck) at(b *bundleCheck, c *transcript.Committer) {
	if k == nil {
		return
	}
	for k.next < len(k.entries) && k.entries[k.next].lines <= c.Count() {
		ce := k.entries[k.next]
		if ce.lines == c.Count() {
			ce.seen, ce.root, ce.attempts, ce.interp = true, c.Root(), b.r.Counts.Attempts, b.tr.interpret
		}
		k.next++
	}
}

// tornTail says whether a torn final line is expected: in a bundle whose
// producer died, a crash mid-write leaves one (seal --recover quarantines
// it). Nil safe.
func (k *checkpointCheck) tornTail(n int) bool {
	if k == nil || !k.unsealed {
		return false
	}
	k.torn = int64(n)
	return true
}

// isUnsealed: the bundle is judged by its checkpoints (no record.json).
// Nil safe.
func (k *checkpointCheck) isUnsealed() bool { return k != nil && k.unsealed }

// finish judges every checkpoint against its prefix, and, in an unsealed
// bundle, reports what the last valid checkpoint signs and what it does
// not. Nil safe.
func (k *checkpointCheck) finish(b *bundleCheck, c *transcript.Committer) {
	if k == nil {
		return
	}
	r := b.r
	signer := r.Signer // record.json's, when the bundle is sealed ("" when it has none to compare)
	var valid []*checkpointEntry
	for _, ce := range k.entries {
		switch {
		case len(ce.problems) > 0:
		case !b.tr.commitOK && !ce.seen:
			ce.problems = append(ce.problems, "the transcript could not be read to its prefix")
		case !ce.seen:
			ce.problems = append(ce.problems, fmt.Sprintf("names a prefix of %d lines; the transcript has %d complete lines", ce.lines, r.Counts.Lines))
		case ce.root != ce.hash:
			ce.problems = append(ce.problems, fmt.Sprintf("the first %d lines commit to %s, the checkpoint signs %s", ce.lines, ce.root, ce.hash))
		case ce.calls != nil && ce.interp && *ce.calls != ce.attempts:
			ce.problems = append(ce.problems, fmt.Sprintf("call_count %d, the first %d lines record %d attempts", *ce.calls, ce.lines, ce.attempts))
		case !k.unsealed && signer != "" && ce.signer != signer:
			ce.problems = append(ce.problems, "signed by "+ce.signer+", the bundle's record by "+signer)
		}
		if len(ce.problems) > 0 {
			r.add(CodeCheckpointInvalid, checkTranscript, StatusFail, ce.file, strings.Join(ce.problems, "; "))
			continue
		}
		valid = append(valid, ce)
	}
	if k.unsealed {
		k.finishUnsealed(b, c, valid)
		return
	}
	if len(valid) > 0 {
		last := valid[len(valid)-1]
		what := fmt.Sprintf("%d checkpoints commit to the prefixes they name", len(valid))
		if len(valid) == 1 {
			what = "1 checkpoint commits to the prefix it names"
		}
		r.add(CodeCheckpointBound, checkTranscript, StatusPass, checkpointDir,
			fmt.Sprintf("%s, signed by the record's key; the last, %s, to the first %d lines", what, last.file, last.lines))
	}
}

// finishUnsealed reports a bundle without record.json: the last valid
// checkpoint's record is checked as the bundle's record (freshness
// included), the lines it covers are signed, the rest are not.
func (k *checkpointCheck) finishUnsealed(b *bundleCheck, c *transcript.Committer, valid []*checkpointEntry) {
	r := b.r
	var last *checkpointEntry
	for _, ce := range valid {
		if last != nil && ce.signer != last.signer {
			r.add(CodeCheckpointInvalid, checkTranscript, StatusFail, ce.file, "signed by "+ce.signer+", an earlier checkpoint by "+last.signer)
			continue
		}
		last = ce
	}
	total := c.Count()
	if k.torn > 0 {
		total-- // the torn line is committed to by no one
	}
	if last == nil {
		r.add(CodeTailUnsigned, checkTranscript, StatusUnavailable, transcript.TranscriptFile,
			fmt.Sprintf("the bundle has no record.json and no valid checkpoint: none of its %d lines is signed", total))
		return
	}
	if data, err := readFile(b.fsys, last.file, sign.MaxRecordBytes); err == nil {
		k.v.checkRecord(r, data)
	}
	r.add(CodeCheckpointBound, checkTranscript, StatusPass, last.file,
		fmt.Sprintf("the first %d lines (%s) commit to the signed %s: signed evidence", last.lines, attemptsText(last.attempts), last.hash))
	detail := fmt.Sprintf("the bundle has no record.json: the producer stopped before it sealed; lines %d to %d (%s) are after the last checkpoint, unsigned evidence (tracectl seal --recover seals and signs the transcript as it is now, keeping the checkpoints)",
		last.lines, total-1, attemptsText(r.Counts.Attempts-last.attempts))
	if total == last.lines {
		detail = fmt.Sprintf("the bundle has no record.json: the producer stopped before it sealed; the last checkpoint covers all %d lines, and nothing after them was recorded", total)
	}
	if k.torn > 0 {
		detail += fmt.Sprintf("; a torn final line of %d bytes follows (seal --recover quarantines it)", k.torn)
	}
	r.add(CodeTailUnsigned, checkTranscript, StatusUnavailable, transcript.TranscriptFile+" line "+strconv.FormatInt(last.lines, 10), detail)
}

// unsealedBundle verifies a bundle without record.json by its checkpoints.
// ok is false when it has none (the caller reports the missing record).
func (v *Verifier) unsealedBundle(ctx context.Context, fsys fs.FS) (rep *Report, ok bool, err error) {
	r := newReport(kindBundle, v.o.At)
	r.AcceptedProfiles = slices.Clone(v.o.AcceptProfiles)
	k := v.readCheckpoints(r, fsys)
	if k == nil {
		return nil, false, nil
	}
	k.unsealed = true
	b := newBundleCheck(v, r, fsys, nil)
	b.ck = k
	if err := b.scanTree(ctx); err != nil {
		return nil, true, err
	}
	if err := b.run(ctx); err != nil {
		return nil, true, err
	}
	if !r.Has(CodeTailUnsigned) {
		r.add(CodeEvidenceUnavailable, checkTranscript, StatusUnavailable, transcript.TranscriptFile,
			"the bundle has checkpoints but its transcript cannot be read")
	}
	v.checkAnchors(r, fsys, nil, k.files())
	rep, err = result(r)
	return rep, true, err
}

func attemptsText(n int64) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.FormatInt(n, 10) + " attempts"
}

// files returns the checkpoint files in prefix order (nil safe).
func (k *checkpointCheck) files() []string {
	if k == nil {
		return nil
	}
	out := make([]string, 0, len(k.entries))
	for _, e := range k.entries {
		out = append(out, e.file)
	}
	return out
}
