package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// Anchor codes (spec/anchoring.md, spec/verification.md). They are stable
// like every code and listed by AllCodes; they are unexported only to keep
// the library's exported surface within its bound (internal/apisurface):
// callers compare a Finding's Code with Code("anchor_included").
const (
	CodeAnchorIncluded  Code = "anchor_included"  // pass: a statement's receipt proves it is in the log, under a checkpoint signed by the log key (and the witness threshold); or the record's Rekor entry checks under the trusted root
	CodeAnchorInvalid   Code = "anchor_invalid"   // a receipt fails: bad checkpoint signature, too few cosignatures, leaf or path mismatch, a statement it names is absent, or record.json is not the anchored record plus transparency
	CodeAnchorFork      Code = "anchor_fork"      // two roots for one tree size, or a consistency proof between successive receipts that fails
	CodeAnchorOrder     Code = "anchor_order"     // receipts out of log order, or statements anchored out of the order they were made
	CodeAnchorMissing   Code = "anchor_missing"   // unavailable: with a log key, a signed statement has no valid receipt; with a Rekor root, the record no valid Rekor entry
	CodeAnchorUnchecked Code = "anchor_unchecked" // info: receipts (or Rekor entries) present, not checked (no log key, or no Rekor root, given)
)

// checkAnchor is the check anchors belong to.
const checkAnchor Check = "anchor"

// anchorStatement is a signed statement a receipt should cover.
type anchorStatement struct {
	path    string // what the receipt names
	covered bool
}

// checkAnchors judges anchors/ (spec/anchoring.md, "Verifying"). record is
// record.json's bytes (nil for a bundle without it); checkpoints the
// bundle's checkpoint files in prefix order.
func (v *Verifier) checkAnchors(r *Report, fsys fs.FS, record []byte, checkpoints []string) {
	v.checkRekor(r, fsys, record)
	seqs, other, over := listReceipts(fsys)
	if v.keys == nil {
		if len(seqs) > 0 || len(other) > 0 {
			r.add(CodeAnchorUnchecked, checkAnchor, StatusInfo, anchor.Dir,
				fmt.Sprintf("%d anchor receipts present, not checked: give the log's key (--log-key) to check them", len(seqs)))
		}
		return
	}
	for _, name := range other {
		r.add(CodeAnchorInvalid, checkAnchor, StatusFail, anchor.Dir+"/"+name, "not a receipt (anchors/<seq>.json) nor the anchored record")
	}
	if over {
		r.add(CodeLimitExceeded, checkAnchor, StatusUnsupported, anchor.Dir, fmt.Sprintf("more than %d receipts (anchor.MaxReceipts): none was checked", anchor.MaxReceipts))
		return
	}
	want := make([]*anchorStatement, 0, len(checkpoints)+1)
	for _, c := range checkpoints {
		want = append(want, &anchorStatement{path: c})
	}
	if record != nil {
		want = append(want, &anchorStatement{path: anchor.RecordFile})
	}
	find := func(p string) *anchorStatement {
		for _, s := range want {
			if s.path == p {
				return s
			}
		}
		return nil
	}
	var prev *anchor.Checked
	lastStmt := -1 // position in want of the last statement anchored
	for _, seq := range seqs {
		name := anchor.Dir + "/" + strconv.Itoa(seq) + ".json"
		data, err := readFile(fsys, name, anchor.MaxReceiptBytes)
		if err != nil {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, "cannot be read: "+err.Error())
			continue
		}
		rc, err := anchor.ParseReceipt(data)
		if err != nil {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, err.Error())
			continue
		}
		// What the receipt says of the log is judged first, whatever it
		// names: successive checkpoints must be one history.
		ck, err := rc.CheckLog(*v.keys)
		if err != nil {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, err.Error())
			continue
		}
		if prev != nil {
			if err := anchor.CheckConsistency(prev, ck, rc.Consistency); err != nil {
				code := CodeAnchorInvalid
				if errors.Is(err, anchor.ErrFork) {
					code = CodeAnchorFork
				}
				r.add(code, checkAnchor, StatusFail, name, err.Error())
				continue
			}
			if ck.Index <= prev.Index {
				r.add(CodeAnchorOrder, checkAnchor, StatusFail, name, fmt.Sprintf("log entry %d after entry %d: receipts are numbered in log order", ck.Index, prev.Index))
			}
		}
		prev = ck
		st := find(rc.Statement)
		if st == nil {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, fmt.Sprintf("names %.80q, not a signed statement of this bundle", rc.Statement))
			continue
		}
		stmt, err := readFile(fsys, rc.Statement, sign.MaxRecordBytes)
		if err != nil {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, "the anchored statement "+rc.Statement+" cannot be read: "+err.Error())
			continue
		}
		if err := rc.Includes(stmt, ck); err != nil {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, err.Error())
			continue
		}
		if pos := slices.Index(want, st); pos <= lastStmt {
			r.add(CodeAnchorOrder, checkAnchor, StatusFail, name, rc.Statement+" anchored after a later statement")
		} else {
			lastStmt = pos
		}
		detail := fmt.Sprintf("log entry %d, under a checkpoint of size %d", ck.Index, ck.Size)
		if rc.Statement == anchor.RecordFile {
			switch {
			case bytes.Equal(record, stmt):
				// The receipt came after the seal had stopped waiting:
				// record.json is the anchored record itself.
				detail += "; record.json is the anchored record itself (its transparency was not set)"
			case !v.anchoredRecord(r, record, stmt, rc.Log, rc.LeafIndex):
				continue
			}
		}
		st.covered = true
		if ck.Cosigned > 0 {
			detail += fmt.Sprintf(", %d witness cosignatures", ck.Cosigned)
		}
		r.add(CodeAnchorIncluded, checkAnchor, StatusPass, rc.Statement, detail)
	}
	for _, s := range want {
		if s.covered {
			continue
		}
		subject, what := s.path, "a signed checkpoint"
		if s.path == anchor.RecordFile {
			subject, what = transcript.RecordFile, "the sealed record"
		}
		r.add(CodeAnchorMissing, checkAnchor, StatusUnavailable, subject, what+" has no valid receipt in "+anchor.Dir+"/: nothing shows the log holds it")
	}
}

