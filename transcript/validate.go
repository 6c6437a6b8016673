package transcript

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/mcpwire"
)

// invalid is a validation failure before the line's seq is attached.
type invalid struct {
	code   string
	detail string
}

func (v *invalid) withSeq(seq int64) *LineError { return lineErr(seq, v.code, v.detail, nil) }

func bad(format string, args ...any) *invalid {
	return &invalid{code: CodeInvalidMember, detail: fmt.Sprintf(format, args...)}
}

// validate checks what the Go types cannot: enumerations, digests, bounds
// and the rules that tie members together (spec/transcript.md).
func validate(ev Event) *invalid { return ev.validate() }

func (e *SessionEvent) validate() *invalid {
	return first(event(e.Type, typeSession, e.Seq, e.AtMs), oneOf("event", e.Event, SessionClientGone), short("detail", e.Detail, maxDetailBytes))
}

func oneOf(name, v string, allowed ...string) *invalid {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return bad("%s %q is not one of %q", name, bounded(v), allowed)
}

func digest(name, v string) *invalid {
	if _, err := canon.ParseDigest(v); err != nil {
		return bad("%s: %v", name, err)
	}
	return nil
}

func optDigest(name, v string) *invalid {
	if v == "" {
		return nil
	}
	return digest(name, v)
}

func ident(name, v string) *invalid {
	if v == "" || len(v) > maxIDBytes {
		return bad("%s must be 1 to %d bytes", name, maxIDBytes)
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] >= 0x7f {
			return bad("%s must be printable ASCII without spaces", name)
		}
	}
	return nil
}

func short(name, v string, max int) *invalid {
	if len(v) > max {
		return bad("%s longer than %d bytes", name, max)
	}
	return nil
}

func nonneg(name string, v int64) *invalid {
	if v < 0 {
		return bad("%s is negative", name)
	}
	return nil
}

func first(checks ...*invalid) *invalid {
	for _, c := range checks {
		if c != nil {
			return c
		}
	}
	return nil
}

// event checks the members every non-header line has.
func event(typ, want string, seq, atMs int64) *invalid {
	if typ != want {
		return bad("type %q, want %q", typ, want)
	}
	if seq < 1 {
		return bad("seq %d: only the header is line 0", seq)
	}
	return nonneg("at_ms", atMs)
}

func (h *Header) validate() *invalid {
	if h.Type != typeHeader {
		return bad("type %q", h.Type)
	}
	if h.Seq != 0 {
		return bad("header seq %d, want 0", h.Seq)
	}
	unsupported := func(name, got, want string) *invalid {
		if got != want {
			return &invalid{code: CodeUnsupportedFormat, detail: fmt.Sprintf("%s %q, this reader supports %q", name, bounded(got), want)}
		}
		return nil
	}
	return first(
		h.validateFormat(),
		unsupported("profile", h.Profile, Profile),
		unsupported("merkle", h.Merkle, MerkleAlg),
		unsupported("canonicalization.lines", h.Canonicalization.Lines, canon.PolicyV02ID),
		unsupported("canonicalization.declarations", h.Canonicalization.Declarations, canon.PolicyMCPDeclID),
		ident("execution_scope", h.ExecutionScope),
		h.Producer.validate(),
		h.Server.validate(),
		oneOf("retention", h.Retention, RetainFull, RetainDigest),
		oneOf("durability", h.Durability, DurabilityStrict, DurabilityBatch, DurabilityNone),
		h.Limits.validate(h.Durability),
		h.Policy.validate(),
		nonneg("started_at_ms", h.StartedAtMs),
		validToolUseMeta(h.ToolUseMeta),
	)
}

// maxToolUseMeta bounds Header.ToolUseMeta.
const maxToolUseMeta = 8

// validToolUseMeta: at most maxToolUseMeta keys, none repeated, none a
// key the derivation reads already, each 1 to 128 bytes of letters,
// digits and . _ - / (a _meta key's characters, spec/transcript.md).
func validToolUseMeta(keys []string) *invalid {
	if keys == nil {
		return nil
	}
	if len(keys) == 0 || len(keys) > maxToolUseMeta {
		return bad("tool_use_meta has %d keys, want 1 to %d", len(keys), maxToolUseMeta)
	}
	for i, k := range keys {
		if e := validMetaKey(k); e != "" {
			return bad("tool_use_meta[%d]: %s", i, e)
		}
		if slices.Contains(keys[:i], k) || slices.Contains(metaToolUseIDs, k) {
			return bad("tool_use_meta[%d] %q is given twice, or is a key read already", i, k)
		}
	}
	return nil
}

