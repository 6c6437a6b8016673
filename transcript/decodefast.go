package transcript

import (
	"strconv"
	"unicode/utf8"

	"github.com/tracectl/tracectl/mcpwire"
)

// The fast decoder mirrors Encode: it reads the canonical form of each
// event (members in RFC 8785 order or not: the caller re-encodes and
// compares bytes, so only a line Encode would write is ever accepted) into
// the event's fields without reflection. It never judges validity beyond
// "this is a JSON object of the member names and types the event has": on
// anything else it gives up and DecodeLine takes the reference path
// (decodeStrict), which says why. FuzzDecodeLine holds the two paths to the
// same answer.

// interned holds the member names and the values of the format's
// enumerations: a line's keys and most of its short values are these, and
// returning the table's copy instead of allocating one per occurrence
// halves what decoding a line allocates. A slot is found from the length
// and three bytes; strings whose slot is taken are allocated as any other.
// The table is never written after init, so concurrent decoders share it.
var interned = func() (t [internSlots]string) {
	for _, s := range []string{
		"absent", "argc", "args_digest", "arguments_digest", "arguments_unsupported", "at_ms", "attempt",
		"attempt_id", "attempts", "bad_charset", "bad_shape", "basis", "batch", "batch_interval_ms",
		"blobs/sha256", "call_timeout_ms", "caller_declared", "cancel_sent", "canonicalization", "class",
		"client_gone", "client_to_server", "complete", "continuation", "correlation", "correlation_id",
		"crlf", "declarations", "defaults", "detail", "digest", "direction", "disclosure.proof",
		"discover_response", "disposition", "durability", "era", "error_code", "event", "executable",
		"executable_sha256", "execution_scope", "format", "forwarded", "frame", "frames_committed",
		"full", "header", "image", "in-process", "incomplete_reason", "index", "inferred",
		"initialize_response", "invalidated_by_list_changed", "is_error", "jsonrpc_id", "key_thumbprint",
		"kind", "late_response", "launch", "launcher", "legacy", "length", "lf", "limits", "lines",
		"list_changed_since", "malformed", "manifest_digest", "max_frame_bytes", "max_page_bytes",
		"max_snapshot_bytes", "max_snapshot_pages", "merkle", "method", "modern", "name", "negotiated",
		"no_tools_list_observed", "none", "none_reason", "not_string", "notification", "null", "number",
		"observation", "original", "other", "outcome", "over_limit", "package", "pages", "patterns",
		"payload", "pointer", "pointers", "policy", "present", "producer", "producer_crashed", "profile",
		"protocol", "quarantine", "reason", "record.json", "recovered", "recovery", "redaction",
		"redactions", "refused", "request", "request_id", "request_meta", "resolution", "response",
		"responses", "result_type", "retained", "retention", "retry_basis", "retry_of", "reuse",
		"rfc6962-sha256", "rule", "script", "script_sha256", "seal", "sealed_in_flight", "seq", "server",
		"server_exited", "server_name", "server_to_client", "server_version", "session", "snapshot",
		"snapshot_id", "source", "started_at_ms", "state", "stdio", "streamable_http", "strict", "string",
		"terminator", "text", "timeout", "too_long", "tool", "tool_invalid", "tools", "torn_digest",
		"torn_file", "torn_length", "tracectl.transcript/v1", "tracectl.transcript/v2",
		"tracectl.transcript/v3", "tracectl.transcript/v4", "tool_use_meta", "traceparent", "tracestate", "transcript.jsonl", "transport",
		"transport_failure", "transport_failures", "type", "unknown", "unread", "url", "valid", "value",
		"version", "withheld",
	} {
		if i := internSlot([]byte(s)); t[i] == "" {
			t[i] = s
		}
	}
	return t
}()

const internSlots = 1024

func internSlot(b []byte) int {
	n := len(b)
	if n == 0 {
		return 0
	}
	h := uint(n)*0x9e37 ^ uint(b[0])*0x3b ^ uint(b[n/2])*0x1f3 ^ uint(b[n-1])*0x7f1
	return int((h ^ h>>10) % internSlots)
}

func intern(b []byte) string {
	if s := interned[internSlot(b)]; s == string(b) {
		return s
	}
	return string(b)
}

// lineDec scans one line. Any unexpected byte sets bad; every method then
// returns zero values, so the event decoders need not check after each call.
type lineDec struct {
	b   []byte
	i   int
	bad bool
}

func (d *lineDec) fail() { d.bad = true }

func (d *lineDec) peek() byte {
	if d.bad || d.i >= len(d.b) {
		d.bad = true
		return 0
	}
	return d.b[d.i]
}

