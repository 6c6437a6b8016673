package transcript

import (
	"errors"
	"slices"
	"strconv"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// MaxDeriveBytes bounds how much of one message is parsed to derive its
// facts. It equals the canon default: the producer never records a longer
// tools/call request (it cannot read one), and a longer response derives no
// facts. A verifier re-deriving facts from retained bytes applies the same
// bound, so both sides reach the same answer.
const MaxDeriveBytes = canon.DefaultMaxBytes

// The derivations below are the single statement of how an attempt's,
// observation's and notification's members follow from the exact message
// bytes (spec/transcript.md, "attempt", "observation", "notification"). The
// producer records what they return; a verifier re-derives them from the
// retained bytes and compares (spec/verification.md, "Payloads"). Keeping
// one implementation means the two can never drift.

// RequestFacts is what a tools/call request line says, as recorded in an
// attempt line.
type RequestFacts struct {
	RPCID           JSONRPCID   // jsonrpc_id
	IDText          string      // exact id text: what a notifications/cancelled names ("" when absent)
	Tool            string      // tool; "" when ToolInvalid is set
	ToolInvalid     string      // tool_invalid: "absent", "not_string" or "too_long"
	ArgsDigest      string      // arguments_digest
	ArgsUnsupported string      // arguments_unsupported: the canon code
	ProtoState      string      // ProtoPresent, ProtoAbsent or ProtoMalformed (never ProtoNegotiated: that is the producer's session state)
	ProtoVersion    string      // with ProtoPresent: the revision
	Correlation     Correlation // correlation
	CorrelationID   string      // the valid caller correlation id, or ""
	RetryOf         string      // the valid declared retry correlation id, or ""
	ToolUseID       string      // the valid agent host's tool-use id, or ""
	Continues       bool        // params carry inputResponses or requestState
}

// NotToolCallError reports bytes that are not a tools/call request the
// producer records: not JSON it can read, another method, or a repeated id.
type NotToolCallError struct{ Reason string }

func (e *NotToolCallError) Error() string { return "not a tools/call request: " + e.Reason }

// ErrNoMethod: a notification without a readable method (absent, not a
// string, empty, or longer than MaxReportedBytes).
var ErrNoMethod = errors.New("no readable method")

// parseMessage reads a JSON-RPC message. Duplicate member names are
// tolerated in the document (the exact bytes are what is committed), but a
// repeated member is never read: canon.Value.Get reports it as not there.
func parseMessage(body []byte) (canon.Value, error) {
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxDeriveBytes}, AllowDuplicateKeys: true})
	if err != nil {
		return canon.Value{}, err
	}
	return doc.Root(), nil
}

// member looks name up in obj: present (exactly once), absent, or ambiguous
// (more than once).
func member(obj canon.Value, name string) (v canon.Value, present, ambiguous bool) {
	if obj.Kind() != canon.KindObject {
		return canon.Value{}, false, false
	}
	if v, ok := obj.Get(name); ok {
		return v, true, false
	}
	if obj.HasDuplicates() {
		n := 0
		for _, m := range obj.Members() {
			if m.Name == name {
				n++
			}
		}
		return canon.Value{}, false, n > 1
	}
	return canon.Value{}, false, false
}

// rpcID records a JSON-RPC id exactly: its JSON type and exact text, or the
// text's digest beyond MaxRPCIDTextBytes.
func rpcID(v canon.Value, present bool) JSONRPCID {
	if !present {
		return JSONRPCID{Present: false}
	}
	id := JSONRPCID{Present: true}
	switch v.Kind() {
	case canon.KindString:
		id.Kind = IDString
	case canon.KindNumber:
		id.Kind = IDNumber
	case canon.KindNull:
		id.Kind = IDNull
	default:
		id.Kind = IDOther
	}
	raw := v.Raw()
	if len(raw) > MaxRPCIDTextBytes {
		id.Digest = canon.SHA256(raw)
	} else {
		id.Text = string(raw)
	}
	return id
}

// DeriveRequest derives an attempt's members from the exact request line
// (without its terminator). It fails with a *NotToolCallError when the
// bytes are not a tools/call request the producer records. toolUseMeta
// are the header's extra tool-use id keys (Header.ToolUseMeta), read after
// the known ones.
func DeriveRequest(body []byte, toolUseMeta ...string) (*RequestFacts, error) {
	root, err := parseMessage(body)
	if err != nil {
		return nil, &NotToolCallError{"not JSON the recorder can read: " + err.Error()}
	}
	return DeriveRequestFrom(root, toolUseMeta...)
}