// validMetaKey says why k is not a _meta key a producer may be told to
// read the agent host's tool-use id under ("" when it is one).
func validMetaKey(k string) string {
	if len(k) == 0 || len(k) > 128 {
		return "a key of " + strconv.Itoa(len(k)) + " bytes, want 1 to 128"
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return "byte " + strconv.Itoa(i) + " is not a letter, digit, '.', '_', '-' or '/'"
		}
	}
	return ""
}

func (h *Header) validateFormat() *invalid {
	switch h.Format {
	case Format, FormatV3:
		if h.Server.ArgsDigest != "" {
			return bad("server.args_digest is not a %s member: the argv is not committed by an unsalted digest", Format)
		}
		if r := h.Redaction; r != nil {
			return first(ident("redaction.policy", r.Policy), nonneg("redaction.patterns", r.Patterns), nonneg("redaction.pointers", r.Pointers))
		}
		return nil
	case formatV2, formatV1:
		if h.Redaction != nil {
			return bad("redaction is a %s member", Format)
		}
		if h.Server.ArgsDigest == "" && h.Server.Argc != 0 {
			return bad("server.argc %d without server.args_digest", h.Server.Argc)
		}
		if h.FramesCommitted && h.Format == formatV1 {
			return bad("frames_committed is a %s member", formatV2)
		}
		return nil
	}
	return &invalid{code: CodeUnsupportedFormat, detail: fmt.Sprintf("format %q, this reader supports %q, %q, %q and %q", bounded(h.Format), Format, FormatV3, formatV2, formatV1)}
}

func frameIndex(v *int64) *invalid {
	if v != nil {
		return nonneg("frame", *v)
	}
	return nil
}

func (f *Frame) validate() *invalid {
	e := first(
		event(f.Type, typeFrame, f.Seq, f.AtMs),
		oneOf("direction", f.Direction, ServerToClient, ClientToServer),
		nonneg("index", f.Index),
		oneOf("disposition", f.Disposition, FrameForwarded, FrameRefused, FrameWithheld),
		oneOf("kind", f.Kind, FrameRequest, frameNotification, FrameResponse, FrameUnread),
		short("method", f.Method, MaxReportedBytes),
		short("rule", f.Rule, MaxReportedBytes),
		f.Payload.validate("payload"),
		oneOf("terminator", f.Terminator, mcpwire.TermLF, mcpwire.TermCRLF, mcpwire.TermNone),
	)
	if e != nil {
		return e
	}
	switch {
	case f.Disposition == FrameWithheld && f.Direction != ServerToClient && f.Kind != FrameResponse:
		return bad("only server frames, and a client's answer to the recorder's own request, are withheld")
	case f.Kind == FrameUnread && f.Rule == "":
		return bad("an unread frame names the rule it broke")
	case f.Kind != FrameUnread && f.Rule != "" && (f.Direction != ServerToClient || f.Disposition != FrameRefused):
		return bad("a frame the gate read has a rule only when it is a server frame refused by mediation")
	case f.Method != "" && f.Kind != FrameRequest && f.Kind != frameNotification:
		return bad("method belongs to requests and notifications")
	case f.RPCID != nil && f.Kind != FrameRequest && f.Kind != FrameResponse:
		return bad("jsonrpc_id belongs to requests and responses")
	}
	if f.RPCID != nil {
		if e := f.RPCID.validate(); e != nil {
			return e
		}
		if !f.RPCID.Present {
			return bad("jsonrpc_id of a frame is present when given")
		}
	}
	if f.AttemptID != "" {
		return ident("attempt_id", f.AttemptID)
	}
	return nil
}

func (p *Producer) validate() *invalid {
	if p.Name == "" {
		return bad("producer.name is empty")
	}
	return first(
		short("producer.name", p.Name, MaxReportedBytes),
		short("producer.version", p.Version, MaxReportedBytes),
		short("producer.key_thumbprint", p.KeyThumbprint, MaxReportedBytes),
		optDigest("producer.executable_sha256", p.InstanceDigest),
	)
}

func (s *Server) validate() *invalid {
	if s.Transport == "" {
		return bad("server.transport is empty")
	}
	return first(
		short("server.transport", s.Transport, MaxReportedBytes),
		short("server.executable", s.Executable, MaxPathBytes),
		optDigest("server.executable_sha256", s.ExecutableSHA256),
		optDigest("server.args_digest", s.ArgsDigest),
		nonneg("server.argc", s.Argc),
		short("server.name", s.Name, MaxReportedBytes),
		short("server.url", s.URL, MaxPathBytes),
		s.Launch.validate(),
	)
}

