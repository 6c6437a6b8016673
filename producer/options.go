package producer

import (
	"fmt"
	"io"
	"time"

	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/transcript"
)

// Options configure a Recorder. Clock and Entropy are required: the library
// reads neither the clock nor a random source of its own, so recordings are
// reproducible in tests and vectors.
type Options struct {
	// Clock gives the time of each event (at_ms). Required; it must return
	// times after 1970.
	Clock func() time.Time
	// Entropy supplies the 16 bytes of the execution scope id and each
	// payload's salt (transcript.SaltBytes). Required for Open
	// (crypto/rand.Reader in production).
	Entropy io.Reader
	// FS is where the bundle is written; nil means OS.
	FS FS
	// Durability is transcript.DurabilityStrict (the default: an attempt is
	// fsynced before Attempt returns, a response before Response returns),
	// DurabilityBatch (lines are written at once and fsynced together at
	// most every BatchInterval) or DurabilityNone (written, fsynced only at
	// Seal). The mode is recorded in the header.
	Durability string
	// BatchInterval is the batch mode's fsync period (default 10ms).
	BatchInterval time.Duration
	// Retention is transcript.RetainFull (the default: request and response
	// bytes are kept in the payload pack) or RetainDigest (salted digests
	// and lengths only). Snapshot manifests and pages are always kept: the
	// profile requires result pages retained in full.
	Retention string
	// Redact are the rules each retained payload is redacted with before
	// it is stored (spec/transcript.md, "Redaction"): nil means
	// redact.Default(), the built-in credential detectors. Redaction
	// changes what is retained, never what is forwarded.
	Redact *redact.Rules
	// NoRedaction retains payloads exactly as they crossed (Redact is then
	// ignored).
	NoRedaction bool
	// Producer names the software recording (Name required).
	Producer transcript.Producer
	// Server is the MCP server as observed (Transport required); see
	// StdioServer.
	Server transcript.Server
	// Limits in force, recorded in the header.
	Limits Limits
	// FramesCommitted declares that every frame of the session will be
	// recorded, numbered per direction (a proxy: Call.Frame, Framed.Index,
	// RecordFrame). It is recorded in the header, and a verifier then
	// checks the frame sequence for gaps.
	FramesCommitted bool
	// Lines, when set, is sent a copy of each transcript line as it is
	// written (without its LF), the header first, in file order, for live
	// telemetry. It is never waited for: a line the channel has no room
	// for is dropped (the evidence is the bundle, not the channel). The
	// caller owns the channel; the recorder never closes it.
	Lines chan<- []byte
	// PolicyFile and LockFile, optional, are the exact bytes of the policy
	// and lockfile calls are decided under (spec/policy.md): retained in
	// the pack and committed in the header with PolicyMode ("enforce", the
	// default, or "audit"). The decisions themselves come with each
	// attempt (Call.Decide).
	PolicyFile, LockFile []byte
	PolicyMode           string
	// ApproveCommand is the approver of the calls a policy's approve rule
	// matches (spec/policy.md, "Approval"): argv, run without a shell for
	// each such call before it is forwarded, with ApproveTimeout (default
	// 60s) to answer. A policy with an approve rule and no approver is
	// refused (ErrInvalidOptions).
	ApproveCommand []string
	ApproveTimeout time.Duration
	// ApproveElicit asks the MCP client itself (elicitation/create, on the
	// session's client stream) when it declared the elicitation
	// capability in its initialize request, within ApproveTimeout; a
	// client that did not is asked through ApproveCommand when there is
	// one, else the approval fails. The session core (wrap, the Go SDK
	// adapter) elicits; the HTTP proxy does not (yet): Open refuses it
	// for a Server whose Transport is streamable_http.
	ApproveElicit bool
	// ToolUseMeta are _meta keys, beyond the known ones (Claude Code's
	// claudecode/toolUseId), under which the agent host puts its own id
	// of the tool use behind a call: recorded as correlation.tool_use_id
	// and linked as a retry when reused (caller_tool_use_id). Committed
	// in the header (tool_use_meta) so a verifier derives the same; at
	// most 8 keys of letters, digits and . _ - / (else ErrInvalidOptions).
	ToolUseMeta []string
}

