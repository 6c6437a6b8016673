package transcript

import (
	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/mcpwire"
)

// Format identifiers. Every hashed or signed object names its own format, so
// a digest of one kind can never be taken for another (spec/transcript.md).
const (
	// Format is the transcript format id this producer writes, recorded in
	// the header line. v4 is v3 with mediation both ways: a server frame
	// may be refused (by the gate, or by mediation with one of
	// mcpwire.ServerRules: an id twin, a second answer, SSE framing), and
	// is then never delivered; HTTP withheld lines name the SSE events and
	// bodies not delivered for their framing (spec/transcript.md, "Server
	// to client").
	Format = "tracectl.transcript/v4"
	// FormatV3 is the earlier format, still read and verified: server
	// frames the gate refused were delivered. v3 salts payload commitments: a payload's digest is
	// SaltedDigest(salt, bytes) with a random salt kept beside the bytes in
	// the payload pack and withheld with them, and a request's
	// arguments_digest is salted with its payload's salt (SaltedArgsDigest),
	// so nobody holding the bundle, or a proof, can test a guess about bytes
	// it does not hold; the server's argv is not committed by digest
	// (spec/transcript.md, "Payloads").
	FormatV3 = "tracectl.transcript/v3"
	// FormatV2 is the earlier format, still read and verified: v1 plus the
	// frame line and frame indexes (every frame a proxy passed in either
	// direction is committed: spec/transcript.md, "Frames"); its payload
	// digests are SHA-256 of the bytes.
	formatV2 = "tracectl.transcript/v2"
	// FormatV1 is the first format, still read and verified: it has no
	// frame lines and commits only to the frames it interpreted.
	formatV1 = "tracectl.transcript/v1"
	// Profile names the proposed profile this transcript implements. It is a
	// proposal (TRACE v0.3 MCP transcript profile, not adopted); tracectl
	// never claims conformance to an adopted standard.
	Profile = "tracectl.mcp-transcript/trace-v0.3-proposal"
	// MerkleAlg names the commitment: RFC 6962 Merkle tree hash, SHA-256,
	// leaf = SHA-256(0x00 || line bytes without the LF).
	MerkleAlg = "rfc6962-sha256"
)

// Event types: the "type" member of each line. Each event sets its own:
// Encode writes the type of the Go value it is given (a Type field may be
// left empty; one naming another event is an error), and DecodeLine fills
// Type from the line. A caller switches on the Go type, never on the
// string.
const (
	typeHeader       = "header"
	typeProtocol     = "protocol"
	typeSnapshot     = "snapshot"
	typeNotification = "notification"
	typeAttempt      = "attempt"
	typeObservation  = "observation"
	typeResolution   = "resolution"
	typeRecovery     = "recovery"
	typeSeal         = "seal"
	typeFrame        = "frame"
	typeSession      = "session"
)

// Durability and retention modes, recorded in the header.
const (
	DurabilityStrict = "strict" // attempt fsynced before dispatch, response fsynced before delivery
	DurabilityBatch  = "batch"  // group commit: fsync at most every BatchInterval
	DurabilityNone   = "none"   // written, never fsynced

	RetainFull   = "full"   // payload bytes kept under blobs/
	RetainDigest = "digest" // digests and lengths only
)

// Event is one transcript line: one of *Header, *Protocol,
// *SnapshotEvent, *Notification, *Attempt, *Observation, *Resolution,
// *Recovery, *Seal, *Frame, *SessionEvent or *HTTPEvent. What Encode takes
// and DecodeLine returns. The set is closed (the interface has unexported
// methods), so a type switch over it can be exhaustive.
type Event interface {
	// lineSeq is the line's seq member.
	lineSeq() int64
	event()
	encode(e *encoder)
	validate() *invalid
}

func (e *Header) lineSeq() int64        { return e.Seq }
func (e *Protocol) lineSeq() int64      { return e.Seq }
func (e *SnapshotEvent) lineSeq() int64 { return e.Seq }
func (e *Notification) lineSeq() int64  { return e.Seq }
func (e *Attempt) lineSeq() int64       { return e.Seq }
func (e *Observation) lineSeq() int64   { return e.Seq }
func (e *Resolution) lineSeq() int64    { return e.Seq }
func (e *Recovery) lineSeq() int64      { return e.Seq }
func (e *Seal) lineSeq() int64          { return e.Seq }
func (e *Frame) lineSeq() int64         { return e.Seq }
func (e *SessionEvent) lineSeq() int64  { return e.Seq }
func (e *HTTPEvent) lineSeq() int64     { return e.Seq }

