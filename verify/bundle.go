package verify

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"strconv"
	"sync"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// Outcome states of an attempt, advanced by its observations and
// resolution (spec/verification.md, "History").
const (
	stOpen         uint8 = iota // no terminal observation yet
	stResponse                  // a response was recorded
	stTransport                 // the transport failed with the call in flight
	stUnknown                   // timeout, cancel_sent or a resolution: unknown
	stLateResponse              // a late response after timeout or cancel_sent
	stCancelled                 // cancel_sent (after a timeout or not): unknown
	stDenied                    // denied by the policy or lock: never forwarded (policy.go)
)

// unknownState: an outcome a late response may still follow.
func unknownState(st uint8) bool { return st == stUnknown || st == stCancelled }

// snapState is what the verifier keeps per snapshot event.
type snapState struct {
	seq      int64
	atMs     int64
	digest   string
	complete bool
	reasons  string              // incomplete reasons, for details
	usable   bool                // the manifest was read and matched: its facts can be compared
	tools    map[string]struct{} // declared tool names, when usable and complete
	reported bool                // snapshot_incomplete already reported for it
	staleAt  int64               // seq of the list_changed last reported as stale for it
}

// pendingRef is an attempt that named a snapshot not yet seen.
type pendingRef struct {
	attempt  string
	seq      int64
	snapshot string
}

// bundleCheck streams one bundle's transcript and checks every line against
// the record, the blobs and the lines before it. Each check keeps its state
// in its own field (tr, hist, snap, disc, pl, red, pk, fr, http, ck); the
// fields left here are the inputs and what several checks read.
type bundleCheck struct {
	http httpCheck // Streamable HTTP lines (http.go)
	v    *Verifier
	r    *Report
	fsys fs.FS
	rec  *sign.Record

	header      *transcript.Header
	attempts    *attemptTable
	malformedAt int64           // first malformed line, or -1
	scanned     map[string]bool // bundle paths scanTree already refused
	body        []byte          // reused for the payloads whose claims are re-derived

	// partial: only some lines are disclosed (an inclusion proof). Lines
	// may be missing between them, no blob is available, and an absent
	// line proves nothing.
	partial bool
	// recovered: a recovery line was read (the producer was interrupted).
	recovered bool

	tr   transcriptState  // the line sequence, the header's bindings, the seal
	hist historyState     // retry links and identity and history conflicts
	snap snapshotState    // snapshot events and the attempts bound to them (snapshot.go)
	disc disclosureState  // what an inclusion proof discloses (proof.go)
	pl   payloadState     // payload blobs: hashing, retention, salts (payload.go)
	red  redactionState   // redacted copies and the claims they cover (payload.go)
	fr   frameState       // the frame sequence (frames.go)
	pk   packState        // the payload pack and the line reader's entries (pack.go)
	ck   *checkpointCheck // signed checkpoints (checkpoint.go), nil without
	pol  policyState      // policy decisions (policy.go)
}

// transcriptState follows the transcript as a sequence of lines: the
// header's server binding, seq continuity, the seal, and whether the lines
// can still be interpreted and their commitment recomputed.
type transcriptState struct {
	serverDigest string // sha256 of JCS(header.server)
	interpret    bool   // the header is supported: events can be interpreted
	lastSeq      int64
	sealed       bool
	seal         *transcript.Seal
	commitOK     bool // the commitment could be recomputed over every line
	limited      bool // reading stopped at a configured limit
	// serverInfo is the server's self-description from the latest protocol
	// observation, as reported (for the producer_observation_only finding).
	serverInfo string
}

// historyState follows the attempts' history beyond each attempt's own
// outcome (bundleCheck.attempts): which later attempt retried it, and how
// many identity and history findings were reported.
type historyState struct {
	retriedBy map[string]string // attempt id -> the first later attempt naming it in retry_of
	conflicts int64             // identity and history findings
}

// snapshotState follows the snapshot events, the tools/list_changed
// notifications and the attempts' bindings to snapshots (snapshot.go).
type snapshotState struct {
	snapshots   map[string]*snapState
	lastChanged int64 // seq of the last tools/list_changed notification, or -1
	// undeclared: attempts calling a tool their complete bound snapshot
	// does not declare, judged by their outcome (undeclaredOutcome).
	undeclared map[string]string
	// unbound: attempts that bind no snapshot, per reason (unboundFindings).
	unbound      map[string]unboundCount
	unboundOrder []string
	pending      []pendingRef
	// decls: each tool's declaration digest in the latest complete
	// snapshot that declared it, for declaration_changed; changed: the
	// tools already reported.
	decls   map[string]declSeen
	changed map[string]bool
}