// anchoredRecord checks record.json against the anchored record: the same
// record with transparency naming the receipt's entry, signed again by
// the same key (trace-spec's order: sign, anchor, set transparency,
// re-sign).
func (v *Verifier) anchoredRecord(r *Report, final, anchored []byte, log string, index uint64) bool {
	fail := func(detail string) bool {
		r.add(CodeAnchorInvalid, checkAnchor, StatusFail, transcript.RecordFile, detail)
		return false
	}
	a, err := sign.ParseRecord(anchored)
	if err != nil {
		return fail("the anchored record " + anchor.RecordFile + " does not parse: " + err.Error())
	}
	if err := sign.VerifySignature(anchored, a); err != nil {
		return fail("the anchored record's signature: " + err.Error())
	}
	f, err := sign.ParseRecord(final)
	if err != nil {
		return fail("record.json does not parse: " + err.Error())
	}
	fa, ff := *a, *f
	fa.Signature, ff.Signature, ff.Transparency = "", "", ""
	ba, err1 := canon.Marshal(&fa)
	bf, err2 := canon.Marshal(&ff)
	if err1 != nil || err2 != nil || !bytes.Equal(ba, bf) || a.Transparency != "" {
		return fail("record.json is not the anchored record (" + anchor.RecordFile + ") plus transparency: it was rewritten after anchoring")
	}
	if want := anchor.EntryURI(log, index); f.Transparency != want {
		return fail(fmt.Sprintf("transparency is %.120q, want %q: the anchored entry", f.Transparency, want))
	}
	return true
}