func (d *lineDec) expect(c byte) {
	if d.peek() != c {
		d.bad = true
		return
	}
	d.i++
}

// object calls member for each member name in order; member must consume
// the value (or fail).
func (d *lineDec) object(member func(name string)) {
	d.expect('{')
	if d.peek() == '}' {
		d.i++
		return
	}
	for !d.bad {
		name := d.str()
		d.expect(':')
		if d.bad {
			return
		}
		member(name)
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return
		default:
			d.fail()
		}
	}
}

// str reads a JSON string as RFC 8785 writes it: raw UTF-8, escapes only
// for '"', '\\' and control characters.
func (d *lineDec) str() string {
	d.expect('"')
	if d.bad {
		return ""
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return intern(s)
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			d.fail()
			return ""
		default:
			d.i++
		}
	}
	d.fail()
	return ""
}

// escaped finishes a string that holds escapes, from its start.
func (d *lineDec) escaped(start int) string {
	out := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out)
		case c < 0x20:
			d.fail()
			return ""
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			break
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if d.i+4 > len(d.b) {
				d.fail()
				return ""
			}
			v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 16)
			if err != nil || v >= 0x20 {
				// Canonical lines escape only control characters;
				// anything else goes to the reference path.
				d.fail()
				return ""
			}
			out = utf8.AppendRune(out, rune(v))
			d.i += 4
		default:
			d.fail()
			return ""
		}
	}
	d.fail()
	return ""
}

func (d *lineDec) int() int64 {
	start := d.i
	if d.peek() == '-' {
		d.i++
	}
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.bad {
		return 0
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		d.fail()
	}
	return n
}

func (d *lineDec) intPtr() *int64 { n := d.int(); return &n }

func (d *lineDec) bool() bool {
	switch {
	case d.bad:
	case hasAt(d.b, d.i, "true"):
		d.i += 4
		return true
	case hasAt(d.b, d.i, "false"):
		d.i += 5
		return false
	}
	d.fail()
	return false
}

func hasAt(b []byte, i int, s string) bool { return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s }

func (d *lineDec) payload(p *Payload) {
	d.object(func(k string) {
		switch k {
		case "digest":
			p.Digest = d.str()
		case "length":
			p.Length = d.int()
		case "original":
			p.Original = d.str()
		case "over_limit":
			p.OverLimit = d.bool()
		case "redactions":
			d.array(func() {
				var r Redaction
				d.object(func(k string) {
					switch k {
					case "class":
						r.Class = d.str()
					case "pointer":
						r.Pointer = d.str()
					default:
						d.fail()
					}
				})
				p.Redactions = append(p.Redactions, r)
			})
		case "retained":
			p.Retained = d.bool()
		case "withheld":
			p.Withheld = d.str()
		default:
			d.fail()
		}
	})
}

// array calls elem for each element; elem must consume it (or fail).
func (d *lineDec) array(elem func()) {
	d.expect('[')
	if d.peek() == ']' {
		d.i++
		return
	}
	for !d.bad {
		elem()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return
		default:
			d.fail()
		}
	}
}

func (d *lineDec) rpcID() *JSONRPCID {
	id := &JSONRPCID{}
	d.object(func(k string) {
		switch k {
		case "digest":
			id.Digest = d.str()
		case "kind":
			id.Kind = d.str()
		case "present":
			id.Present = d.bool()
		case "text":
			id.Text = d.str()
		default:
			d.fail()
		}
	})
	return id
}

func (d *lineDec) corrValue() *CorrValue {
	v := &CorrValue{}
	d.object(func(k string) {
		switch k {
		case "reason":
			v.Reason = d.str()
		case "valid":
			v.Valid = d.bool()
		case "value":
			v.Value = d.str()
		default:
			d.fail()
		}
	})
	return v
}

// decodeEvent reads a line into a new event of type typ, or returns nil.
func decodeEvent(typ string, line []byte) Event {
	d := &lineDec{b: line}
	var ev Event
	switch typ {
	case typeHeader:
		ev = d.header()
	case typeProtocol:
		ev = d.protocol()
	case typeSnapshot:
		ev = d.snapshot()
	case typeNotification:
		ev = d.notification()
	case typeAttempt:
		ev = d.attempt()
	case typeObservation:
		ev = d.observation()
	case typeResolution:
		ev = d.resolution()
	case typeRecovery:
		ev = d.recovery()
	case typeSeal:
		ev = d.seal()
	case typeFrame:
		ev = d.frame()
	case typeSession:
		ev = d.session()
	case typeHTTP:
		ev = d.http()
	default:
		return nil
	}
	if d.bad || d.i != len(line) {
		return nil
	}
	return ev
}