func (l *Launch) validate() *invalid {
	if l == nil {
		return nil
	}
	if l.Launcher == "" {
		return bad("server.launch.launcher is empty")
	}
	return first(
		short("server.launch.launcher", l.Launcher, MaxReportedBytes),
		short("server.launch.package", l.Package, MaxPathBytes),
		short("server.launch.version", l.Version, MaxReportedBytes),
		short("server.launch.script", l.Script, MaxPathBytes),
		optDigest("server.launch.script_sha256", l.ScriptSHA256),
		short("server.launch.image", l.Image, MaxPathBytes),
	)
}

func (l *HeaderLimits) validate(durability string) *invalid {
	if (durability == DurabilityBatch) != (l.BatchIntervalMs > 0) {
		return bad("limits.batch_interval_ms is present iff durability is batch")
	}
	return first(
		nonneg("limits.max_frame_bytes", l.MaxFrameBytes),
		nonneg("limits.max_snapshot_pages", l.MaxSnapshotPages),
		nonneg("limits.max_page_bytes", l.MaxPageBytes),
		nonneg("limits.max_snapshot_bytes", l.MaxSnapshotBytes),
		nonneg("limits.call_timeout_ms", l.CallTimeoutMs),
	)
}

func (p *Payload) validate(name string) *invalid {
	if p.Retained && p.OverLimit {
		return bad("%s: an over-limit payload is not retained", name)
	}
	switch {
	case len(p.Redactions) > 0 && (!p.Retained || p.Original == ""):
		return bad("%s: redactions describe a retained copy, with the original's commitment", name)
	case p.Original != "" && len(p.Redactions) == 0:
		return bad("%s: original without redactions", name)
	case len(p.Redactions) > MaxRedactions:
		return bad("%s: %d redactions, more than %d", name, len(p.Redactions), MaxRedactions)
	case p.Withheld != "" && (p.Retained || p.OverLimit || p.Withheld != WithheldUnredactable):
		return bad("%s: withheld %q: only %q, for bytes neither retained nor over the limit", name, bounded(p.Withheld), WithheldUnredactable)
	}
	for i, r := range p.Redactions {
		if r.Pointer != "" && r.Pointer[0] != '/' || len(r.Pointer) > MaxRedactionPointer || !utf8.ValidString(r.Pointer) {
			return bad("%s.redactions[%d]: pointer is not an RFC 6901 pointer of at most %d bytes", name, i, MaxRedactionPointer)
		}
		if i > 0 && r.Pointer < p.Redactions[i-1].Pointer {
			return bad("%s.redactions: not sorted by pointer", name)
		}
		if e := ident(fmt.Sprintf("%s.redactions[%d].class", name, i), r.Class); e != nil {
			return e
		}
	}
	return first(digest(name+".digest", p.Digest), nonneg(name+".length", p.Length), optDigest(name+".original", p.Original))
}

func (id *JSONRPCID) validate() *invalid {
	if !id.Present {
		if id.Kind != "" || id.Text != "" || id.Digest != "" {
			return bad("jsonrpc_id: an absent id has no kind, text or digest")
		}
		return nil
	}
	if e := oneOf("jsonrpc_id.kind", id.Kind, IDString, IDNumber, IDNull, IDOther); e != nil {
		return e
	}
	switch {
	case id.Text != "" && id.Digest != "":
		return bad("jsonrpc_id: text and digest are exclusive")
	case id.Text != "":
		return short("jsonrpc_id.text", id.Text, MaxRPCIDTextBytes)
	case id.Digest != "":
		return digest("jsonrpc_id.digest", id.Digest)
	}
	return bad("jsonrpc_id: a present id has its text or its digest")
}

func (p *Protocol) validate() *invalid {
	e := first(
		event(p.Type, typeProtocol, p.Seq, p.AtMs),
		oneOf("era", string(p.Era), string(mcpwire.EraModern), string(mcpwire.EraLegacy), string(mcpwire.EraUnknown)),
		oneOf("source", p.Source, SourceInitialize, SourceDiscover, SourceRequestMeta),
		short("version", p.Version, MaxReportedBytes),
		short("server_name", p.ServerName, MaxReportedBytes),
		short("server_version", p.ServerVer, MaxReportedBytes),
	)
	if e == nil && p.Payload != nil {
		e = p.Payload.validate("payload")
	}
	return e
}