// declSeen is where a tool's declaration was last seen.
type declSeen struct {
	digest, snapshot string
	seq              int64
}

// disclosureState follows what an inclusion proof discloses, when the
// bundle is partial (proof.go, disclose.go).
type disclosureState struct {
	disclosed   bool  // partial, and the disclosed lines' payloads are in the bundle (disclose.go)
	undisclosed int64 // payload and manifest commitments whose bytes a proof does not carry
	tree        int64 // the proof's tree size
}

// payloadState follows the payload blobs (payload.go): the buffers reused
// to hash them, the ones not retained, the failures, and the salt of the
// one last checked.
type payloadState struct {
	hash hash.Hash // reused for every blob
	sum  [sha256.Size]byte
	buf  []byte

	withheld          int64  // payloads not retained (digest-only retention)
	overLimitPayloads int64  // payloads not retained: over the frame limit
	withheldFirst     string // the subject of the first one
	bad               int64  // payload findings other than pass

	// salted: the header's format salts payload commitments (v3); salt is
	// the salt of the payload blob last checked and returned, nil for a
	// plain one.
	salted bool
	salt   []byte
}

// redactionState follows the redacted copies (payload.go): the list of the
// payload last checked, for its claims (claims.go); counts for the summary
// finding.
type redactionState struct {
	reds          []transcript.Redaction
	redacted      int64
	values        int64
	classes       map[string]int64
	first         string
	claimsCovered int64
	unredactable  int64 // withheld: could not be redacted exactly
}

func newBundleCheck(v *Verifier, r *Report, fsys fs.FS, rec *sign.Record) *bundleCheck {
	return &bundleCheck{v: v, r: r, fsys: fsys, rec: rec, malformedAt: -1, attempts: newAttemptTable(),
		tr:   transcriptState{lastSeq: -1},
		hist: historyState{retriedBy: map[string]string{}},
		snap: snapshotState{snapshots: map[string]*snapState{}, lastChanged: -1}}
}

func (b *bundleCheck) run(ctx context.Context) error {
	defer b.closePack()
	f, err := openRegular(b.fsys, transcript.TranscriptFile)
	if err != nil {
		switch {
		case b.refused(transcript.TranscriptFile, checkTranscript, transcript.TranscriptFile, err):
		case b.rec != nil && b.rec.ToolTranscript != nil:
			b.r.add(CodeEvidenceUnavailable, checkTranscript, StatusUnavailable, transcript.TranscriptFile,
				"the record commits to a transcript ("+b.rec.ToolTranscript.Hash+") that cannot be read: "+err.Error())
		case b.rec != nil:
			// Neither a commitment nor a transcript: a bare record in a
			// directory. Nothing is bound, nothing is missing.
		}
		return nil
	}
	defer f.Close()
	if b.rec != nil && b.rec.ToolTranscript == nil {
		b.r.add(CodeBindingFailure, checkTranscript, StatusFail, "/tool_transcript",
			"the bundle holds a transcript but the record commits to none: nothing in it is inside the signed boundary")
	}

	c := transcript.NewCommitter()
	b.tr.commitOK = true
	lim := b.v.o.Limits
	rd := &lineReader{
		br:   bufio.NewReaderSize(&io.LimitedReader{R: f, N: lim.MaxTranscriptBytes + 1}, transcript.MaxLineBytes+1),
		lim:  lim,
		out:  make(chan *lineBatch, readAhead),
		free: make(chan *lineBatch, readAhead+2),
		done: make(chan struct{}),
		pack: &b.pk.shared,
	}
	var wg sync.WaitGroup
	wg.Go(rd.read)
	var once sync.Once
	stop := func() {
		// The reader reads the pack the checker closes: it is stopped
		// (and waited for) first, however the checker ends.
		once.Do(func() { close(rd.done); wg.Wait() })
	}
	defer stop()
	idx := int64(0)
	var end *streamEnd
	for end == nil {
		bt := <-rd.out
		for i := range bt.lines {
			if idx&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			l := &bt.lines[i]
			c.Add(l.line)
			b.r.Counts.Lines++
			b.pk.pre = bt.pre[l.pre0:l.pre1]
			b.lineDecoded(idx, l.line, l.ev, l.err)
			b.pk.pre, b.pk.cur = nil, nil
			b.ck.at(b, c)
			if b.v.o.Progress != nil && b.r.Counts.Lines%progressEvery == 0 {
				b.v.o.Progress(b.r.Counts.Lines)
			}
			idx++
		}
		if end = bt.end; end == nil {
			bt.reset()
			select {
			case rd.free <- bt:
			default:
			}
		}
	}
	if idx&1023 == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	stop()
	if streamStatsHook != nil {
		streamStatsHook(rd.stats)
	}
	switch end.kind {
	case endOverBytes:
		b.overLimit(fmt.Sprintf("more than %d bytes (Limits.MaxTranscriptBytes)", lim.MaxTranscriptBytes))
	case endOverLines:
		b.overLimit(fmt.Sprintf("more than %d lines (Limits.MaxTranscriptLines)", lim.MaxTranscriptLines))
	case endTooLong:
		b.malformed(idx, transcript.CodeTooLong, fmt.Sprintf("no LF within %d bytes: the rest of the transcript cannot be read line by line", transcript.MaxLineBytes))
		b.tr.commitOK = false
	case endEOF:
		if len(end.tail) > 0 {
			c.Add(end.tail)
			if !b.ck.tornTail(len(end.tail)) {
				b.malformed(idx, transcript.CodeTornLine, fmt.Sprintf("%d bytes after the last LF", len(end.tail)))
			}
		}
	case endReadErr:
		b.r.add(CodeEvidenceUnavailable, checkTranscript, StatusUnavailable, transcript.TranscriptFile,
			fmt.Sprintf("read error at line %d: %v", idx, end.err))
		b.tr.commitOK = false
	}
	if b.v.o.Progress != nil {
		b.v.o.Progress(b.r.Counts.Lines)
	}
	if c.Count() == 0 && !b.tr.limited {
		b.malformed(0, transcript.CodeHeaderMissing, "empty transcript: the header line is required")
	}
	b.finish(c)
	return nil
}