// Limits are recorded in the header. Only MaxFrameBytes is enforced by the
// recorder (a longer payload is committed by digest and length, not kept);
// the snapshot limits are the collector's, recorded here so a verifier
// knows them.
type Limits struct {
	MaxFrameBytes    int64 // default DefaultMaxFrameBytes
	MaxSnapshotPages int64 // default 1000
	MaxPageBytes     int64 // default 16 MiB
	MaxSnapshotBytes int64 // default 64 MiB
	CallTimeout      time.Duration
}

// Defaults.
const (
	DefaultMaxFrameBytes = 16 << 20
	defaultBatchInterval = 10 * time.Millisecond
)

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = osFS{}
	}
	if o.Durability == "" {
		o.Durability = transcript.DurabilityStrict
	}
	if o.Durability == transcript.DurabilityBatch && o.BatchInterval <= 0 {
		o.BatchInterval = defaultBatchInterval
	}
	if o.Retention == "" {
		o.Retention = transcript.RetainFull
	}
	l := &o.Limits
	if l.MaxFrameBytes <= 0 {
		l.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if l.MaxSnapshotPages <= 0 {
		l.MaxSnapshotPages = 1000
	}
	if l.MaxPageBytes <= 0 {
		l.MaxPageBytes = 16 << 20
	}
	if l.MaxSnapshotBytes <= 0 {
		l.MaxSnapshotBytes = 64 << 20
	}
	return o
}

// check validates options for Open. Reopen and Recover need only Clock.
func (o Options) check(forOpen bool) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...)
	}
	if o.Clock == nil {
		return bad("Clock is required")
	}
	if o.Clock().UnixMilli() < 0 {
		return bad("Clock returns a time before 1970")
	}
	if !forOpen {
		return nil
	}
	if o.Entropy == nil {
		return bad("Entropy is required")
	}
	switch o.Durability {
	case transcript.DurabilityStrict, transcript.DurabilityBatch, transcript.DurabilityNone:
	default:
		return bad("durability %q: want strict, batch or none", o.Durability)
	}
	switch o.Retention {
	case transcript.RetainFull, transcript.RetainDigest:
	default:
		return bad("retention %q: want full or digest", o.Retention)
	}
	if o.Producer.Name == "" {
		return bad("Producer.Name is required")
	}
	if o.Server.Transport == "" {
		return bad("Server.Transport is required")
	}
	if o.Limits.CallTimeout < 0 {
		return bad("Limits.CallTimeout is negative")
	}
	return nil
}

func (o Options) headerLimits() transcript.HeaderLimits {
	h := transcript.HeaderLimits{
		MaxFrameBytes:    o.Limits.MaxFrameBytes,
		MaxSnapshotPages: o.Limits.MaxSnapshotPages,
		MaxPageBytes:     o.Limits.MaxPageBytes,
		MaxSnapshotBytes: o.Limits.MaxSnapshotBytes,
		CallTimeoutMs:    o.Limits.CallTimeout.Milliseconds(),
	}
	if o.Durability == transcript.DurabilityBatch {
		h.BatchIntervalMs = max(1, o.BatchInterval.Milliseconds())
	}
	return h
}

// redaction returns the rules payloads are redacted with (nil: none) and
// the policy the header records.
func (o Options) redaction() (*redact.Rules, *transcript.RedactionPolicy) {
	if o.NoRedaction || o.Retention == transcript.RetainDigest {
		return nil, nil // nothing retained: nothing to redact
	}
	rules := o.Redact
	if rules == nil {
		rules = redact.Default()
	}
	d, ptrs, pats := rules.Policy()
	return rules, &transcript.RedactionPolicy{Defaults: d, Pointers: int64(ptrs), Patterns: int64(pats), Policy: redact.PolicyID}
}