func (s *SnapshotEvent) validate() *invalid {
	if s.Complete == (s.IncompleteReason != "") {
		return bad("incomplete_reason is present iff complete is false")
	}
	return first(
		event(s.Type, typeSnapshot, s.Seq, s.AtMs),
		ident("snapshot_id", s.SnapshotID),
		digest("manifest_digest", s.ManifestDigest),
		short("incomplete_reason", s.IncompleteReason, MaxReportedBytes),
		nonneg("tools", s.Tools),
		nonneg("pages", s.Pages),
	)
}

func (n *Notification) validate() *invalid {
	if n.Method == "" {
		return bad("method is empty")
	}
	if n.AttemptID != "" && n.RequestID == nil {
		return bad("attempt_id without request_id")
	}
	e := first(
		event(n.Type, typeNotification, n.Seq, n.AtMs),
		short("method", n.Method, MaxReportedBytes),
		oneOf("direction", n.Direction, ServerToClient, ClientToServer),
		n.Payload.validate("payload"),
		frameIndex(n.Frame),
	)
	if e == nil && n.RequestID != nil {
		e = n.RequestID.validate()
	}
	if e == nil && n.AttemptID != "" {
		e = ident("attempt_id", n.AttemptID)
	}
	return e
}

func (a *Attempt) validate() *invalid {
	e := first(
		event(a.Type, typeAttempt, a.Seq, a.AtMs),
		ident("execution_scope", a.ExecutionScope),
		ident("attempt_id", a.AttemptID),
		a.validateTool(),
		optDigest("arguments_digest", a.ArgsDigest),
		short("arguments_unsupported", a.ArgsUnsupport, MaxReportedBytes),
		a.RPCID.validate(),
		a.Protocol.validate(),
		digest("server", a.ServerDigest),
		a.Request.validate("request"),
		oneOf("terminator", a.Terminator, mcpwire.TermLF, mcpwire.TermCRLF, mcpwire.TermNone),
		a.Snapshot.validate(),
		a.Correlation.validate(),
		frameIndex(a.Frame),
		a.Decision.validate(),
	)
	if e != nil {
		return e
	}
	if a.ArgsDigest != "" && a.ArgsUnsupport != "" {
		return bad("arguments_digest and arguments_unsupported are exclusive")
	}
	if (a.RetryOf == "") != (a.RetryBasis == "") {
		return bad("retry_of and retry_basis go together")
	}
	if a.RetryOf != "" {
		if a.RetryOf == a.AttemptID {
			return bad("an attempt cannot be a retry of itself")
		}
		return first(ident("retry_of", a.RetryOf), oneOf("retry_basis", a.RetryBasis, BasisCallerDeclared, BasisInferred, BasisContinuation, BasisCallerToolUse))
	}
	return nil
}

func (a *Attempt) validateTool() *invalid {
	if a.ToolInvalid != "" {
		if a.Tool != "" {
			return bad("tool is empty when tool_invalid is set")
		}
		return oneOf("tool_invalid", a.ToolInvalid, toolAbsent, toolNotString, toolTooLong)
	}
	return short("tool", a.Tool, maxToolNameBytes)
}

func (p *AttemptProto) validate() *invalid {
	e := first(
		oneOf("protocol.era", string(p.Era), string(mcpwire.EraModern), string(mcpwire.EraLegacy), string(mcpwire.EraUnknown)),
		oneOf("protocol.state", p.State, ProtoPresent, ProtoAbsent, ProtoMalformed, ProtoNegotiated),
		short("protocol.version", p.Value, MaxReportedBytes),
	)
	if e != nil {
		return e
	}
	hasValue := p.State == ProtoPresent || p.State == ProtoNegotiated
	if hasValue != (p.Value != "") {
		return bad("protocol.version is present iff protocol.state is present or negotiated")
	}
	return nil
}

func (s *SnapshotRef) validate() *invalid {
	if s.NoneReason != "" {
		if s.SnapshotID != "" || s.ManifestDigest != "" || s.Complete || s.ListChangedSince {
			return bad("snapshot: none_reason excludes the binding members")
		}
		return oneOf("snapshot.none_reason", s.NoneReason, NoneNoSnapshot, noneInvalidated)
	}
	return first(ident("snapshot.snapshot_id", s.SnapshotID), digest("snapshot.manifest_digest", s.ManifestDigest))
}

func (c *Correlation) validate() *invalid {
	return first(
		c.Traceparent.validate("correlation.traceparent", checkTraceparent),
		c.Tracestate.validate("correlation.tracestate", checkTracestate),
		c.CorrelationID.validate("correlation.correlation_id", checkCorrelationID),
		c.RetryOf.validate("correlation.retry_of", checkCorrelationID),
		c.ToolUseID.validate("correlation.tool_use_id", checkCorrelationID),
	)
}