// overLimit stops reading a transcript beyond a configured limit: the rest
// is not checked and the commitment cannot be recomputed, which is
// unsupported evidence (this verifier's limits), not a contradiction.
func (b *bundleCheck) overLimit(detail string) {
	b.tr.commitOK = false
	b.tr.interpret = false
	b.tr.limited = true
	b.r.add(CodeLimitExceeded, checkTranscript, StatusUnsupported, transcript.TranscriptFile,
		detail+": the rest was not read, so the commitment was not recomputed; raise the limit to verify it")
}

// refused reports a bundle file that openRegular refused (a symbolic
// link, a FIFO, a device, ...) and says whether err was such a refusal.
func (b *bundleCheck) refused(path string, check Check, subject string, err error) bool {
	if !errors.Is(err, ErrNotRegular) {
		return false
	}
	if b.scanned[path] {
		return true // scanTree reported it
	}
	if subject != path {
		subject += " (" + path + ")"
	}
	b.r.add(CodeFileRefused, check, StatusFail, subject,
		"not read: "+err.Error()+"; a producer writes only regular files, and a link, FIFO or device is never followed")
	return true
}

// malformed reports a line that is not a valid transcript line.
//
// A malformed line ends the interpretation of the history: the lines after
// it are still committed to (the binding is still judged), but what they
// say about attempts cannot be read against a history with a hole in it.
func (b *bundleCheck) malformed(idx int64, code, detail string) {
	if b.malformedAt < 0 {
		b.malformedAt = idx
	}
	b.tr.interpret = false
	b.r.add(CodeTranscriptMalformed, checkTranscript, StatusFail, lineSubject(idx), code+": "+detail)
}

func lineSubject(idx int64) string { return "line " + strconv.FormatInt(idx, 10) }

// line checks one line: its own validity (transcript.DecodeLine), its place
// in the sequence, and its meaning in the history so far.
func (b *bundleCheck) line(idx int64, line []byte) {
	ev, err := transcript.DecodeLine(line)
	b.lineDecoded(idx, line, ev, err)
}

