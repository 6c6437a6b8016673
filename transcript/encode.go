package transcript

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
)

// Encode returns the canonical line of an event:
// byte for byte what canon.Marshal returns for it (a test holds the two
// equal), written directly. Going through encoding/json and then
// canonicalizing costs about ten times more, on the path of every
// recorded call and every verified line. Strings must be valid UTF-8 and
// integers within ±canon.MaxSafeInteger; anything else is an error, never
// coerced.
func Encode(ev Event) ([]byte, error) {
	return AppendEncode(make([]byte, 0, 512), ev)
}

// AppendEncode appends the canonical line of an event to dst (Encode
// without a buffer of its own: the recorder encodes straight into its
// journal's). On error dst is returned as it was.
func AppendEncode(dst []byte, ev Event) ([]byte, error) {
	e := &encoder{b: dst}
	e.first, e.last = e.firstA[:0], e.lastA[:0]
	ev.encode(e)
	if e.err != nil {
		return dst, e.err
	}
	return e.b, nil
}

var (
	errNotUTF8    = errors.New("string is not UTF-8")
	errUnsafeInt  = errors.New("integer outside ±2^53-1")
	errKeysUnsort = errors.New("members out of RFC 8785 order")
	errWrongType  = errors.New("event type mismatch")
)

// encoder appends RFC 8785 JSON. Members must be added in RFC 8785 order
// (all tracectl member names are ASCII, so byte order); the encoder checks
// it, so a misordered type fails loudly instead of writing a
// non-canonical line.
type encoder struct {
	b     []byte
	err   error
	first []bool   // per open object: no member yet
	last  []string // per open object: the previous member name
	// The stacks' first levels, so an event nests without allocating.
	firstA [6]bool
	lastA  [6]string
}

func (e *encoder) open() {
	e.b = append(e.b, '{')
	e.first = append(e.first, true)
	e.last = append(e.last, "")
}

func (e *encoder) close() {
	e.b = append(e.b, '}')
	e.first = e.first[:len(e.first)-1]
	e.last = e.last[:len(e.last)-1]
}

func (e *encoder) key(k string) {
	n := len(e.first) - 1
	if !e.first[n] {
		if k <= e.last[n] && e.err == nil {
			e.err = fmt.Errorf("%w: %q after %q", errKeysUnsort, k, e.last[n])
		}
		e.b = append(e.b, ',')
	}
	e.first[n], e.last[n] = false, k
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *encoder) str(k, v string) {
	e.key(k)
	e.string(v)
}

// typ writes the "type" member: the event's own type, whatever its Type
// field holds. A constructor may leave Type empty; a Type naming another
// event is an error, never written.
func (e *encoder) typ(got, want string) {
	if got != "" && got != want && e.err == nil {
		e.err = fmt.Errorf("%w: type %q on a %q event", errWrongType, got, want)
	}
	e.str("type", want)
}

func (e *encoder) optStr(k, v string) {
	if v != "" {
		e.str(k, v)
	}
}

func (e *encoder) int(k string, v int64) {
	e.key(k)
	if v > canon.MaxSafeInteger || v < -canon.MaxSafeInteger {
		if e.err == nil {
			e.err = fmt.Errorf("member %q: %w", k, errUnsafeInt)
		}
	}
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *encoder) optInt(k string, v int64) {
	if v != 0 {
		e.int(k, v)
	}
}

func (e *encoder) bool(k string, v bool) {
	e.key(k)
	e.b = strconv.AppendBool(e.b, v)
}

func (e *encoder) optBool(k string, v bool) {
	if v {
		e.bool(k, v)
	}
}

const hexDigits = "0123456789abcdef"

