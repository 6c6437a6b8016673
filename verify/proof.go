package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tracectl/tracectl/transcript"
)

// Proof verifies an inclusion proof (transcript.ParseProof's format)
// against a Trust Record without the transcript: the record checks, then
// that every disclosed line is in the transcript the record signs, then the
// disclosed lines against each other (identities, snapshot bindings, the
// outcome history they show) and the disclosed seal's attempt count against
// call_count. Payload and snapshot bytes are not part of a
// proof: they are reported unavailable, so the verdict is at best
// Incomplete. Lines a proof does not disclose are not evidence of absence:
// an attempt whose outcome line is not disclosed is reported
// outcome_unknown "as disclosed".
//
// The error is nil iff the verdict is Verified; otherwise it is a
// *VerdictError carrying the same Report, or ctx.Err().
func (v *Verifier) Proof(ctx context.Context, record, proof []byte) (*Report, error) {
	r := newReport(kindProof, v.o.At)
	rec := v.checkRecord(r, record)
	p, err := transcript.ParseProof(proof)
	if err != nil {
		r.add(CodeInclusionProofFailed, checkProof, StatusFail, "", err.Error())
		return result(r)
	}
	b := newBundleCheck(v, r, nil, rec)
	if err := b.proofLines(ctx, p); err != nil {
		return nil, err
	}
	v.noRekorEntry(r)
	return result(r)
}

// proofLines checks that p's lines are in the transcript the record signs
// (a record that failed has no root to check them against: its findings
// say why), then checks the disclosed lines as a partial transcript.
func (b *bundleCheck) proofLines(ctx context.Context, p *transcript.Proof) error {
	r, rec := b.r, b.rec
	switch {
	case rec == nil:
		return nil
	case rec.ToolTranscript == nil:
		r.add(CodeInclusionProofFailed, checkProof, StatusFail, "/tool_transcript", "the record commits to no transcript: nothing to prove inclusion in")
		return nil
	}
	if err := transcript.CheckProof(p, rec.ToolTranscript.Hash); err != nil {
		r.add(CodeInclusionProofFailed, checkProof, StatusFail, "/tool_transcript/hash", err.Error())
		return nil
	}
	r.Root = p.Root
	for _, e := range p.Entries {
		r.add(CodeInclusionProofOK, checkProof, StatusPass, lineSubject(e.Index),
			fmt.Sprintf("included in the signed transcript of %d lines", p.TreeSize))
	}
	b.partial, b.tr.interpret = true, true
	for i, e := range p.Entries {
		if i&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r.Counts.Lines++
		b.line(e.Index, []byte(e.Line))
	}
	b.disc.tree = p.TreeSize
	b.finish(nil)
	return nil
}