// lineDecoded is line with DecodeLine's result for it.
func (b *bundleCheck) lineDecoded(idx int64, line []byte, ev transcript.Event, err error) {
	if err != nil {
		b.decodeError(idx, line, err)
		return
	}
	seq := seqOf(ev)
	if b.partial && seq != idx {
		b.malformed(idx, transcript.CodeSeqGap, fmt.Sprintf("seq %d at proven index %d", seq, idx))
	} else if seq != idx && seq != b.tr.lastSeq+1 {
		// Reported once per discontinuity: after a removed line every later
		// seq is off by one, and one finding says so.
		b.malformed(idx, transcript.CodeSeqGap, fmt.Sprintf("seq %d at line %d (previous seq %d)", seq, idx, b.tr.lastSeq))
	}
	b.tr.lastSeq = seq
	if b.tr.sealed {
		b.malformed(idx, transcript.CodeAfterSeal, "a line after the seal line")
	}
	if h, ok := ev.(*transcript.Header); ok {
		b.onHeader(idx, line, h)
		return
	}
	if idx == 0 {
		b.malformed(idx, transcript.CodeHeaderMissing, "line 0 is not a header")
	}
	if !b.tr.interpret {
		return
	}
	b.frames(idx, ev)
	switch e := ev.(type) {
	case *transcript.Frame:
		b.onFrame(e)
	case *transcript.SessionEvent:
		b.onSession(e)
	case *transcript.HTTPEvent:
		b.onHTTP(idx, e)
	case *transcript.Protocol:
		if e.Payload != nil {
			b.payload(*e.Payload, "protocol observation at "+lineSubject(idx), false)
		}
		if e.ServerName != "" || e.ServerVer != "" {
			b.tr.serverInfo = "serverInfo " + boundedQuote(e.ServerName) + " " + boundedQuote(e.ServerVer) + " (" + e.Source + ")"
		}
	case *transcript.SnapshotEvent:
		b.onSnapshot(e)
	case *transcript.Notification:
		b.onNotification(e)
	case *transcript.Attempt:
		b.onAttempt(e)
	case *transcript.Observation:
		b.onObservation(e)
	case *transcript.Resolution:
		b.onResolution(e)
	case *transcript.Recovery:
		b.onRecovery(e)
	case *transcript.Seal:
		b.tr.sealed = true
		b.tr.seal = e
	}
}

// decodeError maps a DecodeLine rejection to its finding.
func (b *bundleCheck) decodeError(idx int64, line []byte, err error) {
	var le *transcript.LineError
	if !errors.As(err, &le) {
		b.malformed(idx, "invalid", err.Error())
		return
	}
	var ce *canon.Error
	switch {
	case le.Code == transcript.CodeNotCanonical && errors.As(err, &ce) && ce.Code == canon.CodeDuplicateKey:
		b.r.add(CodeDuplicateKey, checkTranscript, StatusFail, lineSubject(idx)+" "+pointer(ce.Pointer), "an ambiguous object in committed evidence: "+ce.Detail)
	case le.Code == transcript.CodeNotCanonical && errors.As(err, &ce) && ce.Code == canon.CodeUnsupportedNumber:
		b.r.add(CodeValueUnsupported, checkTranscript, StatusFail, lineSubject(idx)+" "+pointer(ce.Pointer), "a number the line's declared policy ("+canon.PolicyV02ID+") cannot hold: "+ce.Detail)
	case le.Code == transcript.CodeUnsupportedFormat:
		b.r.add(CodeFormatUnsupported, checkTranscript, StatusUnsupported, lineSubject(idx), le.Detail)
	case le.Code == transcript.CodeInvalidMember && claimsServerProof(line):
		b.r.add(CodeServerProofMissing, checkOutcome, StatusFail, lineSubject(idx),
			"an observation claims a basis other than producer_observation, and the format carries no server proof to check it against")
	default:
		b.malformed(idx, le.Code, le.Detail)
	}
	// Like any malformed line, an undecodable one is a hole in the history.
	b.tr.interpret = false
}

// claimsServerProof reports whether a rejected line is an observation whose
// basis claims more than the producer's observation.
func claimsServerProof(line []byte) bool {
	doc, err := canon.Parse(line, canon.ParseOptions{})
	if err != nil {
		return false
	}
	t, _ := doc.Root().Get("type")
	basis, ok := doc.Root().Get("basis")
	ts, _ := t.Str()
	bs, _ := basis.Str()
	return ok && ts == "observation" && bs != transcript.BasisProducer
}

func seqOf(ev any) int64 {
	if e, ok := ev.(transcript.Event); ok {
		return transcript.SeqOf(e)
	}
	return -1
}

