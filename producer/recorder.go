package producer

import (
	"context"
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
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// Recorder records one execution scope into a bundle. Its methods are safe
// for concurrent use; concurrent attempts share fsyncs (group commit).
type Recorder struct {
	// Where and how lines and payloads are written (journal.go, pack.go,
	// writeback.go).
	dir    string
	opts   Options
	fsys   FS
	j      *journal
	pack   *packStore
	rules  *redact.Rules // payloads are redacted with them before they are retained; nil: kept exactly
	saltMu sync.Mutex    // the entropy source need not be safe for concurrent use
	wb     *writeback    // none and batch (setPack); nil in strict

	ident identity

	mu       sync.Mutex
	ops      sync.WaitGroup
	closed   bool
	sealOnly bool // reopened or recovered: Seal and Close only
	sealed   bool // the journal ends in its seal line
	sealLine *transcript.Seal
	hist     history       // counts, the attempts in flight, the retry indices
	proto    protocolState // guarded by mu
	bind     bindings
	replayed replayState

	gone clientGoneState // clientgone.go

	ckpt atomic.Pointer[checkpoints] // signed checkpoints (checkpoint.go), nil without

	policy *policy.Engine // from Options.PolicyFile and LockFile, nil without
}

// identity is what names the recorder's lines: the execution scope and the
// server every attempt binds, fixed at Open, and the counters that number
// attempts and snapshots (guarded by Recorder.mu).
type identity struct {
	scope       string
	server      string // sha256 of JCS(header.server)
	nextAttempt int64
	nextSnap    int64
}

// protocolState is the protocol revision later attempts are sent under, as
// the protocol observations so far say (protocolOf). Guarded by
// Recorder.mu.
type protocolState struct {
	era       mcpwire.Era
	legacyVer string
}

// bindings is what an attempt binds: the snapshots, the current one and the
// last list_changed. They change and are read only inside line builders,
// which run under the journal's lock in seq order: an attempt's snapshot
// binding and list_changed_since are decided where its line takes its place
// in the journal, never before (a list_changed that lands between the
// decision and the line would contradict it). Lock order: journal, then mu.
type bindings struct {
	mu          sync.Mutex
	snapshots   map[string]*transcript.SnapshotEvent
	current     *transcript.SnapshotEvent
	lastChanged int64 // seq of the last tools/list_changed notification, -1 if none
	// decls are the recorded snapshots' declarations by manifest digest,
	// kept only with a policy, for decisions (Call.Decide).
	decls map[string]*policy.Snapshot
	// currentDecls are decls of current, once a call looked them up.
	currentDecls declsOf
}

// declsOf are a recorded snapshot's declarations.
type declsOf struct {
	ev    *transcript.SnapshotEvent
	decls *policy.Snapshot
}

// replayState is what Reopen and Recover found replaying an existing
// journal (recover.go), and what Recover did about it.
type replayState struct {
	attempts    map[string]*attemptState // ids seen so far
	scanned     int64                    // valid lines found by replay
	torn        []byte                   // bytes after the last valid line, found by replay
	quarantined map[string]bool          // quarantine files named by recovery events
	recovered   bool                     // the journal holds a recovery event
	recovery    *RecoveryReport
}

// clientGoneState is the first RecordClientGone's detail (clientgone.go).
type clientGoneState struct {
	mu     sync.Mutex
	detail string
}

// Outcome buckets of an attempt, as the seal line counts them.
const (
	stInFlight  = iota // no terminal observation
	stUnknown          // timeout, cancel_sent or an unknown resolution: a late response may still come
	stTransport        // transport_failure
	stResponse         // response or late_response
	stResolved         // unknown resolution (recovery or seal)
	stDenied           // denied by the policy or lock: never forwarded
)

type attemptState struct {
	id       string
	seq      int64
	tool     string
	argsKey  string
	idKey    string
	status   int
	timedOut bool
	canceled bool
	resolved bool
	// decidedDeny: the attempt's line carries a deny decision (Denied is
	// then its only possible observation in enforce mode).
	decidedDeny bool
	// approval: the attempt's line carries an approve decision, and what
	// its approval observation said (approve.go).
	approval       uint8
	approvalDigest string
}

// Handle is a recorded attempt. Observations on it are appended to the
// journal; in strict durability each is durable when its method returns.
type Handle struct {
	r  *Recorder
	st *attemptState
}

// ID returns the attempt id (unique in the execution scope, never reused).
func (h *Handle) ID() string { return h.st.id }

// Open creates the bundle directory dir (it must not exist; mode 0700), its
// journal transcript.jsonl (exclusively, mode 0600, locked) and the header
// line, durable before Open returns.
func Open(dir string, opts Options) (*Recorder, error) {
	opts = opts.withDefaults()
	if err := opts.check(true); err != nil {
		return nil, err
	}
	var raw [16]byte
	if _, err := io.ReadFull(opts.Entropy, raw[:]); err != nil {
		return nil, fmt.Errorf("%w: read entropy: %w", ErrInvalidOptions, err)
	}
	scope := uuidV4(raw)
	srvDigest, err := serverDigest(opts.Server)
	if err != nil {
		return nil, err
	}
	engine, err := opts.policyEngine()
	if err != nil {
		return nil, err
	}
	if err := opts.withApproval(engine); err != nil {
		return nil, err
	}
	rules, policy := opts.redaction()
	h := transcript.Header{
		Seq: 0, Format: transcript.Format, Profile: transcript.Profile,
		Canonicalization: transcript.Canonicalization{Lines: canon.PolicyV02ID, Declarations: canon.PolicyMCPDeclID},
		Merkle:           transcript.MerkleAlg, ExecutionScope: scope, FramesCommitted: opts.FramesCommitted,
		Producer: opts.Producer, Server: opts.Server,
		Retention: opts.Retention, Durability: opts.Durability, Limits: opts.headerLimits(), Redaction: policy,
		StartedAtMs: opts.Clock().UnixMilli(), Policy: opts.policyRef(), ToolUseMeta: opts.ToolUseMeta,
	}
	line, err := transcript.Encode(&h)
	if err == nil {
		_, err = transcript.DecodeLine(line)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrInvalidOptions, err)
	}

	fsys := opts.FS
	if err := fsys.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("open bundle %q: %w", dir, ErrBundleExists)
		}
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	pack, err := createPack(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	f, err := fsys.OpenFile(filepath.Join(dir, transcript.TranscriptFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	if err := f.Lock(); err != nil {
		f.Close()
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	fail := func(what string, err error) (*Recorder, error) {
		f.Close()
		pack.close(false)
		return nil, fmt.Errorf("open bundle %q: %w: %s: %w", dir, ErrAuditUnavailable, what, err)
	}
	// The policy and lock bytes the header commits to are in the pack
	// before the header: the journal's fsync below follows the pack's.
	for _, b := range [][]byte{opts.PolicyFile, opts.LockFile} {
		if b != nil {
			if err := pack.put(b, canon.SHA256(b), nil); err != nil {
				return fail("retain the policy", err)
			}
		}
	}
	if opts.PolicyFile != nil || opts.LockFile != nil {
		if err := pack.sync(); err != nil {
			return fail("fsync the policy", err)
		}
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fail("write header", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync header", err)
	}
	// The new directory entries must survive a crash too.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := syncDir(fsys, d); err != nil {
			return fail("fsync directory", err)
		}
	}
	r := newRecorder(dir, opts, scope, srvDigest)
	r.rules = rules
	r.policy = engine
	r.j = newJournal(f, opts.Durability, 1, int64(len(line)+1))
	r.j.tap = opts.Lines
	r.j.tapLine(line) // the header: written before the journal took over
	r.setPack(pack)
	if opts.Durability != transcript.DurabilityStrict {
		r.wb = newWriteback(r.j.f, pack.f)
		r.j.wb, pack.wb = r.wb, r.wb
	}
	if opts.Durability == transcript.DurabilityBatch {
		r.j.startFlusher(opts.BatchInterval)
	}
	return r, nil
}

func newRecorder(dir string, opts Options, scope, srvDigest string) *Recorder {
	return &Recorder{
		dir: dir, opts: opts, fsys: opts.FS, ident: identity{scope: scope, server: srvDigest},
		hist:     newHistory(),
		proto:    protocolState{era: mcpwire.EraUnknown},
		bind:     bindings{snapshots: map[string]*transcript.SnapshotEvent{}, lastChanged: -1},
		replayed: replayState{attempts: map[string]*attemptState{}},
	}
}

// setPack gives the recorder its pack; the journal fsyncs it before itself,
// so a durable line's payload is durable.
func (r *Recorder) setPack(p *packStore) {
	r.pack = p
	r.j.preSync = p.sync
}

func syncDir(fsys FS, dir string) error {
	d, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// uuidV4 formats 16 random bytes as an RFC 9562 version 4 UUID.
func uuidV4(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func serverDigest(s transcript.Server) (string, error) {
	b, err := canon.Marshal(&s)
	if err != nil {
		return "", fmt.Errorf("%w: server: %w", ErrInvalidOptions, err)
	}
	return canon.SHA256(b), nil
}

// Scope returns the execution scope id.
func (r *Recorder) Scope() string { return r.ident.scope }

// Dir returns the bundle directory.
func (r *Recorder) Dir() string { return r.dir }

// Stats are counters for benchmarks and operators.
type Stats struct {
	Lines      int64 // lines in the journal
	Fsyncs     int64 // fsyncs of the journal by this Recorder
	PackFsyncs int64 // fsyncs of the payload pack (each before a journal fsync, when the pack grew)
}

// Stats returns the current counters.
func (r *Recorder) Stats() Stats {
	return Stats{Lines: r.j.lines(), Fsyncs: r.j.syncs.Load(), PackFsyncs: r.pack.syncs.Load()}
}

// begin admits one operation; end it with r.ops.Done().
func (r *Recorder) begin(recording bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if recording && r.sealOnly {
		return ErrSealOnly
	}
	r.ops.Add(1)
	return nil
}

func (r *Recorder) now() int64 { return max(0, r.opts.Clock().UnixMilli()) }

// auditFail makes a blob failure sticky like a journal failure.
func (r *Recorder) auditFail(err error) error {
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	r.j.fail(err)
	return r.j.err
}

// lineOf encodes v once the journal has given it its seq. The time is read
// there too, under the journal's lock, so at_ms never goes backwards in file
// order (given a monotonic clock).
func (r *Recorder) lineOf(set func(seq, atMs int64), v transcript.Event) lineBuilder {
	return func(dst []byte, s int64) ([]byte, error) { set(s, r.now()); return transcript.AppendEncode(dst, v) }
}

// Call is one tools/call request.
type Call struct {
	// Line is the exact request as forwarded, including its terminator
	// (LF, CRLF, or none at the end of a stream).
	Line []byte
	// Snapshot binds a recorded snapshot by id. Empty: the latest recorded
	// snapshot, or none.
	Snapshot string
	// NoSnapshot binds none, whatever was recorded (a recording of many
	// clients whose caller knows this one listed nothing).
	NoSnapshot bool
	// Message is the gate's reading of Line (mcpwire.Read), when the caller
	// has one: the recorder then does not parse Line again.
	Message *mcpwire.Message
	// Frame is the request's index among the client's frames, for a
	// recorder opened with FramesCommitted; nil otherwise.
	Frame *int64
	// Decide, optional, decides the call under the recorder's policy
	// (Options.PolicyFile, LockFile) given its attempt line as it will be
	// written (the tool it records, the snapshot it binds) and that
	// snapshot's declarations (nil when it binds none); its decision is
	// committed on the attempt line. It is called once, where the line
	// takes its place in the journal (so the binding it reads is the
	// line's), and must not call the recorder.
	Decide func(a *transcript.Attempt, decls *policy.Snapshot) *transcript.Decision
}

// Attempt records a tools/call attempt. In strict durability the attempt
// line is fsynced when Attempt returns: dispatch the request only after a
// nil error. Any error means nothing may be dispatched; ErrAuditUnavailable
// means the journal can no longer record (fail closed).
//
// A retry link is made when the request declares one (MetaRetryOf names the
// correlation id of an earlier attempt: caller_declared), when it re-issues
// a call answered input_required (params inputResponses/requestState and the
// same tool: continuation), or when it repeats the tool and canonical
// arguments of an attempt whose outcome is unknown or a transport failure
// (inferred). Use Retry to declare one from Go.
func (r *Recorder) Attempt(ctx context.Context, c Call) (*Handle, error) {
	return r.attempt(ctx, c, nil, "")
}

// Retry records an attempt that re-issues prev, with basis
// transcript.BasisCallerDeclared or transcript.BasisContinuation. prev keeps
// its own attempt and outcome: a retry never overwrites history.
func (r *Recorder) Retry(ctx context.Context, prev *Handle, basis string, c Call) (*Handle, error) {
	if prev == nil || prev.r != r {
		return nil, fmt.Errorf("retry: %w", ErrUnknownAttempt)
	}
	if basis != transcript.BasisCallerDeclared && basis != transcript.BasisContinuation {
		return nil, fmt.Errorf("%w: retry basis %q: want %s or %s", ErrInvalidInput, basis, transcript.BasisCallerDeclared, transcript.BasisContinuation)
	}
	return r.attempt(ctx, c, prev.st, basis)
}

// attemptWritten records the attempt line, written but not waited on for
// durability (pipeline.go: attempt waits, AttemptWritten hands the wait
// back).
func (r *Recorder) attemptWritten(ctx context.Context, c Call, prev *attemptState, basis string) (*Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	body, term := splitTerminator(c.Line)
	q, msg, err := parseRequest(body, c.Message, r.opts.ToolUseMeta...)
	if err != nil {
		return nil, err
	}
	if err := r.begin(true); err != nil {
		return nil, err
	}
	defer r.ops.Done()

	a := &transcript.Attempt{
		ExecutionScope: r.ident.scope, Tool: q.tool, ToolInvalid: q.toolBad, ArgsDigest: q.argsDigest, ArgsUnsupport: q.argsBad,
		RPCID: q.id, ServerDigest: r.ident.server, Terminator: term, Correlation: q.corr, Frame: c.Frame,
	}
	if c.Snapshot != "" && c.NoSnapshot {
		return nil, fmt.Errorf("%w: a call binds snapshot %q and none", ErrInvalidInput, c.Snapshot)
	}
	if c.Snapshot != "" {
		r.bind.mu.Lock()
		_, ok := r.bind.snapshots[c.Snapshot]
		r.bind.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: snapshot %q was not recorded", ErrInvalidInput, c.Snapshot)
		}
	}
	r.mu.Lock()
	r.ident.nextAttempt++
	st := &attemptState{id: "a" + strconv.FormatInt(r.ident.nextAttempt, 10), tool: q.tool, argsKey: q.argsKey(), idKey: q.idKey}
	a.AttemptID = st.id
	var link *attemptState
	switch {
	case prev != nil:
		link = prev
	case q.retryOf != "" && r.hist.byCorr[q.retryOf] != nil:
		link, basis = r.hist.byCorr[q.retryOf], transcript.BasisCallerDeclared
	case q.toolUseID != "" && r.hist.byUse[q.toolUseID] != nil:
		link, basis = r.hist.byUse[q.toolUseID], transcript.BasisCallerToolUse
	case q.continues && q.toolBad == "" && r.hist.cont[q.tool] != nil:
		link, basis = r.hist.cont[q.tool], transcript.BasisContinuation
	case st.argsKey != "" && r.hist.infer[st.argsKey] != nil:
		link, basis = r.hist.infer[st.argsKey], transcript.BasisInferred
	}
	if link != nil {
		a.RetryOf, a.RetryBasis = link.id, basis
		if r.hist.infer[link.argsKey] == link {
			delete(r.hist.infer, link.argsKey)
		}
		if basis == transcript.BasisContinuation && r.hist.cont[link.tool] == link {
			delete(r.hist.cont, link.tool)
		}
	}
	a.Protocol = r.protocolOf(q)
	r.hist.add(st)
	if q.corrID != "" {
		r.hist.byCorr[q.corrID] = st
	}
	if q.toolUseID != "" {
		r.hist.byUse[q.toolUseID] = st
	}
	if q.id.Present {
		r.hist.byRPCID[q.idKey] = st
	}
	r.mu.Unlock()

	// The request bytes go in before the line that commits to them; its
	// salt salts the arguments digest too.
	var salt []byte
	if a.Request, salt, err = r.saltedPayload(body, msg, r.opts.Retention == transcript.RetainFull); err != nil {
		return nil, r.auditFail(err)
	}
	a.ArgsDigest = transcript.SaltedArgsDigest(salt, q.argsDigest)
	var decls *policy.Snapshot
	seq, err := r.j.appendWritten(r.lineOf(func(s, at int64) {
		a.Seq, a.AtMs = s, at
		if c.NoSnapshot {
			a.Snapshot = transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot}
		} else {
			a.Snapshot, decls = r.snapshotRef(c.Snapshot, c.Decide != nil)
		}
		if c.Decide != nil {
			a.Decision = c.Decide(a, decls)
			st.decidedDeny = a.Decision != nil && a.Decision.Action == policyDeny
			if a.Decision != nil && a.Decision.Action == policy.Approve {
				st.approval = approvalPending
				st.approvalDigest = approval.ArgsDigestOf(a.ArgsDigest, a.Request.Digest, a.Request.Original)
			}
		}
	}, a))
	if err != nil {
		return nil, err
	}
	st.seq = seq
	r.ckpt.Load().noteAttempt()
	return &Handle{r: r, st: st}, nil
}

// snapshotRef binds the named snapshot, or the latest, or says there is
// none; with decls, it returns that snapshot's declarations too (nil when
// none were kept). Called from a line builder (under the journal's lock).
func (r *Recorder) snapshotRef(id string, decls bool) (transcript.SnapshotRef, *policy.Snapshot) {
	r.bind.mu.Lock()
	defer r.bind.mu.Unlock()
	s := r.bind.current
	if id != "" {
		s = r.bind.snapshots[id]
	}
	if s == nil {
		return transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot}, nil
	}
	var d *policy.Snapshot
	if decls {
		// The current snapshot's are kept beside it: most calls bind it.
		if c := &r.bind.currentDecls; c.ev == s {
			d = c.decls
		} else if d = r.bind.decls[s.ManifestDigest]; s == r.bind.current {
			*c = declsOf{ev: s, decls: d}
		}
	}
	return transcript.SnapshotRef{SnapshotID: s.SnapshotID, ManifestDigest: s.ManifestDigest, Complete: s.Complete, ListChangedSince: r.bind.lastChanged > s.Seq}, d
}

// protocolOf decides the revision an attempt was sent under: the request's
// own _meta protocolVersion (modern), else the legacy negotiated version.
// Called with mu held.
func (r *Recorder) protocolOf(q *request) transcript.AttemptProto {
	switch {
	case q.protoState == transcript.ProtoPresent:
		return transcript.AttemptProto{Era: mcpwire.EraModern, State: transcript.ProtoPresent, Value: q.protoValue}
	case q.protoState == transcript.ProtoAbsent && r.proto.era == mcpwire.EraLegacy && r.proto.legacyVer != "":
		return transcript.AttemptProto{Era: mcpwire.EraLegacy, State: transcript.ProtoNegotiated, Value: r.proto.legacyVer}
	}
	return transcript.AttemptProto{Era: r.proto.era, State: q.protoState}
}

// Response records the response line (exact, with its terminator) to the
// attempt. In strict durability it is fsynced when Response returns:
// deliver the response only after a nil error. After a Timeout or
// CancelSent it is recorded as a late_response; the earlier observation
// stays.
func (h *Handle) Response(line []byte) error {
	return h.observe(transcript.ObsResponse, Framed{Line: line, Index: -1}, "")
}

// Framed is a frame as a proxy read it: the exact line, the gate's reading
// of it (nil: the recorder parses Line) and its index among its
// direction's frames (with Options.FramesCommitted; Index < 0 otherwise).
type Framed struct {
	Line    []byte
	Message *mcpwire.Message
	Index   int64
}

func (f Framed) frame() *int64 {
	if f.Line == nil || f.Index < 0 {
		return nil
	}
	i := f.Index
	return &i
}

// ResponseFrame is Response for a proxy: the gate's reading of the line and
// its frame index are recorded with it.
func (h *Handle) ResponseFrame(f Framed) error {
	return h.observe(transcript.ObsResponse, f, "")
}

// LateResponse records a response that arrived after a Timeout or
// CancelSent; it fails with ErrObservation when neither came first.
func (h *Handle) LateResponse(line []byte) error {
	return h.observe(transcript.ObsLateResponse, Framed{Line: line, Index: -1}, "")
}

// TransportFailure records that the transport failed with the call in
// flight (the server exited, the stream broke). The outcome stays unknown:
// it is not evidence that the tool did not run.
func (h *Handle) TransportFailure(detail string) error {
	return h.observe(transcript.ObsTransportFailure, Framed{}, detail)
}

// Timeout records that no response came within the call timeout. The
// outcome is unknown; a late response may still be recorded.
func (h *Handle) Timeout() error { return h.observe(transcript.ObsTimeout, Framed{}, "") }

// Denied records that the call was denied by the policy or lock its
// attempt's decision names (Call.Decide), in enforce mode: it was not
// forwarded and never will be. It is the attempt's terminal observation.
func (h *Handle) Denied() error { return h.observe(transcript.ObsDenied, Framed{}, "") }

// CancelSent records that the client cancelled the call. The outcome is
// unknown; a late response may still be recorded.
func (h *Handle) CancelSent() error { return h.observe(transcript.ObsCancelSent, Framed{}, "") }

// observeWritten records an observation line, written but not waited on
// for durability; it returns the line's seq (pipeline.go).
func (h *Handle) observeWritten(kind string, f Framed, detail string) (int64, error) {
	line := f.Line
	r, st := h.r, h.st
	if err := r.begin(false); err != nil {
		return -1, err
	}
	defer r.ops.Done()
	o := &transcript.Observation{AttemptID: st.id, Kind: kind, Detail: transcript.Detail(detail), Basis: transcript.BasisProducer}
	var body []byte
	var resp response
	msg := f.Message
	if line != nil {
		body, o.Terminator = splitTerminator(line)
		if msg == nil {
			// One parse serves the facts and the redaction. Bytes that are
			// not JSON have no facts (DeriveResponse's parse is this one),
			// and redaction reads them as bytes.
			msg, _ = parseLoose(body)
		}
		if msg != nil && len(body) <= transcript.MaxDeriveBytes {
			// Longer bytes derive no facts (transcript.DeriveResponse):
			// the line claims none, as a verifier re-reading them finds.
			resp = parseResponse(body, msg)
		}
		o.ResultType, o.IsError, o.ErrorCode = resp.resultType, resp.isError, resp.errorCode
		o.Frame = f.frame()
	}

	r.mu.Lock()
	if err := r.transition(st, o, resp); err != nil {
		r.mu.Unlock()
		return -1, fmt.Errorf("attempt %s: %w", st.id, err)
	}
	r.mu.Unlock()

	if body != nil {
		p, err := r.payload(body, msg, r.opts.Retention == transcript.RetainFull)
		if err != nil {
			return -1, r.auditFail(err)
		}
		o.Response = &p
	}
	return r.j.appendWritten(r.lineOf(func(s, at int64) { o.Seq, o.AtMs = s, at }, o))
}

// transition checks an observation against the attempt's history and
// updates it (before the line is written: a failed append is sticky, so an
// optimistic update is never observed). Called with mu held.
func (r *Recorder) transition(st *attemptState, o *transcript.Observation, resp response) error {
	if st.resolved {
		return fmt.Errorf("%w: already resolved unknown", ErrObservation)
	}
	if st.status == stResponse || st.status == stTransport || st.status == stDenied {
		return fmt.Errorf("%w: it already has a %s", ErrObservation, map[int]string{stResponse: "response", stTransport: "transport failure", stDenied: "denial"}[st.status])
	}
	late := st.timedOut || st.canceled
	switch o.Kind {
	case transcript.ObsResponse, transcript.ObsLateResponse:
		if o.Kind == transcript.ObsLateResponse && !late {
			return fmt.Errorf("%w: a late response needs a timeout or cancellation before it", ErrObservation)
		}
		if late {
			o.Kind = transcript.ObsLateResponse
		}
		r.hist.set(st, stResponse)
		r.settled(st)
		if r.hist.infer[st.argsKey] == st {
			delete(r.hist.infer, st.argsKey)
		}
		if resp.resultType == "input_required" && st.tool != "" {
			r.hist.cont[st.tool] = st
		}
		return nil
	case transcript.ObsTransportFailure:
		r.hist.set(st, stTransport)
		r.settled(st)
	case transcript.ObsDenied:
		if st.status != stInFlight || !st.decidedDeny && st.approval != approvalWithheld {
			return fmt.Errorf("%w: only an attempt in flight whose decision is deny can be denied", ErrObservation)
		}
		r.hist.set(st, stDenied)
		r.settled(st)
		return nil
	case transcript.ObsTimeout:
		if st.timedOut {
			return fmt.Errorf("%w: already timed out", ErrObservation)
		}
		st.timedOut = true
		r.hist.set(st, stUnknown)
	case transcript.ObsCancelSent:
		if st.canceled {
			return fmt.Errorf("%w: already cancelled", ErrObservation)
		}
		st.canceled = true
		r.hist.set(st, stUnknown)
	}
	if st.argsKey != "" {
		r.hist.infer[st.argsKey] = st
	}
	return nil
}

// settled forgets what only an attempt still waiting for its answer needs:
// a notifications/cancelled names attempts without a response or transport
// failure. Called with mu held.
func (r *Recorder) settled(st *attemptState) {
	if st.idKey != "" && r.hist.byRPCID[st.idKey] == st {
		delete(r.hist.byRPCID, st.idKey)
	}
}

// Snapshot is a finished declaration snapshot (from package snapshot's
// collector, passed as plain values).
type Snapshot struct {
	Manifest         []byte // canonical manifest bytes
	Digest           string // canon.SHA256(Manifest): the snapshot commitment
	Complete         bool
	IncompleteReason string // required when !Complete, empty otherwise
	Tools, Pages     int64
	Reuse            bool     // a cached capture reused; the manifest names the original and the policy
	Blobs            [][]byte // the exact page bytes the manifest commits to (requests and responses)
}

// RecordSnapshot records a snapshot and makes it the one later attempts
// bind. The manifest and every page are stored whatever the retention mode.
// It returns the snapshot id.
func (r *Recorder) RecordSnapshot(s Snapshot) (string, error) {
	switch {
	case s.Digest != canon.SHA256(s.Manifest):
		return "", fmt.Errorf("%w: snapshot digest is not the SHA-256 of the manifest bytes", ErrInvalidInput)
	case s.Complete == (s.IncompleteReason != ""):
		return "", fmt.Errorf("%w: an incomplete snapshot needs its reason, a complete one has none", ErrInvalidInput)
	case len(s.IncompleteReason) > transcript.MaxReportedBytes || !utf8.ValidString(s.IncompleteReason):
		return "", fmt.Errorf("%w: incomplete reason longer than %d bytes or not UTF-8", ErrInvalidInput, transcript.MaxReportedBytes)
	case s.Tools < 0 || s.Pages < 0:
		return "", fmt.Errorf("%w: negative tool or page count", ErrInvalidInput)
	}
	if err := r.begin(true); err != nil {
		return "", err
	}
	defer r.ops.Done()
	for _, b := range append([][]byte{s.Manifest}, s.Blobs...) {
		if err := r.pack.put(b, canon.SHA256(b), nil); err != nil {
			return "", r.auditFail(err)
		}
	}
	r.noteDeclarations(s)
	r.mu.Lock()
	r.ident.nextSnap++
	ev := &transcript.SnapshotEvent{
		SnapshotID: "s" + strconv.FormatInt(r.ident.nextSnap, 10), ManifestDigest: s.Digest, Complete: s.Complete, IncompleteReason: s.IncompleteReason,
		Tools: s.Tools, Pages: s.Pages, Reuse: s.Reuse,
	}
	r.mu.Unlock()
	_, err := r.j.append(r.lineOf(func(q, at int64) {
		ev.Seq, ev.AtMs = q, at
		// The snapshot is bound from its place in the journal on, however
		// soon its durable wait returns.
		r.bind.mu.Lock()
		r.bind.snapshots[ev.SnapshotID] = ev
		r.bind.current = ev
		r.bind.mu.Unlock()
	}, ev))
	if err != nil {
		return "", err
	}
	return ev.SnapshotID, nil
}

// Protocol is a protocol observation: the era and revision in use and the
// server's self-description as reported (not authenticated).
type Protocol struct {
	Era           mcpwire.Era
	Version       string
	Source        string // transcript.SourceInitialize / SourceDiscover / SourceRequestMeta
	ServerName    string
	ServerVersion string
	Line          []byte // the exact message observed, optional
}

// RecordProtocol records a protocol observation. A legacy observation's
// version becomes the negotiated revision of later attempts whose request
// carries none.
func (r *Recorder) RecordProtocol(p Protocol) error {
	switch p.Era {
	case mcpwire.EraModern, mcpwire.EraLegacy, mcpwire.EraUnknown:
	default:
		return fmt.Errorf("%w: era %q", ErrInvalidInput, p.Era)
	}
	switch p.Source {
	case transcript.SourceInitialize, transcript.SourceDiscover, transcript.SourceRequestMeta:
	default:
		return fmt.Errorf("%w: source %q", ErrInvalidInput, p.Source)
	}
	if err := r.begin(true); err != nil {
		return err
	}
	defer r.ops.Done()
	reported := func(s string) string {
		if len(s) > transcript.MaxReportedBytes || !utf8.ValidString(s) {
			return "" // left out, never cut or coerced: the payload digest commits to it
		}
		return s
	}
	ev := &transcript.Protocol{Era: p.Era, Version: reported(p.Version), Source: p.Source,
		ServerName: reported(p.ServerName), ServerVer: reported(p.ServerVersion)}
	if p.Line != nil {
		body, _ := splitTerminator(p.Line)
		pl, err := r.payload(body, nil, r.opts.Retention == transcript.RetainFull)
		if err != nil {
			return r.auditFail(err)
		}
		ev.Payload = &pl
	}
	r.mu.Lock()
	switch {
	case p.Era == mcpwire.EraLegacy:
		r.proto.era, r.proto.legacyVer = p.Era, ev.Version
	case p.Era == mcpwire.EraModern:
		r.proto.era = p.Era
	}
	r.mu.Unlock()
	_, err := r.j.append(r.lineOf(func(s, at int64) { ev.Seq, ev.AtMs = s, at }, ev))
	return err
}

// Notification is a notification line observed in either direction.
type Notification struct {
	Line      []byte // the exact line
	Direction string // transcript.ServerToClient or ClientToServer
	// Message is the gate's reading of Line, when the caller has one.
	Message *mcpwire.Message
	// Frame is the notification's index among its direction's frames, for
	// a recorder opened with FramesCommitted; nil otherwise.
	Frame *int64
}

// RecordNotification records a notification. A notifications/cancelled
// names the attempt its requestId matches (the latest attempt with that
// exact id text still without a response or transport failure); a
// notifications/tools/list_changed marks the current snapshot as possibly
// stale for later attempts (SnapshotRef.ListChangedSince).
func (r *Recorder) RecordNotification(n Notification) error {
	if n.Direction != transcript.ServerToClient && n.Direction != transcript.ClientToServer {
		return fmt.Errorf("%w: direction %q", ErrInvalidInput, n.Direction)
	}
	body, _ := splitTerminator(n.Line)
	msg, err := parseNotification(body, n.Message)
	if err != nil {
		return fmt.Errorf("%w: notification: %w", ErrInvalidInput, err)
	}
	if err := r.begin(true); err != nil {
		return err
	}
	defer r.ops.Done()
	ev := &transcript.Notification{Method: msg.method, Direction: n.Direction, RequestID: msg.requestID, Frame: n.Frame}
	if ev.Payload, err = r.payload(body, n.Message, r.opts.Retention == transcript.RetainFull); err != nil {
		return r.auditFail(err)
	}
	r.mu.Lock()
	if msg.requestID != nil {
		if st := r.hist.byRPCID[msg.idKey]; st != nil && st.status != stResponse && st.status != stTransport {
			ev.AttemptID = st.id
		}
	}
	r.mu.Unlock()
	changed := msg.method == mcpwire.NotifyToolsListChanged
	build := r.lineOf(func(s, at int64) {
		ev.Seq, ev.AtMs = s, at
		if changed {
			r.bind.mu.Lock()
			r.bind.lastChanged = max(r.bind.lastChanged, s)
			r.bind.mu.Unlock()
		}
	}, ev)
	_, err = r.j.append(build)
	return err
}

// Close flushes the journal (fsyncing it and the pack unless durability is
// none), releases the lock and leaves the bundle unsealed: Reopen and Seal
// later, or Seal instead of Close. Attempts still without a terminal
// observation stay so until then.
func (r *Recorder) Close() error {
	r.ckpt.Load().stop()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.ops.Wait()
	r.wb.stop()
	sync := r.j.mode != transcript.DurabilityNone
	err := r.j.close(sync)
	if perr := r.pack.close(sync); err == nil && perr != nil {
		err = fmt.Errorf("%w: %w", ErrAuditUnavailable, perr)
	}
	return err
}

const policyDeny = policy.Deny

// policyEngine parses and compiles the policy and lock: a bad one refuses
// to open, naming the rule and its place.
func (o Options) policyEngine() (*policy.Engine, error) {
	switch o.PolicyMode {
	case "", policy.ModeEnforce, policy.ModeAudit:
	default:
		return nil, fmt.Errorf("%w: policy mode %q: want enforce or audit", ErrInvalidOptions, o.PolicyMode)
	}
	if o.PolicyFile == nil && o.LockFile == nil {
		if o.PolicyMode != "" {
			return nil, fmt.Errorf("%w: a policy mode without a policy or lock", ErrInvalidOptions)
		}
		return nil, nil
	}
	var p *policy.Policy
	var l *policy.Lock
	var err error
	if o.PolicyFile != nil {
		if p, err = policy.Parse(o.PolicyFile); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
	}
	if o.LockFile != nil {
		if l, err = policy.ParseLock(o.LockFile); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
	}
	return policy.NewEngine(p, l), nil
}

// Policy returns the engine calls are decided under (nil without a policy
// or lock) and whether it is in audit (shadow) mode. The recording session
// decides with it (Call.Decide).
func (r *Recorder) Policy() (engine *policy.Engine, audit bool) {
	return r.policy, r.opts.PolicyMode == policy.ModeAudit
}

// policyRef is the header's commitment to the policy and lock, or nil.
func (o Options) policyRef() *transcript.PolicyRef {
	if o.PolicyFile == nil && o.LockFile == nil {
		return nil
	}
	p := &transcript.PolicyRef{Mode: o.PolicyMode}
	if p.Mode == "" {
		p.Mode = policy.ModeEnforce
	}
	if o.PolicyFile != nil {
		p.PolicyDigest, p.PolicyLength = canon.SHA256(o.PolicyFile), int64(len(o.PolicyFile))
	}
	if o.LockFile != nil {
		p.LockDigest, p.LockLength = canon.SHA256(o.LockFile), int64(len(o.LockFile))
	}
	return p
}

// noteDeclarations keeps a snapshot's declarations for the decisions of
// the attempts that bind it (with a policy only); before its line, so an
// attempt that binds it finds them.
func (r *Recorder) noteDeclarations(s Snapshot) {
	if r.policy == nil {
		return
	}
	m, err := snapshot.ParseManifest(s.Manifest)
	if err != nil {
		return // bound, it decides as a snapshot without declarations; verify reads the same manifest
	}
	blobs := make(map[string][]byte, len(s.Blobs))
	for _, b := range s.Blobs {
		blobs[canon.SHA256(b)] = b
	}
	d := policy.NewSnapshot(m, func(digest string) ([]byte, error) {
		if b, ok := blobs[digest]; ok {
			return b, nil
		}
		return nil, fs.ErrNotExist
	})
	r.bind.mu.Lock()
	defer r.bind.mu.Unlock()
	if r.bind.decls == nil {
		r.bind.decls = map[string]*policy.Snapshot{}
	}
	r.bind.decls[s.Digest] = d
	r.bind.currentDecls = declsOf{}
}