func (v *CorrValue) validate(name string, check func(string) string) *invalid {
	if v == nil {
		return nil
	}
	if v.Valid {
		if v.Reason != "" {
			return bad("%s: a valid value has no reason", name)
		}
		if r := check(v.Value); r != "" {
			return bad("%s: marked valid but %s", name, r)
		}
		return nil
	}
	if v.Value != "" {
		return bad("%s: an invalid value is never recorded", name)
	}
	return oneOf(name+".reason", v.Reason, CorrNotString, CorrTooLong, CorrBadCharset, CorrBadShape)
}

func (o *Observation) validate() *invalid {
	e := first(
		event(o.Type, typeObservation, o.Seq, o.AtMs),
		ident("attempt_id", o.AttemptID),
		oneOf("kind", o.Kind, ObsResponse, ObsTransportFailure, ObsTimeout, ObsCancelSent, ObsLateResponse, ObsDenied, approval.Kind),
		oneOf("basis", o.Basis, BasisProducer),
		short("result_type", o.ResultType, MaxReportedBytes),
		short("detail", o.Detail, maxDetailBytes),
		frameIndex(o.Frame),
	)
	if e != nil {
		return e
	}
	if e := validateApproval(o); e != nil {
		return e
	}
	withResponse := o.Kind == ObsResponse || o.Kind == ObsLateResponse
	if o.Frame != nil && !withResponse {
		return bad("kind %s: frame belongs to responses", o.Kind)
	}
	if withResponse != (o.Response != nil) {
		return bad("kind %s: response is present iff the kind is response or late_response", o.Kind)
	}
	if withResponse != (o.Terminator != "") {
		return bad("kind %s: terminator is present iff response is", o.Kind)
	}
	if !withResponse && (o.ResultType != "" || o.IsError || o.ErrorCode != nil) {
		return bad("kind %s: result_type, is_error and error_code belong to responses", o.Kind)
	}
	if o.ErrorCode != nil && o.ResultType != ResultTypeError {
		return bad("error_code requires result_type %q", ResultTypeError)
	}
	if o.IsError && o.ResultType == ResultTypeError {
		return bad("is_error belongs to results, not JSON-RPC errors")
	}
	if withResponse {
		return first(o.Response.validate("response"), oneOf("terminator", o.Terminator, mcpwire.TermLF, mcpwire.TermCRLF, mcpwire.TermNone))
	}
	return nil
}

func (r *Resolution) validate() *invalid {
	return first(
		event(r.Type, typeResolution, r.Seq, r.AtMs),
		ident("attempt_id", r.AttemptID),
		oneOf("outcome", r.Outcome, OutcomeUnknown),
		oneOf("reason", r.Reason, ReasonProducerCrashed, ReasonSealedInFlight, reasonServerExited),
	)
}

func (r *Recovery) validate() *invalid {
	if r.Detail == "" {
		return bad("detail is empty")
	}
	torn := r.TornDigest != "" || r.TornLength != 0 || r.TornFile != ""
	if torn {
		if r.TornDigest == "" || r.TornLength <= 0 || r.TornFile == "" {
			return bad("torn_digest, torn_length and torn_file go together")
		}
		if r.TornFile != QuarantinePath(r.TornDigest) {
			return bad("torn_file %q, want %q", bounded(r.TornFile), QuarantinePath(r.TornDigest))
		}
	}
	return first(
		event(r.Type, typeRecovery, r.Seq, r.AtMs),
		optDigest("torn_digest", r.TornDigest),
		short("detail", r.Detail, maxDetailBytes),
	)
}

func (s *Seal) validate() *invalid {
	e := first(
		event(s.Type, typeSeal, s.Seq, s.AtMs),
		nonneg("attempts", s.Attempts),
		nonneg("responses", s.Responses),
		nonneg("transport_failures", s.TransportFailures),
		nonneg("unknown", s.Unknown),
		nonneg("denied", s.Denied),
	)
	if e != nil {
		return e
	}
	if n := s.Responses + s.TransportFailures + s.Unknown + s.Denied; n != s.Attempts {
		return bad("responses + transport_failures + unknown + denied = %d, attempts = %d", n, s.Attempts)
	}
	return nil
}

// Detail makes producer prose fit a line: invalid UTF-8 becomes U+FFFD
// (prose is not evidence) and the text is cut to maxDetailBytes at a rune
// boundary.
func Detail(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxDetailBytes {
		return s
	}
	cut := maxDetailBytes - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