func (b *bundleCheck) onHeader(idx int64, line []byte, h *transcript.Header) {
	if idx != 0 {
		b.malformed(idx, transcript.CodeHeaderRepeated, "a header after line 0")
		return
	}
	b.header = h
	b.pl.salted = h.Format == transcript.Format || h.Format == transcript.FormatV3
	b.tr.interpret = true
	// The server identity each attempt binds: sha256 of JCS(header.server),
	// from the received bytes.
	doc, err := canon.Parse(line, canon.ParseOptions{})
	if err == nil {
		if sv, ok := doc.Root().Get("server"); ok {
			b.tr.serverDigest, _ = sv.Digest(canon.PolicyV02)
		}
	}
	b.onPolicyHeader(h)
	if tp := h.Producer.KeyThumbprint; tp != "" && b.r.Signer != "" && tp != b.r.Signer {
		b.r.add(CodeBindingFailure, checkTranscript, StatusFail, "line 0 /producer/key_thumbprint",
			"the transcript names signing key "+tp+", the record is signed by "+b.r.Signer)
	}
}

func (b *bundleCheck) conflict(code Code, subject, detail string) {
	b.hist.conflicts++
	b.r.add(code, checkIdentity, StatusFail, subject, detail)
}

func (b *bundleCheck) onAttempt(a *transcript.Attempt) {
	b.r.Counts.Attempts++
	subject := "attempt " + a.AttemptID
	if b.header != nil && a.ExecutionScope != b.header.ExecutionScope {
		b.conflict(CodeIdentityConflict, subject, fmt.Sprintf("names execution scope %q, the header %q", a.ExecutionScope, b.header.ExecutionScope))
	}
	prev, dup := b.attempts.get(a.AttemptID)
	if dup {
		b.conflict(CodeIdentityConflict, subject, fmt.Sprintf("attempt id reused: first at seq %d, again at seq %d", prev.seq, a.Seq))
		// The first attempt keeps the identity; the later one is not tracked.
	}
	if a.RetryOf != "" {
		prev, ok := b.attempts.get(a.RetryOf)
		switch {
		case !ok && b.partial:
			// The earlier attempt may simply not be disclosed.
		case !ok:
			b.conflict(CodeHistoryConflict, subject, "retry_of "+a.RetryOf+" names no earlier attempt (a retry link must point backward)")
		case prev.seq >= a.Seq:
			b.conflict(CodeHistoryConflict, subject, "retry_of "+a.RetryOf+" does not point backward")
		case a.RetryBasis == transcript.BasisCallerToolUse && (a.Correlation.ToolUseID == nil || !a.Correlation.ToolUseID.Valid):
			b.conflict(CodeHistoryConflict, subject, "retry basis "+transcript.BasisCallerToolUse+" on an attempt that carries no valid tool_use_id")
		default:
			if _, seen := b.hist.retriedBy[a.RetryOf]; !seen {
				b.hist.retriedBy[a.RetryOf] = a.AttemptID
			}
			b.r.add(CodeRetryLinked, checkIdentity, StatusInfo, subject,
				fmt.Sprintf("a new attempt retrying %s (%s); %s keeps its own outcome (%s)", a.RetryOf, a.RetryBasis, a.RetryOf, outcomeName(prev.state)))
		}
	}
	if b.tr.serverDigest != "" && a.ServerDigest != b.tr.serverDigest {
		b.r.add(CodeBindingFailure, checkTranscript, StatusFail, subject,
			"binds server "+a.ServerDigest+", the header's server is "+b.tr.serverDigest)
	}
	// A response must answer the request's id as the bytes give it (a
	// line whose id claim differs is already evidence_mismatch), or as the
	// line claims it when the bytes are unavailable.
	rpc := a.RPCID
	body, ok := b.payload(a.Request, subject+" request", true)
	if ok {
		if f := b.attemptClaims(a, body, subject); f != nil {
			rpc = f.RPCID
		}
	} else {
		body = nil
	}
	b.checkDecision(a, body, len(b.red.reds) > 0)
	if !dup {
		if err := b.attempts.add(a.AttemptID, a.Seq, rpc); err != nil {
			b.overLimit(err.Error())
		}
	}
	b.bindSnapshot(a)
}

func outcomeName(st uint8) string {
	switch st {
	case stResponse:
		return "response"
	case stTransport:
		return "transport failure"
	case stUnknown:
		return "unknown"
	case stCancelled:
		return "unknown (cancelled)"
	case stLateResponse:
		return "late response"
	case stDenied:
		return "denied"
	}
	return "no outcome yet"
}