func (*Header) event()        {}
func (*Protocol) event()      {}
func (*SnapshotEvent) event() {}
func (*Notification) event()  {}
func (*Attempt) event()       {}
func (*Observation) event()   {}
func (*Resolution) event()    {}
func (*Recovery) event()      {}
func (*Seal) event()          {}
func (*Frame) event()         {}
func (*SessionEvent) event()  {}
func (*HTTPEvent) event()     {}

// Header is line 0.
type Header struct {
	Type   string `json:"type"` // "header"
	Seq    int64  `json:"seq"`  // 0
	Format string `json:"format"`
	// FramesCommitted: every frame in either direction has exactly one line
	// committing to it, numbered per direction (v2, a proxy's transcript).
	FramesCommitted  bool             `json:"frames_committed,omitempty"`
	Profile          string           `json:"profile"`
	Canonicalization Canonicalization `json:"canonicalization"`
	Merkle           string           `json:"merkle"`
	ExecutionScope   string           `json:"execution_scope"`
	Producer         Producer         `json:"producer"`
	Server           Server           `json:"server"`
	// Redaction (v3) is the policy retained payload copies were redacted
	// under; nil: retained exactly.
	Redaction *RedactionPolicy `json:"redaction,omitempty"`
	// Policy (v4, optional) commits to the policy and lock calls were
	// decided under, and the mode (policy.go).
	Policy      *PolicyRef   `json:"policy,omitempty"`
	Retention   string       `json:"retention"`
	Durability  string       `json:"durability"`
	Limits      HeaderLimits `json:"limits"`
	StartedAtMs int64        `json:"started_at_ms"`
	// ToolUseMeta (v4, optional) are the _meta keys, beyond the known
	// ones, under which this producer read the agent host's tool-use id
	// (correlation.tool_use_id): a verifier derives each attempt's with
	// them. At most 8 keys of letters, digits and . _ - /, each at most
	// 128 bytes, none repeated.
	ToolUseMeta []string `json:"tool_use_meta,omitempty"`
}

// RedactionPolicy says which rules redacted retained payloads before they
// were stored (spec/transcript.md, "Redaction"): counts only, never the
// rules' text (an operator's pattern can describe the secret).
type RedactionPolicy struct {
	Defaults bool   `json:"defaults"` // the built-in detectors of Policy were on
	Patterns int64  `json:"patterns,omitempty"`
	Pointers int64  `json:"pointers,omitempty"`
	Policy   string `json:"policy"` // the detector set, redact.PolicyID
}

// Canonicalization names the canon policy ids in force.
type Canonicalization struct {
	Lines        string `json:"lines"`        // canon.PolicyV02ID: every line
	Declarations string `json:"declarations"` // canon.PolicyMCPDeclID: per-tool declaration digests
}

// Producer identifies the software that wrote the transcript.
type Producer struct {
	Name           string `json:"name"`
	Version        string `json:"version"`
	KeyThumbprint  string `json:"key_thumbprint,omitempty"` // RFC 7638, when the signing key is known at start
	InstanceDigest string `json:"executable_sha256,omitempty"`
}

// Server is the MCP server as the producer observed it. Raw arguments are
// never recorded (they may hold secrets): only their digest and count.
type Server struct {
	Transport        string `json:"transport"`                   // "stdio" or "in-process"
	Executable       string `json:"executable,omitempty"`        // resolved path as observed
	ExecutableSHA256 string `json:"executable_sha256,omitempty"` // of the file's bytes at start
	ArgsDigest       string `json:"args_digest,omitempty"`       // sha256 of JCS(array of argument strings)
	Argc             int64  `json:"argc"`
	Name             string `json:"name,omitempty"` // a label the operator gave, not an authenticated identity
	// Launch is what a usual launcher (npx, uvx, docker run, node with a
	// script, ...) was asked to start, as the producer read it from the
	// command line and the launcher's own files (v2).
	Launch *Launch `json:"launch,omitempty"`
	// URL is a Streamable HTTP server's endpoint as the producer was told
	// it (scheme, host, port and path; never userinfo or a query).
	URL string `json:"url,omitempty"`
}