func (d *lineDec) header() *Header {
	h := &Header{}
	d.object(func(k string) {
		switch k {
		case "canonicalization":
			d.object(func(k string) {
				switch k {
				case "declarations":
					h.Canonicalization.Declarations = d.str()
				case "lines":
					h.Canonicalization.Lines = d.str()
				default:
					d.fail()
				}
			})
		case "durability":
			h.Durability = d.str()
		case "execution_scope":
			h.ExecutionScope = d.str()
		case "format":
			h.Format = d.str()
		case "frames_committed":
			h.FramesCommitted = d.bool()
		case "limits":
			l := &h.Limits
			d.object(func(k string) {
				switch k {
				case "batch_interval_ms":
					l.BatchIntervalMs = d.int()
				case "call_timeout_ms":
					l.CallTimeoutMs = d.int()
				case "max_frame_bytes":
					l.MaxFrameBytes = d.int()
				case "max_page_bytes":
					l.MaxPageBytes = d.int()
				case "max_snapshot_bytes":
					l.MaxSnapshotBytes = d.int()
				case "max_snapshot_pages":
					l.MaxSnapshotPages = d.int()
				default:
					d.fail()
				}
			})
		case "merkle":
			h.Merkle = d.str()
		case "policy":
			h.Policy = d.policyRef()
		case "producer":
			p := &h.Producer
			d.object(func(k string) {
				switch k {
				case "executable_sha256":
					p.InstanceDigest = d.str()
				case "key_thumbprint":
					p.KeyThumbprint = d.str()
				case "name":
					p.Name = d.str()
				case "version":
					p.Version = d.str()
				default:
					d.fail()
				}
			})
		case "redaction":
			r := &RedactionPolicy{}
			d.object(func(k string) {
				switch k {
				case "defaults":
					r.Defaults = d.bool()
				case "patterns":
					r.Patterns = d.int()
				case "pointers":
					r.Pointers = d.int()
				case "policy":
					r.Policy = d.str()
				default:
					d.fail()
				}
			})
			h.Redaction = r
		case "profile":
			h.Profile = d.str()
		case "tool_use_meta":
			h.ToolUseMeta = []string{}
			d.array(func() {
				if len(h.ToolUseMeta) >= maxToolUseMeta {
					d.fail()
					return
				}
				h.ToolUseMeta = append(h.ToolUseMeta, d.str())
			})
		case "retention":
			h.Retention = d.str()
		case "seq":
			h.Seq = d.int()
		case "server":
			s := &h.Server
			d.object(func(k string) {
				switch k {
				case "argc":
					s.Argc = d.int()
				case "args_digest":
					s.ArgsDigest = d.str()
				case "executable":
					s.Executable = d.str()
				case "executable_sha256":
					s.ExecutableSHA256 = d.str()
				case "url":
					s.URL = d.str()
				case "launch":
					l := &Launch{}
					s.Launch = l
					d.object(func(k string) {
						switch k {
						case "image":
							l.Image = d.str()
						case "launcher":
							l.Launcher = d.str()
						case "package":
							l.Package = d.str()
						case "script":
							l.Script = d.str()
						case "script_sha256":
							l.ScriptSHA256 = d.str()
						case "version":
							l.Version = d.str()
						default:
							d.fail()
						}
					})
				case "name":
					s.Name = d.str()
				case "transport":
					s.Transport = d.str()
				default:
					d.fail()
				}
			})
		case "started_at_ms":
			h.StartedAtMs = d.int()
		case "type":
			h.Type = d.str()
		default:
			d.fail()
		}
	})
	return h
}

func (d *lineDec) protocol() *Protocol {
	p := &Protocol{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			p.AtMs = d.int()
		case "era":
			p.Era = mcpwire.Era(d.str())
		case "payload":
			p.Payload = &Payload{}
			d.payload(p.Payload)
		case "seq":
			p.Seq = d.int()
		case "server_name":
			p.ServerName = d.str()
		case "server_version":
			p.ServerVer = d.str()
		case "source":
			p.Source = d.str()
		case "type":
			p.Type = d.str()
		case "version":
			p.Version = d.str()
		default:
			d.fail()
		}
	})
	return p
}

func (d *lineDec) snapshot() *SnapshotEvent {
	s := &SnapshotEvent{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			s.AtMs = d.int()
		case "complete":
			s.Complete = d.bool()
		case "incomplete_reason":
			s.IncompleteReason = d.str()
		case "manifest_digest":
			s.ManifestDigest = d.str()
		case "pages":
			s.Pages = d.int()
		case "reuse":
			s.Reuse = d.bool()
		case "seq":
			s.Seq = d.int()
		case "snapshot_id":
			s.SnapshotID = d.str()
		case "tools":
			s.Tools = d.int()
		case "type":
			s.Type = d.str()
		default:
			d.fail()
		}
	})
	return s
}