// onObservation advances an attempt's outcome. An outcome once recorded is
// never replaced: anything after a response, a transport failure or a
// resolution, and a response (rather than a late_response) after a timeout
// or cancellation are history conflicts.
func (b *bundleCheck) onObservation(o *transcript.Observation) {
	subject := "attempt " + o.AttemptID
	a, ok := b.attempts.get(o.AttemptID)
	if !ok && b.partial {
		return
	}
	if !ok {
		b.conflict(CodeHistoryConflict, subject, fmt.Sprintf("observation %s at seq %d names no earlier attempt", o.Kind, o.Seq))
		return
	}
	defer func() { b.attempts.put(o.AttemptID, a) }()
	b.decisionOutcome(o)
	if o.Response != nil {
		b.undeclaredOutcome(o)
		if body, ok := b.payload(*o.Response, fmt.Sprintf("%s %s (seq %d)", subject, o.Kind, o.Seq), true); ok {
			// One reading of the bytes serves both checks.
			rd := b.responseDerived(body)
			b.responseID(o, body, &rd, subject)
			b.observationClaims(o, body, &rd, subject)
		}
	}
	replaced := func() {
		b.conflict(CodeHistoryConflict, subject, fmt.Sprintf("observation %s at seq %d after its outcome was recorded (%s): an outcome is never replaced", o.Kind, o.Seq, outcomeName(a.state)))
	}
	if a.resolved {
		replaced()
		return
	}
	switch o.Kind {
	case transcript.ObsResponse:
		if a.state != stOpen {
			replaced()
			return
		}
		a.state = stResponse
	case transcript.ObsTransportFailure:
		// After a timeout or cancellation the call is still in flight as
		// far as anyone knows; the transport failing then settles nothing
		// either, so it replaces no outcome.
		if a.state != stOpen && !unknownState(a.state) {
			replaced()
			return
		}
		a.state = stTransport
	case transcript.ObsTimeout, transcript.ObsCancelSent:
		if a.state != stOpen && !unknownState(a.state) {
			replaced()
			return
		}
		if o.Kind == transcript.ObsCancelSent || a.state == stCancelled {
			a.state = stCancelled
		} else {
			a.state = stUnknown
		}
	case transcript.ObsDenied:
		if a.state != stOpen {
			replaced()
			return
		}
		a.state = stDenied
	case transcript.ObsLateResponse:
		if !unknownState(a.state) {
			b.conflict(CodeHistoryConflict, subject, fmt.Sprintf("late_response at seq %d without an earlier timeout or cancellation (outcome: %s)", o.Seq, outcomeName(a.state)))
			return
		}
		if a.state == stCancelled {
			b.r.add(CodeAnsweredAfterCancel, checkOutcome, StatusWarning, subject,
				fmt.Sprintf("the server answered at seq %d after the client cancelled the call: it may have run to completion although the client gave up on it", o.Seq))
		}
		a.state = stLateResponse
	}
}

func (b *bundleCheck) onResolution(res *transcript.Resolution) {
	subject := "attempt " + res.AttemptID
	a, ok := b.attempts.get(res.AttemptID)
	switch {
	case !ok && b.partial:
	case !ok:
		b.conflict(CodeHistoryConflict, subject, fmt.Sprintf("resolution at seq %d names no earlier attempt", res.Seq))
	case a.resolved || a.state != stOpen:
		b.conflict(CodeHistoryConflict, subject, fmt.Sprintf("resolution at seq %d for an attempt whose outcome was already recorded (%s): an outcome is never replaced", res.Seq, outcomeName(a.state)))
	default:
		a.resolved = true
		a.state = stUnknown
		b.attempts.put(res.AttemptID, a)
	}
}

func (b *bundleCheck) onNotification(n *transcript.Notification) {
	b.notificationRules(n)
	if n.Method == mcpwire.NotifyToolsListChanged {
		b.snap.lastChanged = n.Seq
	}
	if n.AttemptID != "" && !b.partial {
		if _, ok := b.attempts.get(n.AttemptID); !ok {
			b.conflict(CodeHistoryConflict, "attempt "+n.AttemptID, fmt.Sprintf("notification %s at seq %d names no earlier attempt", n.Method, n.Seq))
		}
	}
	nsubject := fmt.Sprintf("notification %s (seq %d)", n.Method, n.Seq)
	if body, ok := b.payload(n.Payload, nsubject, true); ok {
		b.notificationClaims(n, body, nsubject)
	}
}

func (b *bundleCheck) onRecovery(rc *transcript.Recovery) {
	b.recovered = true
	detail := "the producer recovered after an interruption: " + rc.Detail
	if rc.TornFile != "" {
		detail += fmt.Sprintf("; a torn line of %d bytes was quarantined, not used", rc.TornLength)
		b.blob(rc.TornFile, rc.TornDigest, rc.TornLength, checkPayload, fmt.Sprintf("quarantined line (seq %d)", rc.Seq), true, false)
	}
	b.r.add(CodeRecoveryRecorded, checkOutcome, StatusInfo, "line "+strconv.FormatInt(rc.Seq, 10), detail)
}