// DeriveRequestFrom is DeriveRequest on a message already parsed (the
// gate's reading, mcpwire.Message.Root): the proxy parses each frame once.
func DeriveRequestFrom(root canon.Value, toolUseMeta ...string) (*RequestFacts, error) {
	meth, ok := root.Get("method")
	if s, isStr := meth.Str(); !ok || !isStr || s != mcpwire.MethodToolsCall {
		return nil, &NotToolCallError{"method is not tools/call"}
	}
	// An absent id is recorded as absent (JSON-RPC would call the message a
	// notification; it is still a tools/call the caller dispatches). A
	// repeated id has no single value to record.
	idv, present, ambiguous := member(root, "id")
	if ambiguous {
		return nil, &NotToolCallError{"the id member is repeated"}
	}
	q := &RequestFacts{RPCID: rpcID(idv, present)}
	if present {
		q.IDText = string(idv.Raw())
	}
	params, _, _ := member(root, "params")

	switch name, present, _ := member(params, "name"); {
	case !present:
		q.ToolInvalid = toolAbsent
	case name.Kind() != canon.KindString:
		q.ToolInvalid = toolNotString
	default:
		s, _ := name.Str()
		if len(s) > maxToolNameBytes {
			q.ToolInvalid = toolTooLong
		} else {
			q.Tool = s
		}
	}
	if args, present, ambiguous := member(params, "arguments"); ambiguous {
		q.ArgsUnsupported = string(canon.CodeDuplicateKey)
	} else if present {
		d, err := args.Digest(canon.PolicyMCPDecl)
		if err != nil {
			q.ArgsUnsupported = canonCode(err)
		} else {
			q.ArgsDigest = d
		}
	}
	_, ir, _ := member(params, "inputResponses")
	_, rs, _ := member(params, "requestState")
	q.Continues = ir || rs

	meta, metaPresent, metaAmbiguous := member(params, "_meta")
	switch {
	case metaAmbiguous || metaPresent && meta.Kind() != canon.KindObject:
		q.ProtoState = ProtoMalformed
		return q, nil
	case !metaPresent:
		q.ProtoState = ProtoAbsent
		return q, nil
	}
	switch pv, present, ambiguous := member(meta, mcpwire.MetaProtocolVersion); {
	case ambiguous:
		q.ProtoState = ProtoMalformed
	case !present:
		q.ProtoState = ProtoAbsent
	default:
		if s, ok := pv.Str(); ok && mcpwire.IsRevision(s) {
			q.ProtoState, q.ProtoVersion = ProtoPresent, s
		} else {
			q.ProtoState = ProtoMalformed
		}
	}
	q.Correlation.Traceparent, _ = corrValue(meta, mcpwire.MetaTraceparent, checkTraceparent)
	q.Correlation.Tracestate, _ = corrValue(meta, mcpwire.MetaTracestate, checkTracestate)
	q.Correlation.CorrelationID, q.CorrelationID = corrValue(meta, mcpwire.MetaCorrelationID, checkCorrelationID)
	q.Correlation.RetryOf, q.RetryOf = corrValue(meta, mcpwire.MetaRetryOf, checkCorrelationID)
	for _, k := range slices.Concat(metaToolUseIDs, toolUseMeta) {
		if v, valid := corrValue(meta, k, checkCorrelationID); v != nil {
			q.Correlation.ToolUseID, q.ToolUseID = v, valid
			break
		}
	}
	return q, nil
}

// corrValue applies a safe-shape check to a _meta member: absent -> nil;
// valid -> its value; invalid -> the reason only, never the raw bytes.
func corrValue(meta canon.Value, name string, check func(string) string) (*CorrValue, string) {
	v, present, ambiguous := member(meta, name)
	switch {
	case ambiguous:
		return &CorrValue{Reason: CorrBadShape}, ""
	case !present:
		return nil, ""
	}
	s, ok := v.Str()
	if !ok {
		return &CorrValue{Reason: CorrNotString}, ""
	}
	if r := check(s); r != "" {
		return &CorrValue{Reason: r}, ""
	}
	return &CorrValue{Valid: true, Value: s}, s
}

func canonCode(err error) string {
	if ce, ok := err.(*canon.Error); ok {
		return string(ce.Code)
	}
	return "unsupported"
}

// ResponseFacts is what a response line says, as recorded in an
// observation line.
type ResponseFacts struct {
	ResultType string // result_type ("" when not recorded)
	IsError    bool   // is_error
	ErrorCode  *int64 // error_code
}

// DeriveResponse derives an observation's members from the exact response
// line (without its terminator). Bytes it cannot read derive no facts.
func DeriveResponse(body []byte) ResponseFacts {
	root, err := parseMessage(body)
	if err != nil {
		return ResponseFacts{}
	}
	return DeriveResponseFrom(root)
}