func (d *lineDec) notification() *Notification {
	n := &Notification{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			n.AtMs = d.int()
		case "attempt_id":
			n.AttemptID = d.str()
		case "direction":
			n.Direction = d.str()
		case "frame":
			n.Frame = d.intPtr()
		case "method":
			n.Method = d.str()
		case "payload":
			d.payload(&n.Payload)
		case "request_id":
			n.RequestID = d.rpcID()
		case "seq":
			n.Seq = d.int()
		case "type":
			n.Type = d.str()
		default:
			d.fail()
		}
	})
	return n
}

func (d *lineDec) attempt() *Attempt {
	a := &Attempt{}
	d.object(func(k string) {
		switch k {
		case "arguments_digest":
			a.ArgsDigest = d.str()
		case "arguments_unsupported":
			a.ArgsUnsupport = d.str()
		case "at_ms":
			a.AtMs = d.int()
		case "attempt_id":
			a.AttemptID = d.str()
		case "correlation":
			c := &a.Correlation
			d.object(func(k string) {
				switch k {
				case "correlation_id":
					c.CorrelationID = d.corrValue()
				case "retry_of":
					c.RetryOf = d.corrValue()
				case "tool_use_id":
					c.ToolUseID = d.corrValue()
				case "traceparent":
					c.Traceparent = d.corrValue()
				case "tracestate":
					c.Tracestate = d.corrValue()
				default:
					d.fail()
				}
			})
		case "decision":
			a.Decision = d.decision()
		case "execution_scope":
			a.ExecutionScope = d.str()
		case "frame":
			a.Frame = d.intPtr()
		case "jsonrpc_id":
			a.RPCID = *d.rpcID()
		case "protocol":
			d.object(func(k string) {
				switch k {
				case "era":
					a.Protocol.Era = mcpwire.Era(d.str())
				case "state":
					a.Protocol.State = d.str()
				case "version":
					a.Protocol.Value = d.str()
				default:
					d.fail()
				}
			})
		case "request":
			d.payload(&a.Request)
		case "retry_basis":
			a.RetryBasis = d.str()
		case "retry_of":
			a.RetryOf = d.str()
		case "seq":
			a.Seq = d.int()
		case "server":
			a.ServerDigest = d.str()
		case "snapshot":
			s := &a.Snapshot
			d.object(func(k string) {
				switch k {
				case "complete":
					s.Complete = d.bool()
				case "list_changed_since":
					s.ListChangedSince = d.bool()
				case "manifest_digest":
					s.ManifestDigest = d.str()
				case "none_reason":
					s.NoneReason = d.str()
				case "snapshot_id":
					s.SnapshotID = d.str()
				default:
					d.fail()
				}
			})
		case "terminator":
			a.Terminator = d.str()
		case "tool":
			a.Tool = d.str()
		case "tool_invalid":
			a.ToolInvalid = d.str()
		case "type":
			a.Type = d.str()
		default:
			d.fail()
		}
	})
	return a
}

func (d *lineDec) observation() *Observation {
	o := &Observation{}
	d.object(func(k string) {
		switch k {
		case "approval":
			o.Approval = d.approval()
		case "at_ms":
			o.AtMs = d.int()
		case "attempt_id":
			o.AttemptID = d.str()
		case "basis":
			o.Basis = d.str()
		case "detail":
			o.Detail = d.str()
		case "error_code":
			o.ErrorCode = d.intPtr()
		case "frame":
			o.Frame = d.intPtr()
		case "is_error":
			o.IsError = d.bool()
		case "kind":
			o.Kind = d.str()
		case "response":
			o.Response = &Payload{}
			d.payload(o.Response)
		case "result_type":
			o.ResultType = d.str()
		case "seq":
			o.Seq = d.int()
		case "terminator":
			o.Terminator = d.str()
		case "type":
			o.Type = d.str()
		default:
			d.fail()
		}
	})
	return o
}

func (d *lineDec) resolution() *Resolution {
	r := &Resolution{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			r.AtMs = d.int()
		case "attempt_id":
			r.AttemptID = d.str()
		case "outcome":
			r.Outcome = d.str()
		case "reason":
			r.Reason = d.str()
		case "seq":
			r.Seq = d.int()
		case "type":
			r.Type = d.str()
		default:
			d.fail()
		}
	})
	return r
}