// finish runs the checks that need the whole transcript.
func (b *bundleCheck) finish(c *transcript.Committer) {
	r := b.r
	// Snapshot bindings that named a snapshot not seen before the attempt.
	for _, p := range b.snap.pending {
		if s, ok := b.snap.snapshots[p.snapshot]; ok {
			r.add(CodeSnapshotWrong, checkSnapshot, StatusFail, "attempt "+p.attempt,
				fmt.Sprintf("bound to snapshot %s, which was recorded at seq %d, after the attempt's dispatch at seq %d", p.snapshot, s.seq, p.seq))
		} else if b.partial {
			r.add(CodeEvidenceUnavailable, checkSnapshot, StatusUnavailable, "attempt "+p.attempt,
				"bound to snapshot "+p.snapshot+", whose snapshot line the proof does not disclose")
		} else {
			r.add(CodeBindingFailure, checkSnapshot, StatusFail, "attempt "+p.attempt,
				"bound to snapshot "+p.snapshot+", which the signed transcript does not record")
		}
	}
	b.unboundFindings()
	if b.partial {
		if b.disc.disclosed {
			b.withheldFindings()
			b.redactionFindings()
			b.packFindings()
			if b.pl.bad == 0 && r.Counts.Payloads > 0 {
				r.add(CodePayloadsVerified, checkPayload, StatusPass, "",
					fmt.Sprintf("%d disclosed payloads present with their committed digests and lengths", r.Counts.Payloads))
			}
		}
		b.finishPartial()
		return
	}
	b.withheldFindings()
	b.redactionFindings()
	b.packFindings()
	if c.Count() > 0 && b.tr.commitOK {
		r.Root = c.Root()
	}
	if b.tr.interpret && !b.tr.sealed && b.malformedAt < 0 && !b.ck.isUnsealed() {
		b.malformed(r.Counts.Lines, "not_sealed", "the transcript has no seal line: it was signed before it was sealed")
	}
	if b.tr.seal != nil {
		b.checkSeal()
	}

	// Binding: the recomputed commitment against the signed one.
	if b.rec != nil && b.rec.ToolTranscript != nil {
		tt := b.rec.ToolTranscript
		switch {
		case r.Root == "":
			// The commitment could not be recomputed: the transcript finding
			// already says why.
		case r.Root != tt.Hash:
			r.add(CodeBindingFailure, checkTranscript, StatusFail, "/tool_transcript/hash",
				fmt.Sprintf("the transcript's %d lines commit to %s, the record signs %s", c.Count(), r.Root, tt.Hash))
		default:
			r.add(CodeTranscriptBound, checkTranscript, StatusPass, "/tool_transcript/hash",
				fmt.Sprintf("the %d lines commit to the signed %s", c.Count(), tt.Hash))
		}
		if tt.CallCount != nil && *tt.CallCount != r.Counts.Attempts && b.tr.interpret {
			r.add(CodeCallCountMismatch, checkTranscript, StatusFail, "/tool_transcript/call_count",
				fmt.Sprintf("call_count %d, the transcript records %d attempts", *tt.CallCount, r.Counts.Attempts))
		}
	}
	b.ck.finish(b, c)
	if !b.tr.interpret {
		return
	}

	b.undeclaredInfo()
	if b.hist.conflicts == 0 && r.Counts.Attempts > 0 {
		r.add(CodeHistoryConsistent, checkIdentity, StatusPass, "",
			fmt.Sprintf("%d attempt ids unique, every retry link points backward, no outcome replaced", r.Counts.Attempts))
	}
	if b.pl.bad == 0 && r.Counts.Payloads > 0 {
		r.add(CodePayloadsVerified, checkPayload, StatusPass, "",
			fmt.Sprintf("%d payloads present with the committed digest and length", r.Counts.Payloads))
	}
	b.outcomes()
	b.policySummary()
	b.finishFrames()
	b.finishHTTP()
	if b.header != nil {
		srv := b.header.Server
		seen := "transport " + srv.Transport
		if srv.Executable != "" {
			seen += ", executable " + boundedQuote(srv.Executable)
			if srv.ExecutableSHA256 != "" {
				seen += " " + srv.ExecutableSHA256
			}
		}
		if srv.URL != "" {
			seen += ", url " + boundedQuote(srv.URL)
		}
		if srv.Name != "" {
			seen += ", operator label " + boundedQuote(srv.Name)
		}
		if b.tr.serverInfo != "" {
			seen += ", " + b.tr.serverInfo
		}
		r.add(CodeProducerObservation, checkOutcome, StatusInfo, "server",
			"the server's identity is as the producer observed it ("+seen+"); no server authentication was recorded")
	}
	if r.Counts.Responses > 0 {
		r.add(CodeProducerObservation, checkOutcome, StatusInfo, "responses",
			"responses are bound to their attempts as the producer recorded them; the server did not sign them")
	}
	if r.Counts.Snapshots > 0 {
		r.add(CodeProducerObservation, checkOutcome, StatusInfo, "snapshots",
			"a complete snapshot is what the producer observed: not an atomic catalog revision, not proof that the server is truthful or executed the declarations")
	}
}