// Launch is what a launcher was asked to start: the package spec (and the
// version its own files show), the script (and its digest), or the image.
// A producer's observation, not an authenticated identity.
type Launch struct {
	Launcher     string `json:"launcher"`                // npx, bunx, pnpm dlx, uvx, pipx run, node, python, deno, docker run, podman run
	Package      string `json:"package,omitempty"`       // the package spec as given
	Version      string `json:"version,omitempty"`       // the package's version as the launcher's own files show it
	Script       string `json:"script,omitempty"`        // the script's path as resolved
	ScriptSHA256 string `json:"script_sha256,omitempty"` // sha256:<hex> of the script's bytes at start
	Image        string `json:"image,omitempty"`         // the image reference as given
}

// HeaderLimits are the limits in force while recording.
type HeaderLimits struct {
	MaxFrameBytes    int64 `json:"max_frame_bytes"`
	MaxSnapshotPages int64 `json:"max_snapshot_pages"`
	MaxPageBytes     int64 `json:"max_page_bytes"`
	MaxSnapshotBytes int64 `json:"max_snapshot_bytes"`
	BatchIntervalMs  int64 `json:"batch_interval_ms,omitempty"`
	CallTimeoutMs    int64 `json:"call_timeout_ms,omitempty"`
}

// Payload commits to exact bytes: a request line, a response line, a
// tools/list page. The bytes, when retained, are stored content-addressed
// at blobs/sha256/<hex>.
type Payload struct {
	Digest string `json:"digest"` // the commitment to the retained bytes (v3: salted), or to the exact bytes
	Length int64  `json:"length"`
	// Original (v3) is the salted commitment to the exact bytes when the
	// retained copy is redacted; its salt is not kept anywhere in the
	// bundle, so it opens only for whoever holds the original.
	Original  string `json:"original,omitempty"`
	OverLimit bool   `json:"over_limit,omitempty"` // longer than max_frame_bytes: forwarded, not retained
	// Redactions (v3) lists the values the retained copy hides, sorted by
	// pointer: the copy is the exact bytes with each listed value replaced
	// by the JSON string "[REDACTED:<class>]".
	Redactions []Redaction `json:"redactions,omitempty"`
	Retained   bool        `json:"retained"`
	// Withheld (v3) says why bytes the retention policy would keep were not:
	// WithheldUnredactable.
	Withheld string `json:"withheld,omitempty"`
}

// Redaction is one value a retained payload copy hides.
type Redaction struct {
	Class   string `json:"class"`   // the detector or rule that matched (redact.Class)
	Pointer string `json:"pointer"` // RFC 6901, from the message's root
}

// WithheldUnredactable: the payload could not be redacted exactly (not
// strict JSON holding a secret's shape, a secret in a member name, a
// secret under a repeated name, or too long to scan), so none of its bytes
// are kept.
const WithheldUnredactable = "unredactable"

// Limits of a redaction list: a longer one is withheld whole instead.
const (
	MaxRedactions       = 256
	MaxRedactionPointer = 1024
)

// JSONRPCID records a JSON-RPC id exactly: never decoded through a float.
// When the id is present, exactly one of Text and Digest is set: Text up to
// MaxRPCIDTextBytes, Digest (sha256 of the exact text) beyond.
type JSONRPCID struct {
	Present bool   `json:"present"`
	Kind    string `json:"kind,omitempty"`   // string | number | null | other (the JSON type of the member)
	Text    string `json:"text,omitempty"`   // the exact JSON text of the id as received
	Digest  string `json:"digest,omitempty"` // sha256 of the exact JSON text, when longer than MaxRPCIDTextBytes
}

// JSON-RPC id kinds.
const (
	IDString = "string"
	IDNumber = "number"
	IDNull   = "null"
	IDOther  = "other" // object, array or boolean: not a valid id, recorded as received
)

// Protocol is a protocol observation: which MCP era and revision the peers
// use, and the server's self-description as reported (not authenticated).
type Protocol struct {
	Type       string      `json:"type"` // "protocol"
	Seq        int64       `json:"seq"`
	AtMs       int64       `json:"at_ms"`
	Era        mcpwire.Era `json:"era"`
	Version    string      `json:"version"`                  // the revision string as declared or negotiated
	Source     string      `json:"source"`                   // "initialize_response" | "discover_response" | "request_meta"
	ServerName string      `json:"server_name,omitempty"`    // serverInfo.name as reported
	ServerVer  string      `json:"server_version,omitempty"` // serverInfo.version as reported
	Payload    *Payload    `json:"payload,omitempty"`        // the exact message observed
}