func (d *lineDec) recovery() *Recovery {
	r := &Recovery{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			r.AtMs = d.int()
		case "detail":
			r.Detail = d.str()
		case "seq":
			r.Seq = d.int()
		case "torn_digest":
			r.TornDigest = d.str()
		case "torn_file":
			r.TornFile = d.str()
		case "torn_length":
			r.TornLength = d.int()
		case "type":
			r.Type = d.str()
		default:
			d.fail()
		}
	})
	return r
}

func (d *lineDec) seal() *Seal {
	s := &Seal{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			s.AtMs = d.int()
		case "attempts":
			s.Attempts = d.int()
		case "denied":
			s.Denied = d.int()
		case "recovered":
			s.Recovered = d.bool()
		case "responses":
			s.Responses = d.int()
		case "seq":
			s.Seq = d.int()
		case "transport_failures":
			s.TransportFailures = d.int()
		case "type":
			s.Type = d.str()
		case "unknown":
			s.Unknown = d.int()
		default:
			d.fail()
		}
	})
	return s
}

func (d *lineDec) frame() *Frame {
	f := &Frame{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			f.AtMs = d.int()
		case "attempt_id":
			f.AttemptID = d.str()
		case "direction":
			f.Direction = d.str()
		case "disposition":
			f.Disposition = d.str()
		case "index":
			f.Index = d.int()
		case "jsonrpc_id":
			f.RPCID = d.rpcID()
		case "kind":
			f.Kind = d.str()
		case "method":
			f.Method = d.str()
		case "payload":
			d.payload(&f.Payload)
		case "rule":
			f.Rule = d.str()
		case "seq":
			f.Seq = d.int()
		case "terminator":
			f.Terminator = d.str()
		case "type":
			f.Type = d.str()
		default:
			d.fail()
		}
	})
	return f
}

func (d *lineDec) session() *SessionEvent {
	v := &SessionEvent{}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			v.AtMs = d.int()
		case "detail":
			v.Detail = d.str()
		case "event":
			v.Event = d.str()
		case "seq":
			v.Seq = d.int()
		case "type":
			v.Type = d.str()
		default:
			d.fail()
		}
	})
	return v
}

func (d *lineDec) http() *HTTPEvent {
	v := &HTTPEvent{}
	strMap := func() map[string]string {
		m := map[string]string{}
		d.object(func(k string) { m[k] = d.str() })
		return m
	}
	d.object(func(k string) {
		switch k {
		case "at_ms":
			v.AtMs = d.int()
		case "connection":
			v.Connection = d.str()
		case "content_type":
			v.ContentType = d.str()
		case "credentials":
			v.Credentials = []string{}
			d.array(func() { v.Credentials = append(v.Credentials, d.str()) })
		case "detail":
			v.Detail = d.str()
		case "event":
			v.Event = d.str()
		case "exchange":
			v.Exchange = d.int()
		case "frame":
			v.Frame = d.intPtr()
		case "header_digests":
			v.HeaderDigests = strMap()
		case "headers":
			v.Headers = strMap()
		case "method":
			v.Method = d.str()
		case "path":
			v.Path = d.str()
		case "rule":
			v.Rule = d.str()
		case "seq":
			v.Seq = d.int()
		case "session":
			v.Session = d.str()
		case "status":
			v.Status = d.int()
		case "tls":
			t := &HTTPTLS{}
			d.object(func(k string) {
				switch k {
				case "chain":
					t.Chain = d.str()
				case "chain_length":
					t.ChainLen = d.int()
				case "spki_sha256":
					t.SPKISHA256 = d.str()
				case "version":
					t.Version = d.str()
				default:
					d.fail()
				}
			})
			v.TLS = t
		case "type":
			v.Type = d.str()
		case "url":
			v.URL = d.str()
		default:
			d.fail()
		}
	})
	return v
}

func (d *lineDec) decision() *Decision {
	v := &Decision{}
	d.object(func(k string) {
		switch k {
		case "action":
			v.Action = d.str()
		case "declaration":
			v.Declaration = d.str()
		case "reason":
			v.Reason = d.str()
		case "rule":
			v.Rule = d.str()
		default:
			d.fail()
		}
	})
	return v
}

func (d *lineDec) policyRef() *PolicyRef {
	p := &PolicyRef{}
	d.object(func(k string) {
		switch k {
		case "lock_digest":
			p.LockDigest = d.str()
		case "lock_length":
			p.LockLength = d.int()
		case "mode":
			p.Mode = d.str()
		case "policy_digest":
			p.PolicyDigest = d.str()
		case "policy_length":
			p.PolicyLength = d.int()
		default:
			d.fail()
		}
	})
	return p
}