// listReceipts returns the receipts' sequence numbers, ascending, and the
// names in anchors/ that are neither a receipt nor the anchored record.
func listReceipts(fsys fs.FS) (seqs []int, other []string, over bool) {
	ents, err := fs.ReadDir(fsys, anchor.Dir)
	if err != nil {
		return nil, nil, false
	}
	if len(ents) > anchor.MaxReceipts+1 {
		return nil, nil, true
	}
	for _, e := range ents {
		name := e.Name()
		if name == "record.json" || name == "rekor" && e.IsDir() {
			continue
		}
		n, ok := strings.CutSuffix(name, ".json")
		seq, err := strconv.Atoi(n)
		if !ok || err != nil || seq <= 0 || strconv.Itoa(seq) != n || e.IsDir() {
			other = append(other, name)
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, other, false
}

// checkRekor judges anchors/rekor/ (spec/anchoring.md, "Rekor v2"): the
// sealed record's Rekor v2 entry, checked offline against the trusted
// root (Options.RekorRoot) with sigstore-go, and record.json as the
// anchored record plus transparency naming that entry. record is
// record.json's bytes (nil for a bundle without it: nothing was sealed,
// so nothing was submitted to Rekor).
func (v *Verifier) checkRekor(r *Report, fsys fs.FS, record []byte) {
	ents, err := fs.ReadDir(fsys, rekor.Dir)
	present := err == nil
	if v.rekorRoot == nil {
		if present {
			r.add(CodeAnchorUnchecked, checkAnchor, StatusInfo, rekor.Dir,
				fmt.Sprintf("%d Rekor entries present, not checked: give a sigstore trusted root (--rekor-root) to check them", len(ents)))
		}
		return
	}
	if record == nil {
		return
	}
	covered := false
	for i, e := range ents {
		name := rekor.Dir + "/" + e.Name()
		if i >= 16 {
			r.add(CodeLimitExceeded, checkAnchor, StatusUnsupported, rekor.Dir, fmt.Sprintf("%d names in %s: the rest were not read", len(ents), rekor.Dir))
			break
		}
		if name != rekor.EntryFile || e.IsDir() {
			r.add(CodeAnchorInvalid, checkAnchor, StatusFail, name, "not a Rekor entry of this bundle (only "+rekor.EntryFile+", the sealed record's)")
			continue
		}
		if v.rekorEntry(r, fsys, record) {
			covered = true
		}
	}
	if !covered {
		r.add(CodeAnchorMissing, checkAnchor, StatusUnavailable, transcript.RecordFile,
			"the sealed record has no valid Rekor entry in "+rekor.Dir+"/: nothing shows a Rekor log of the trusted root holds it")
	}
}

// noRekorEntry reports, under a Rekor trusted root or a log key, that a
// record given alone (or with a proof) comes without its Rekor entry or
// its receipt: never verified.
func (v *Verifier) noRekorEntry(r *Report) {
	if v.rekorRoot != nil {
		r.add(CodeAnchorMissing, checkAnchor, StatusUnavailable, transcript.RecordFile,
			"a record alone carries no Rekor entry: verify its bundle or its disclosure (tracectl disclose), which keep "+rekor.EntryFile)
	}
	if v.keys != nil {
		r.add(CodeAnchorMissing, checkAnchor, StatusUnavailable, transcript.RecordFile,
			"a record alone carries no receipt: verify its bundle or its disclosure (tracectl disclose), which keep the record's receipt in "+anchor.Dir+"/")
	}
}

// rekorEntry checks anchors/rekor/record.json and reports it; true when
// it proves the sealed record is in a trusted Rekor log.
func (v *Verifier) rekorEntry(r *Report, fsys fs.FS, record []byte) bool {
	fail := func(loc, detail string) bool {
		r.add(CodeAnchorInvalid, checkAnchor, StatusFail, loc, detail)
		return false
	}
	data, err := readFile(fsys, rekor.EntryFile, rekor.MaxEntryBytes)
	if err != nil {
		return fail(rekor.EntryFile, "cannot be read: "+err.Error())
	}
	te, err := rekor.ParseEntry(data)
	if err != nil {
		return fail(rekor.EntryFile, err.Error())
	}
	anchored, err := readFile(fsys, anchor.RecordFile, sign.MaxRecordBytes)
	if err != nil {
		return fail(rekor.EntryFile, "the anchored record "+anchor.RecordFile+" cannot be read: "+err.Error())
	}
	a, err := sign.ParseRecord(anchored)
	if err != nil {
		return fail(anchor.RecordFile, "the anchored record does not parse: "+err.Error())
	}
	if err := sign.VerifySignature(anchored, a); err != nil {
		return fail(anchor.RecordFile, "the anchored record's signature: "+err.Error())
	}
	pub, err := a.Cnf.JWK.PublicKey()
	if err != nil {
		return fail(anchor.RecordFile, "the anchored record's cnf.jwk: "+err.Error())
	}
	ck, err := rekor.Check(te, anchored, pub, v.rekorRoot, time.Unix(a.IAT, 0))
	if err != nil {
		return fail(rekor.EntryFile, err.Error())
	}
	detail := fmt.Sprintf("Rekor entry %d of %s (origin %.100q), under a checkpoint of size %d signed by the trusted root's log key", ck.Index, ck.BaseURL, ck.Origin, ck.Size)
	if bytes.Equal(record, anchored) {
		detail += "; record.json is the anchored record itself (its transparency was not set)"
	} else if !v.anchoredRecord(r, record, anchored, ck.BaseURL, ck.Index) {
		return false
	}
	r.add(CodeAnchorIncluded, checkAnchor, StatusPass, rekor.EntryFile, detail)
	return true
}