// SnapshotEvent records a declaration snapshot (its manifest is a blob).
type SnapshotEvent struct {
	Type             string `json:"type"` // "snapshot"
	Seq              int64  `json:"seq"`
	AtMs             int64  `json:"at_ms"`
	SnapshotID       string `json:"snapshot_id"`
	ManifestDigest   string `json:"manifest_digest"` // sha256 of the manifest's canonical bytes
	Complete         bool   `json:"complete"`
	IncompleteReason string `json:"incomplete_reason,omitempty"`
	Tools            int64  `json:"tools"`
	Pages            int64  `json:"pages"`
	Reuse            bool   `json:"reuse"` // a cached capture reused; the manifest names the original and the policy
}

// Notification records a notification that matters to the evidence.
type Notification struct {
	Type      string     `json:"type"` // "notification"
	Seq       int64      `json:"seq"`
	AtMs      int64      `json:"at_ms"`
	Method    string     `json:"method"`               // e.g. notifications/tools/list_changed, notifications/cancelled
	Direction string     `json:"direction"`            // "server_to_client" | "client_to_server"
	RequestID *JSONRPCID `json:"request_id,omitempty"` // for cancelled: the request it names
	AttemptID string     `json:"attempt_id,omitempty"` // for cancelled: the attempt that id matched, if any
	Payload   Payload    `json:"payload"`
	Frame     *int64     `json:"frame,omitempty"` // v2: the frame's index in its direction
}

// Attempt is one outbound tools/call attempt. It is durable before the
// request is dispatched (strict durability).
type Attempt struct {
	Type           string       `json:"type"` // "attempt"
	Seq            int64        `json:"seq"`
	AtMs           int64        `json:"at_ms"`
	ExecutionScope string       `json:"execution_scope"`
	AttemptID      string       `json:"attempt_id"`
	Tool           string       `json:"tool"`                            // params.name; "" when tool_invalid is set
	ToolInvalid    string       `json:"tool_invalid,omitempty"`          // absent | not_string | too_long: why tool is ""
	ArgsDigest     string       `json:"arguments_digest,omitempty"`      // mcp-decl canonical digest of params.arguments, when canonicalizable
	ArgsUnsupport  string       `json:"arguments_unsupported,omitempty"` // the canon code when params.arguments cannot be canonicalized
	RPCID          JSONRPCID    `json:"jsonrpc_id"`
	Protocol       AttemptProto `json:"protocol"`
	ServerDigest   string       `json:"server"` // sha256 of JCS(header.server): the target as observed
	Request        Payload      `json:"request"`
	Terminator     string       `json:"terminator"` // "lf" | "crlf" | "none": how the request line ended
	Snapshot       SnapshotRef  `json:"snapshot"`
	RetryOf        string       `json:"retry_of,omitempty"`
	RetryBasis     string       `json:"retry_basis,omitempty"` // caller_declared | inferred | continuation
	Correlation    Correlation  `json:"correlation"`
	Frame          *int64       `json:"frame,omitempty"` // v2: the request frame's index (client to server)
	// Decision (v4, optional) is the policy decision made before the
	// request was forwarded (policy.go).
	Decision *Decision `json:"decision,omitempty"`
}

// AttemptProto is the protocol revision an attempt was sent under.
type AttemptProto struct {
	Era   mcpwire.Era `json:"era"`
	State string      `json:"state"` // request _meta protocolVersion: "present" | "absent" | "malformed"; legacy: "negotiated"
	Value string      `json:"version,omitempty"`
}