// string writes s with RFC 8785's minimal escapes.
func (e *encoder) string(s string) {
	if !utf8.ValidString(s) && e.err == nil {
		e.err = errNotUTF8
	}
	e.b = append(e.b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		e.b = append(e.b, s[start:i]...)
		switch c {
		case '"':
			e.b = append(e.b, '\\', '"')
		case '\\':
			e.b = append(e.b, '\\', '\\')
		case '\b':
			e.b = append(e.b, '\\', 'b')
		case '\f':
			e.b = append(e.b, '\\', 'f')
		case '\n':
			e.b = append(e.b, '\\', 'n')
		case '\r':
			e.b = append(e.b, '\\', 'r')
		case '\t':
			e.b = append(e.b, '\\', 't')
		default:
			e.b = append(e.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		start = i + 1
	}
	e.b = append(e.b, s[start:]...)
	e.b = append(e.b, '"')
}

// Each encode writes the members in RFC 8785 order; omitted members are
// exactly the struct's omitempty members at their zero value.

func (h *Header) encode(e *encoder) {
	e.open()
	e.key("canonicalization")
	e.open()
	e.str("declarations", h.Canonicalization.Declarations)
	e.str("lines", h.Canonicalization.Lines)
	e.close()
	e.str("durability", h.Durability)
	e.str("execution_scope", h.ExecutionScope)
	e.str("format", h.Format)
	e.optBool("frames_committed", h.FramesCommitted)
	e.key("limits")
	l := &h.Limits
	e.open()
	e.optInt("batch_interval_ms", l.BatchIntervalMs)
	e.optInt("call_timeout_ms", l.CallTimeoutMs)
	e.int("max_frame_bytes", l.MaxFrameBytes)
	e.int("max_page_bytes", l.MaxPageBytes)
	e.int("max_snapshot_bytes", l.MaxSnapshotBytes)
	e.int("max_snapshot_pages", l.MaxSnapshotPages)
	e.close()
	e.str("merkle", h.Merkle)
	if h.Policy != nil {
		h.Policy.encode(e)
	}
	e.key("producer")
	p := &h.Producer
	e.open()
	e.optStr("executable_sha256", p.InstanceDigest)
	e.optStr("key_thumbprint", p.KeyThumbprint)
	e.str("name", p.Name)
	e.str("version", p.Version)
	e.close()
	e.str("profile", h.Profile)
	if r := h.Redaction; r != nil {
		e.key("redaction")
		e.open()
		e.bool("defaults", r.Defaults)
		e.optInt("patterns", r.Patterns)
		e.optInt("pointers", r.Pointers)
		e.str("policy", r.Policy)
		e.close()
	}
	e.str("retention", h.Retention)
	e.int("seq", h.Seq)
	e.key("server")
	s := &h.Server
	e.open()
	e.int("argc", s.Argc)
	e.optStr("args_digest", s.ArgsDigest)
	e.optStr("executable", s.Executable)
	e.optStr("executable_sha256", s.ExecutableSHA256)
	if l := s.Launch; l != nil {
		e.key("launch")
		e.open()
		e.optStr("image", l.Image)
		e.str("launcher", l.Launcher)
		e.optStr("package", l.Package)
		e.optStr("script", l.Script)
		e.optStr("script_sha256", l.ScriptSHA256)
		e.optStr("version", l.Version)
		e.close()
	}
	e.optStr("name", s.Name)
	e.str("transport", s.Transport)
	e.optStr("url", s.URL)
	e.close()
	e.int("started_at_ms", h.StartedAtMs)
	if len(h.ToolUseMeta) > 0 {
		e.key("tool_use_meta")
		e.b = append(e.b, '[')
		for i, k := range h.ToolUseMeta {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.string(k)
		}
		e.b = append(e.b, ']')
	}
	e.typ(h.Type, typeHeader)
	e.close()
}

func (p *Payload) encode(e *encoder) {
	e.open()
	e.str("digest", p.Digest)
	e.int("length", p.Length)
	e.optStr("original", p.Original)
	e.optBool("over_limit", p.OverLimit)
	if len(p.Redactions) > 0 {
		e.key("redactions")
		e.b = append(e.b, '[')
		for i, r := range p.Redactions {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.open()
			e.str("class", r.Class)
			e.str("pointer", r.Pointer)
			e.close()
		}
		e.b = append(e.b, ']')
	}
	e.bool("retained", p.Retained)
	e.optStr("withheld", p.Withheld)
	e.close()
}

func (id *JSONRPCID) encode(e *encoder) {
	e.open()
	e.optStr("digest", id.Digest)
	e.optStr("kind", id.Kind)
	e.bool("present", id.Present)
	e.optStr("text", id.Text)
	e.close()
}

func (c *CorrValue) encodeAt(e *encoder, k string) {
	if c == nil {
		return
	}
	e.key(k)
	e.open()
	e.optStr("reason", c.Reason)
	e.bool("valid", c.Valid)
	e.optStr("value", c.Value)
	e.close()
}

func (p *Protocol) encode(e *encoder) {
	e.open()
	e.int("at_ms", p.AtMs)
	e.str("era", string(p.Era))
	if p.Payload != nil {
		e.key("payload")
		p.Payload.encode(e)
	}
	e.int("seq", p.Seq)
	e.optStr("server_name", p.ServerName)
	e.optStr("server_version", p.ServerVer)
	e.str("source", p.Source)
	e.typ(p.Type, typeProtocol)
	e.str("version", p.Version)
	e.close()
}

func (s *SnapshotEvent) encode(e *encoder) {
	e.open()
	e.int("at_ms", s.AtMs)
	e.bool("complete", s.Complete)
	e.optStr("incomplete_reason", s.IncompleteReason)
	e.str("manifest_digest", s.ManifestDigest)
	e.int("pages", s.Pages)
	e.bool("reuse", s.Reuse)
	e.int("seq", s.Seq)
	e.str("snapshot_id", s.SnapshotID)
	e.int("tools", s.Tools)
	e.typ(s.Type, typeSnapshot)
	e.close()
}

func (n *Notification) encode(e *encoder) {
	e.open()
	e.int("at_ms", n.AtMs)
	e.optStr("attempt_id", n.AttemptID)
	e.str("direction", n.Direction)
	e.optFrame(n.Frame)
	e.str("method", n.Method)
	e.key("payload")
	n.Payload.encode(e)
	if n.RequestID != nil {
		e.key("request_id")
		n.RequestID.encode(e)
	}
	e.int("seq", n.Seq)
	e.typ(n.Type, typeNotification)
	e.close()
}

func (a *Attempt) encode(e *encoder) {
	e.open()
	e.optStr("arguments_digest", a.ArgsDigest)
	e.optStr("arguments_unsupported", a.ArgsUnsupport)
	e.int("at_ms", a.AtMs)
	e.str("attempt_id", a.AttemptID)
	e.key("correlation")
	e.open()
	a.Correlation.CorrelationID.encodeAt(e, "correlation_id")
	a.Correlation.RetryOf.encodeAt(e, "retry_of")
	a.Correlation.ToolUseID.encodeAt(e, "tool_use_id")
	a.Correlation.Traceparent.encodeAt(e, "traceparent")
	a.Correlation.Tracestate.encodeAt(e, "tracestate")
	e.close()
	if a.Decision != nil {
		a.Decision.encode(e)
	}
	e.str("execution_scope", a.ExecutionScope)
	e.optFrame(a.Frame)
	e.key("jsonrpc_id")
	a.RPCID.encode(e)
	e.key("protocol")
	e.open()
	e.str("era", string(a.Protocol.Era))
	e.str("state", a.Protocol.State)
	e.optStr("version", a.Protocol.Value)
	e.close()
	e.key("request")
	a.Request.encode(e)
	e.optStr("retry_basis", a.RetryBasis)
	e.optStr("retry_of", a.RetryOf)
	e.int("seq", a.Seq)
	e.str("server", a.ServerDigest)
	e.key("snapshot")
	s := &a.Snapshot
	e.open()
	e.bool("complete", s.Complete)
	e.optBool("list_changed_since", s.ListChangedSince)
	e.optStr("manifest_digest", s.ManifestDigest)
	e.optStr("none_reason", s.NoneReason)
	e.optStr("snapshot_id", s.SnapshotID)
	e.close()
	e.str("terminator", a.Terminator)
	e.str("tool", a.Tool)
	e.optStr("tool_invalid", a.ToolInvalid)
	e.typ(a.Type, typeAttempt)
	e.close()
}

func (o *Observation) encode(e *encoder) {
	e.open()
	if o.Approval != nil {
		encodeApproval(e, o.Approval)
	}
	e.int("at_ms", o.AtMs)
	e.str("attempt_id", o.AttemptID)
	e.str("basis", o.Basis)
	e.optStr("detail", o.Detail)
	if o.ErrorCode != nil {
		e.int("error_code", *o.ErrorCode)
	}
	e.optFrame(o.Frame)
	e.optBool("is_error", o.IsError)
	e.str("kind", o.Kind)
	if o.Response != nil {
		e.key("response")
		o.Response.encode(e)
	}
	e.optStr("result_type", o.ResultType)
	e.int("seq", o.Seq)
	e.optStr("terminator", o.Terminator)
	e.typ(o.Type, typeObservation)
	e.close()
}

func (r *Resolution) encode(e *encoder) {
	e.open()
	e.int("at_ms", r.AtMs)
	e.str("attempt_id", r.AttemptID)
	e.str("outcome", r.Outcome)
	e.str("reason", r.Reason)
	e.int("seq", r.Seq)
	e.typ(r.Type, typeResolution)
	e.close()
}

func (r *Recovery) encode(e *encoder) {
	e.open()
	e.int("at_ms", r.AtMs)
	e.str("detail", r.Detail)
	e.int("seq", r.Seq)
	e.optStr("torn_digest", r.TornDigest)
	e.optStr("torn_file", r.TornFile)
	e.optInt("torn_length", r.TornLength)
	e.typ(r.Type, typeRecovery)
	e.close()
}

func (s *Seal) encode(e *encoder) {
	e.open()
	e.int("at_ms", s.AtMs)
	e.int("attempts", s.Attempts)
	e.optInt("denied", s.Denied)
	e.bool("recovered", s.Recovered)
	e.int("responses", s.Responses)
	e.int("seq", s.Seq)
	e.int("transport_failures", s.TransportFailures)
	e.typ(s.Type, typeSeal)
	e.int("unknown", s.Unknown)
	e.close()
}

func (e *encoder) optFrame(v *int64) {
	if v != nil {
		e.int("frame", *v)
	}
}

func (f *Frame) encode(e *encoder) {
	e.open()
	e.int("at_ms", f.AtMs)
	e.optStr("attempt_id", f.AttemptID)
	e.str("direction", f.Direction)
	e.str("disposition", f.Disposition)
	e.int("index", f.Index)
	if f.RPCID != nil {
		e.key("jsonrpc_id")
		f.RPCID.encode(e)
	}
	e.str("kind", f.Kind)
	e.optStr("method", f.Method)
	e.key("payload")
	f.Payload.encode(e)
	e.optStr("rule", f.Rule)
	e.int("seq", f.Seq)
	e.str("terminator", f.Terminator)
	e.typ(f.Type, typeFrame)
	e.close()
}

func (v *SessionEvent) encode(e *encoder) {
	e.open()
	e.int("at_ms", v.AtMs)
	e.optStr("detail", v.Detail)
	e.str("event", v.Event)
	e.int("seq", v.Seq)
	e.typ(v.Type, typeSession)
	e.close()
}