// finishPartial closes a proof verification: what the disclosed lines
// show, and the limits of what they can show.
func (b *bundleCheck) finishPartial() {
	r := b.r
	ids := make([]string, 0, b.attempts.len())
	b.attempts.each(func(id string, _ attemptState) { ids = append(ids, id) }) // in line order
	if b.hist.conflicts == 0 && len(ids) > 0 && b.tr.interpret {
		r.add(CodeHistoryConsistent, checkIdentity, StatusPass, "",
			fmt.Sprintf("the %d disclosed attempts have unique ids, backward retry links and no replaced outcome", len(ids)))
	}
	first := len(r.Findings)
	b.outcomes()
	b.policySummary()
	// An attempt with no outcome line disclosed is not an unknown outcome:
	// its lines were left out. The seal, when disclosed, counts them all:
	// when it accounts for every transport failure and unknown among the
	// disclosed lines, what was left out is a response line.
	withheldResponse := false
	var sealNote string
	if s := b.tr.seal; s != nil {
		c := r.Counts
		disclosedUnknown := c.Unknown - b.undisclosedOutcomes()
		sealNote = fmt.Sprintf("; the seal counts %d responses, %d transport failures and %d unknown, the disclosed lines show %d, %d and %d",
			s.Responses, s.TransportFailures, s.Unknown, c.Responses, c.TransportFailures, disclosedUnknown)
		withheldResponse = s.Responses > c.Responses && s.TransportFailures == c.TransportFailures && s.Unknown == disclosedUnknown
	}
	for i := first; i < len(r.Findings); i++ {
		f := &r.Findings[i]
		if f.Code != CodeOutcomeUnknown {
			continue
		}
		if a, ok := b.attempts.get(strings.TrimPrefix(f.Subject, "attempt ")); ok && a.state == stOpen && !a.resolved {
			f.Code = CodeOutcomeUndisclosed
			f.Detail = "no line about its outcome is disclosed" + sealNote
			if b.tr.seal != nil {
				f.Detail = "its outcome lines were withheld from the disclosure (a sealed transcript has an observation or resolution line for every attempt)" + sealNote
			}
			if withheldResponse {
				f.Detail = "its response line was withheld from the disclosure" + sealNote
			}
			f.Detail = bound(f.Detail)
			continue
		}
		f.Detail = bound("as disclosed: " + f.Detail + " (a proof cannot show that no other line about this attempt exists)")
	}
	if b.header != nil {
		r.add(CodeProducerObservation, checkOutcome, StatusInfo, "server",
			"the server's identity is as the producer observed it; no server authentication was recorded")
	}
	if r.Counts.Responses > 0 {
		r.add(CodeProducerObservation, checkOutcome, StatusInfo, "responses",
			"responses are bound to their attempts as the producer recorded them; the server did not sign them")
	}
	// The last line is always disclosed (it authenticates the tree size);
	// in a sealed transcript it is the seal, whose attempt count the
	// record's call_count must equal.
	unchecked := "the other lines, call_count and payload bytes"
	if tt := b.rec.ToolTranscript; b.tr.seal != nil && tt.CallCount != nil {
		unchecked = "the other lines and payload bytes"
		if *tt.CallCount != b.tr.seal.Attempts {
			r.add(CodeCallCountMismatch, checkTranscript, StatusFail, "/tool_transcript/call_count",
				fmt.Sprintf("call_count %d, the disclosed seal counts %d attempts", *tt.CallCount, b.tr.seal.Attempts))
		}
	}
	scope := fmt.Sprintf("%d of %d lines disclosed", r.Counts.Lines, b.disc.tree)
	if len(ids) > 8 {
		ids = append(ids[:8:8], fmt.Sprintf("and %d more", len(ids)-8))
	}
	if len(ids) > 0 {
		scope += " (attempts " + strings.Join(ids, ", ") + ")"
	}
	if b.disc.disclosed {
		unchecked = "the other lines and their payloads"
	}
	if b.disc.undisclosed > 0 {
		// What a proof is for: it shows lines are in the signed transcript
		// without disclosing the rest, payloads included. Withholding them
		// is its scope, stated here, not missing evidence.
		unchecked = fmt.Sprintf("%s (%d payload and manifest commitments, disclosed by digest only)", unchecked, b.disc.undisclosed)
	}
	r.add(CodeProofScopeLimited, checkProof, StatusInfo, "",
		scope+": "+unchecked+" were not checked; a verified proof shows only that the disclosed lines are in the transcript the trusted record signs")
}

// ErrAttemptNotFound is returned by ProveAttempt for an attempt id the
// transcript does not record.
var ErrAttemptNotFound = errors.New("attempt not in transcript")

// ProveAttempt builds the inclusion proof of one attempt from a transcript
// (the exact bytes of transcript.jsonl): the header, the snapshot line the
// attempt binds, the attempt line, every observation, resolution and
// notification naming the attempt, and (transcript.Prove adds it) the last
// line, which authenticates the transcript's size. Proof verifies it against the record
// without the other lines. Building the proof holds every line in memory
// (the Merkle tree needs them); lines are read with transcript.Reader's
// bounds and must be valid.
func ProveAttempt(tr io.Reader, attemptID string) (*transcript.Proof, error) {
	rd := transcript.NewReader(tr)
	var lines [][]byte
	var pick []int64
	snapshots := map[string]int64{} // snapshot id -> line
	found := false
	for {
		raw, ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		idx := int64(len(lines))
		lines = append(lines, raw)
		switch e := ev.(type) {
		case *transcript.Header:
			pick = append(pick, idx)
		case *transcript.SnapshotEvent:
			snapshots[e.SnapshotID] = idx
		case *transcript.Attempt:
			if e.AttemptID != attemptID || found {
				continue
			}
			found = true
			if s, ok := snapshots[e.Snapshot.SnapshotID]; ok && e.Snapshot.SnapshotID != "" {
				pick = append(pick, s)
			}
			pick = append(pick, idx)
		case *transcript.Observation:
			if found && e.AttemptID == attemptID {
				pick = append(pick, idx)
			}
		case *transcript.Resolution:
			if found && e.AttemptID == attemptID {
				pick = append(pick, idx)
			}
		case *transcript.Notification:
			if found && e.AttemptID == attemptID {
				pick = append(pick, idx)
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrAttemptNotFound, attemptID)
	}
	return transcript.Prove(lines, pick)
}

// undisclosedOutcomes counts the disclosed attempts with no outcome line
// disclosed (counted unknown by outcomes()).
func (b *bundleCheck) undisclosedOutcomes() int64 {
	var n int64
	b.attempts.each(func(_ string, a attemptState) {
		if a.state == stOpen && !a.resolved {
			n++
		}
	})
	return n
}