// outcomes counts outcomes and reports every unknown one, in transcript
// order, with any later retry noted: a retry never settles the earlier
// attempt's outcome.
func (b *bundleCheck) outcomes() {
	type unk struct {
		id string
		a  attemptState
	}
	var unknown []unk
	// In transcript order; only the first MaxFindingsPerCode are listed,
	// so only they keep their ids.
	var omitted int64
	b.attempts.each(func(id string, a attemptState) {
		switch a.state {
		case stResponse, stLateResponse:
			b.r.Counts.Responses++
			return
		case stDenied:
			b.r.Counts.Denied++
			return
		case stTransport:
			b.r.Counts.TransportFailures++
		default:
			b.r.Counts.Unknown++
		}
		if len(unknown) < maxFindingsPerCode {
			unknown = append(unknown, unk{id, a})
		} else {
			omitted++
		}
	})
	for _, u := range unknown {
		detail := "the attempt was dispatched and no response was recorded: it may or may not have executed"
		switch {
		case u.a.state == stTransport:
			detail = "the transport failed with the call in flight: it may or may not have executed"
		case u.a.resolved:
			detail = "resolved as unknown at seal or recovery: it may or may not have executed"
		case u.a.state == stCancelled:
			detail = "the client cancelled the call and no response followed: it may or may not have executed"
		case u.a.state == stOpen:
			detail = "no observation or resolution was recorded: it may or may not have executed"
		}
		if by, ok := b.hist.retriedBy[u.id]; ok {
			byState, _ := b.attempts.get(by)
			detail += fmt.Sprintf("; retried by %s (%s), which does not show this attempt did not execute", by, outcomeName(byState.state))
		}
		b.r.add(CodeOutcomeUnknown, checkOutcome, StatusInfo, "attempt "+u.id, detail)
	}
	b.r.omit(CodeOutcomeUnknown, StatusInfo, omitted)
}

func (b *bundleCheck) checkSeal() {
	s, cnt := b.tr.seal, b.r.Counts
	// Counts are final only after outcomes(); recompute here the same way.
	var resp, tf, unk, den int64
	b.attempts.each(func(_ string, a attemptState) {
		switch a.state {
		case stResponse, stLateResponse:
			resp++
		case stDenied:
			den++
		case stTransport:
			tf++
		default:
			unk++
		}
	})
	subject := "line " + strconv.FormatInt(s.Seq, 10)
	if s.Attempts != cnt.Attempts {
		b.r.add(CodeCallCountMismatch, checkTranscript, StatusFail, subject,
			fmt.Sprintf("the seal counts %d attempts, the transcript records %d", s.Attempts, cnt.Attempts))
	}
	// With conflicting identities or history the outcome counts have no
	// single meaning; the conflicts are the finding.
	if b.hist.conflicts == 0 && (s.Responses != resp || s.TransportFailures != tf || s.Unknown != unk || s.Denied != den) {
		b.malformed(s.Seq, "seal_counts", fmt.Sprintf("the seal counts %d responses, %d transport failures, %d unknown, %d denied; the lines give %d, %d, %d, %d",
			s.Responses, s.TransportFailures, s.Unknown, s.Denied, resp, tf, unk, den))
	}
}

// boundedQuote quotes evidence text for a finding: control characters and
// invalid UTF-8 escaped, at most 128 bytes of it.
func boundedQuote(v string) string {
	const max = 128
	if len(v) > max {
		return strconv.Quote(v[:max]) + "..."
	}
	return strconv.Quote(v)
}