// SnapshotRef binds an attempt to the snapshot in force at dispatch, or
// says why there was none.
type SnapshotRef struct {
	SnapshotID     string `json:"snapshot_id,omitempty"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	Complete       bool   `json:"complete"`
	NoneReason     string `json:"none_reason,omitempty"` // no_tools_list_observed | invalidated_by_list_changed | ...
	// ListChangedSince: a tools/list_changed notification was recorded
	// after this snapshot and before the attempt. The binding stays (it is
	// what the caller selected with); the flag says it may be stale.
	ListChangedSince bool `json:"list_changed_since,omitempty"`
}

// Reasons an attempt binds no snapshot.
const (
	NoneNoSnapshot  = "no_tools_list_observed"      // no snapshot was recorded before the attempt
	noneInvalidated = "invalidated_by_list_changed" // the caller chose not to bind a snapshot that a list_changed made stale
)

// Correlation metadata: recorded after a safe-shape check; an invalid value
// is recorded as invalid, never copied.
type Correlation struct {
	Traceparent   *CorrValue `json:"traceparent,omitempty"`
	Tracestate    *CorrValue `json:"tracestate,omitempty"`
	CorrelationID *CorrValue `json:"correlation_id,omitempty"`
	// RetryOf is the caller's retry declaration (mcpwire.MetaRetryOf): the
	// correlation id of the earlier call, checked like CorrelationID. The
	// link itself is Attempt.RetryOf; a declaration that names no earlier
	// attempt is kept here and links nothing.
	RetryOf *CorrValue `json:"retry_of,omitempty"`
	// ToolUseID (v4) is the agent host's own id for the tool use behind
	// the call (claudecode/toolUseId), checked like CorrelationID, so a
	// bundle joins the agent's transcript.
	ToolUseID *CorrValue `json:"tool_use_id,omitempty"`
}

// Correlation invalid reasons.
const (
	CorrNotString  = "not_string"
	CorrTooLong    = "too_long"
	CorrBadCharset = "bad_charset"
	CorrBadShape   = "bad_shape"
)

// CorrValue is a validated correlation value.
type CorrValue struct {
	Valid  bool   `json:"valid"`
	Value  string `json:"value,omitempty"`  // only when valid
	Reason string `json:"reason,omitempty"` // only when invalid: not_string | too_long | bad_charset | bad_shape
}

// Observation kinds.
const (
	ObsResponse         = "response"          // a response line was recorded (result or JSON-RPC error)
	ObsTransportFailure = "transport_failure" // the transport failed with the call in flight: outcome unknown
	ObsTimeout          = "timeout"           // no response within the call timeout: outcome unknown
	ObsCancelSent       = "cancel_sent"       // the client cancelled: outcome unknown
	ObsLateResponse     = "late_response"     // a response after a timeout/cancel: recorded, earlier unknown kept
)

// Observation is something observed about an attempt.
type Observation struct {
	Type       string   `json:"type"` // "observation"
	Seq        int64    `json:"seq"`
	AtMs       int64    `json:"at_ms"`
	AttemptID  string   `json:"attempt_id"`
	Kind       string   `json:"kind"`
	ResultType string   `json:"result_type,omitempty"` // complete | input_required | <extension>; "error" for JSON-RPC errors
	IsError    bool     `json:"is_error,omitempty"`    // result.isError
	ErrorCode  *int64   `json:"error_code,omitempty"`  // JSON-RPC error code
	Response   *Payload `json:"response,omitempty"`
	Terminator string   `json:"terminator,omitempty"` // with response: how the response line ended
	Detail     string   `json:"detail,omitempty"`     // e.g. "server exited: signal: killed"
	Basis      string   `json:"basis"`                // "producer_observation": not authenticated by the server
	Frame      *int64   `json:"frame,omitempty"`      // v2, with response: the response frame's index (server to client)
	// Approval (v4, kind "approval" only) is the answer of the human asked
	// before a call an approve rule matched was forwarded (spec/policy.md).
	Approval *approval.Evidence `json:"approval,omitempty"`
}

// Resolution outcomes and reasons.
const (
	OutcomeUnknown = "unknown"

	ReasonProducerCrashed = "producer_crashed" // recovered after a crash with the attempt in flight
	ReasonSealedInFlight  = "sealed_in_flight" // sealed while the attempt had no terminal observation
	reasonServerExited    = "server_exited"    // the server went away with the attempt in flight
)

// Resolution closes an attempt that has no terminal observation. It is
// appended at seal or recovery; it never rewrites an earlier line.
type Resolution struct {
	Type      string `json:"type"` // "resolution"
	Seq       int64  `json:"seq"`
	AtMs      int64  `json:"at_ms"`
	AttemptID string `json:"attempt_id"`
	Outcome   string `json:"outcome"` // "unknown"
	Reason    string `json:"reason"`
}

// Recovery records what recovery found, e.g. a quarantined torn line.
type Recovery struct {
	Type       string `json:"type"` // "recovery"
	Seq        int64  `json:"seq"`
	AtMs       int64  `json:"at_ms"`
	TornDigest string `json:"torn_digest,omitempty"` // sha256 of the quarantined bytes
	TornLength int64  `json:"torn_length,omitempty"`
	TornFile   string `json:"torn_file,omitempty"` // side file under the bundle holding those bytes
	Detail     string `json:"detail"`
}

// Seal is the last line: counts the verifier recomputes. Every attempt is
// in exactly one bucket, so Responses + TransportFailures + Unknown ==
// Attempts: Responses when it has a response or late_response observation;
// otherwise TransportFailures when it has a transport_failure observation;
// otherwise Unknown (timeout, cancel_sent, or an unknown resolution).
// Attempts is the Trust Record's call_count.
type Seal struct {
	Type              string `json:"type"` // "seal"
	Seq               int64  `json:"seq"`
	AtMs              int64  `json:"at_ms"`
	Attempts          int64  `json:"attempts"`
	Responses         int64  `json:"responses"`
	TransportFailures int64  `json:"transport_failures"`
	Unknown           int64  `json:"unknown"`
	// Denied (v4) counts attempts denied by a policy or lock: recorded,
	// never forwarded (ObsDenied). Responses + TransportFailures +
	// Unknown + Denied == Attempts.
	Denied    int64 `json:"denied,omitempty"`
	Recovered bool  `json:"recovered"`
}

// Frame dispositions: what the proxy did with a frame.
const (
	FrameForwarded = "forwarded" // passed on unchanged to the other peer
	FrameRefused   = "refused"   // a client frame the gate did not understand: not forwarded, answered with an error
	FrameWithheld  = "withheld"  // a server frame not delivered (the proxy had answered that id itself), or the client's answer to the proxy's own request (an approval asked through elicitation), not forwarded
)

// Frame kinds: what the gate read.
const (
	FrameRequest      = "request"
	frameNotification = "notification"
	FrameResponse     = "response"
	FrameUnread       = "unread" // not understood: rule says which gate rule it broke
)

// Frame commits to one frame that no attempt, response observation or
// notification line commits to: every other request, notification and
// response in either direction, a client frame the gate refused, a server
// frame it could not read (v2).
type Frame struct {
	Type        string     `json:"type"` // "frame"
	Seq         int64      `json:"seq"`
	AtMs        int64      `json:"at_ms"`
	Direction   string     `json:"direction"`   // "client_to_server" | "server_to_client"
	Index       int64      `json:"index"`       // 0-based position of the frame in its direction
	Disposition string     `json:"disposition"` // forwarded | refused | withheld
	Kind        string     `json:"kind"`        // request | notification | response | unread
	Method      string     `json:"method,omitempty"`
	RPCID       *JSONRPCID `json:"jsonrpc_id,omitempty"`
	AttemptID   string     `json:"attempt_id,omitempty"` // the in-flight attempt the protocol ties it to (progress token, response id)
	Rule        string     `json:"rule,omitempty"`       // the gate rule, with kind unread
	Payload     Payload    `json:"payload"`
	Terminator  string     `json:"terminator"`
}

// Session events (SessionEvent.Event).
const (
	// SessionClientGone: a write to the client failed (it closed its end
	// or died). The proxy went on reading and committing what the server
	// sent; frames after this line were committed but not delivered.
	SessionClientGone = "client_gone"
)

// SessionEvent records something that happened to the session as a whole
// (v2).
type SessionEvent struct {
	Type   string `json:"type"` // "session"
	Seq    int64  `json:"seq"`
	AtMs   int64  `json:"at_ms"`
	Event  string `json:"event"`            // client_gone
	Detail string `json:"detail,omitempty"` // producer prose, not evidence
}

// Bundle layout (spec/transcript.md): a directory holding these files.
const (
	RecordFile     = "record.json"      // the signed TRACE v0.2 Trust Record
	TranscriptFile = "transcript.jsonl" // the journal, one canonical JSON object per line
	BlobDir        = "blobs/sha256"     // exact payload bytes and snapshot manifests, named by SHA-256 hex
	QuarantineDir  = "quarantine"       // torn lines found by recovery, kept byte for byte
	// DisclosureFile, in a disclosed bundle (tracectl disclose), is the
	// inclusion proof (format tracectl.inclusion-proof/v1) of the lines it discloses; the bundle
	// then holds no transcript, and its pack only those lines' payloads.
	DisclosureFile = "disclosure.proof"
)

// BlobPath returns the bundle-relative path of the blob with the given
// "sha256:<hex>" digest, or "" when the digest is malformed.
func BlobPath(digest string) string {
	const prefix = "sha256:"
	if len(digest) != len(prefix)+64 || digest[:len(prefix)] != prefix {
		return ""
	}
	for _, c := range digest[len(prefix):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return BlobDir + "/" + digest[len(prefix):]
}

// QuarantinePath returns the bundle-relative path where recovery keeps the
// exact bytes of a torn line with the given "sha256:<hex>" digest, or ""
// when the digest is malformed.
func QuarantinePath(digest string) string {
	p := BlobPath(digest)
	if p == "" {
		return ""
	}
	return QuarantineDir + "/" + p[len(BlobDir)+1:]
}