// DeriveResponseFrom is DeriveResponse on a message already parsed.
func DeriveResponseFrom(root canon.Value) ResponseFacts {
	if res, present, _ := member(root, "result"); present {
		r := ResponseFacts{ResultType: "complete"} // MCP: a result without resultType is complete
		if rt, present, ambiguous := member(res, "resultType"); present || ambiguous {
			r.ResultType = ""
			if s, ok := rt.Str(); ok && len(s) <= MaxReportedBytes && s != ResultTypeError {
				r.ResultType = s
			}
		}
		if ie, present, _ := member(res, "isError"); present {
			r.IsError, _ = ie.Bool()
		}
		return r
	}
	if e, present, _ := member(root, "error"); present {
		r := ResponseFacts{ResultType: ResultTypeError}
		if c, present, _ := member(e, "code"); present && c.Kind() == canon.KindNumber {
			if n, err := strconv.ParseInt(string(c.Raw()), 10, 64); err == nil && n >= -canon.MaxSafeInteger && n <= canon.MaxSafeInteger {
				r.ErrorCode = &n
			}
		}
		return r
	}
	return ResponseFacts{}
}

// NotificationFacts is what a notification line says, as recorded in a
// notification line.
type NotificationFacts struct {
	Method        string     // method
	RequestID     *JSONRPCID // request_id: a notifications/cancelled's params.requestId
	RequestIDText string     // the key it is matched by (mcpwire.Key: its canonical form, by value), "" when absent
	HasID         bool       // the message has an id member: it is a request, not a notification
}

// DeriveNotification derives a notification's members from its exact bytes
// (without the terminator). It fails with ErrNoMethod when there is no
// readable method, or with the parse error.
func DeriveNotification(body []byte) (NotificationFacts, error) {
	root, err := parseMessage(body)
	if err != nil {
		return NotificationFacts{}, err
	}
	return DeriveNotificationFrom(root)
}

// DeriveNotificationFrom is DeriveNotification on a message already parsed.
func DeriveNotificationFrom(root canon.Value) (NotificationFacts, error) {
	m, present, _ := member(root, "method")
	s, ok := m.Str()
	if !present || !ok || s == "" || len(s) > MaxReportedBytes {
		return NotificationFacts{}, ErrNoMethod
	}
	n := NotificationFacts{Method: s}
	_, n.HasID, _ = member(root, "id")
	if s == mcpwire.NotifyCancelled {
		params, _, _ := member(root, "params")
		if rid, present, _ := member(params, "requestId"); present {
			id := rpcID(rid, true)
			n.RequestID, n.RequestIDText = &id, mcpwire.Key(rid)
		}
	}
	return n, nil
}

// FrameFacts is what the gate reads from one frame, as a frame line records
// it.
type FrameFacts struct {
	Kind   string     // FrameRequest, FrameNotification, FrameResponse or FrameUnread
	Rule   string     // with FrameUnread: the gate rule
	Method string     // requests and notifications, when reportable
	RPCID  *JSONRPCID // requests and responses
}

// DeriveFrame reads one frame (its exact bytes with the terminator) with
// the gate, mcpwire.Read. The producer records what it returns; a verifier
// re-derives it from retained bytes.
func DeriveFrame(line []byte) FrameFacts {
	m, r := mcpwire.Read(line)
	return FrameFactsOf(m, r)
}

// FrameFactsOf states what the gate's reading (exactly one of m and r is
// non-nil) says in a frame line.
func FrameFactsOf(m *mcpwire.Message, r *mcpwire.Refusal) FrameFacts {
	if r != nil {
		return FrameFacts{Kind: FrameUnread, Rule: string(r.Rule)}
	}
	f := FrameFacts{}
	switch m.Kind {
	case mcpwire.KindRequest:
		f.Kind = FrameRequest
	case mcpwire.KindNotification:
		f.Kind = frameNotification
	default:
		f.Kind = FrameResponse
	}
	if f.Kind != FrameResponse && len(m.Method) <= MaxReportedBytes {
		f.Method = m.Method
	}
	if m.Kind != mcpwire.KindNotification {
		id := rpcID(m.ID, true)
		f.RPCID = &id
	}
	return f
}

// metaToolUseIDs are the _meta keys under which agent hosts put their own
// id of the tool use behind a tools/call (Claude Code's
// claudecode/toolUseId; seeds/request-decision-receipts.txt), in the order
// the recorder looks for one.
var metaToolUseIDs = []string{"claudecode/toolUseId"}
