package producer

import (
	"strconv"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// maxInterpretBytes bounds how much of one message the recorder parses to
// read its members. It equals the canon default: the proxy never hands over
// a longer line (it streams those), and a Go caller's longer message is
// refused rather than recorded half-understood.
const maxInterpretBytes = canon.DefaultMaxBytes

// splitTerminator separates an exact line from its terminator.
func splitTerminator(line []byte) ([]byte, string) {
	n := len(line)
	switch {
	case n >= 2 && line[n-2] == '\r' && line[n-1] == '\n':
		return line[:n-2], transcript.TermCRLF
	case n >= 1 && line[n-1] == '\n':
		return line[:n-1], transcript.TermLF
	}
	return line, transcript.TermNone
}

// parse reads a JSON-RPC message. Duplicate member names are tolerated in
// the document (the exact bytes are what is committed), but a repeated
// member is never read: canon.Value.Get reports it as not there.
func parse(body []byte) (canon.Value, error) {
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: maxInterpretBytes}, AllowDuplicateKeys: true})
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
// text's digest beyond transcript.MaxRPCIDTextBytes.
func rpcID(v canon.Value, present bool) transcript.JSONRPCID {
	if !present {
		return transcript.JSONRPCID{Present: false}
	}
	id := transcript.JSONRPCID{Present: true}
	switch v.Kind() {
	case canon.KindString:
		id.Kind = transcript.IDString
	case canon.KindNumber:
		id.Kind = transcript.IDNumber
	case canon.KindNull:
		id.Kind = transcript.IDNull
	default:
		id.Kind = transcript.IDOther
	}
	raw := v.Raw()
	if len(raw) > transcript.MaxRPCIDTextBytes {
		id.Digest = canon.SHA256(raw)
	} else {
		id.Text = string(raw)
	}
	return id
}

// request is what the recorder reads from a tools/call request line.
type request struct {
	id         transcript.JSONRPCID
	idKey      string // exact id text: what a notifications/cancelled names ("" when absent)
	tool       string
	toolBad    string // transcript.ToolAbsent / ToolNotString / ToolTooLong
	argsDigest string
	argsBad    string // canon code when arguments cannot be canonicalized
	protoState string // transcript.ProtoPresent / ProtoAbsent / ProtoMalformed
	protoValue string
	corr       transcript.Correlation
	corrID     string // the valid caller correlation id, or ""
	retryOf    string // the valid declared retry correlation id, or ""
	continues  bool   // params carry inputResponses or requestState
}

// argsKey identifies "the same tool with the same canonical arguments" for
// retry inference; "" when the arguments cannot be compared.
func (q *request) argsKey() string {
	if q.toolBad != "" || q.argsBad != "" {
		return ""
	}
	return q.tool + "\x00" + q.argsDigest
}

func parseRequest(body []byte) (*request, error) {
	root, err := parse(body)
	if err != nil {
		return nil, &notToolCall{"not JSON the recorder can read: " + err.Error()}
	}
	meth, ok := root.Get("method")
	if s, isStr := meth.Str(); !ok || !isStr || s != "tools/call" {
		return nil, &notToolCall{"method is not tools/call"}
	}
	// An absent id is recorded as absent (JSON-RPC would call the message a
	// notification; it is still a tools/call the caller dispatches). A
	// repeated id has no single value to record.
	idv, present, ambiguous := member(root, "id")
	if ambiguous {
		return nil, &notToolCall{"the id member is repeated"}
	}
	q := &request{id: rpcID(idv, present)}
	if present {
		q.idKey = string(idv.Raw())
	}
	params, _, _ := member(root, "params")

	switch name, present, _ := member(params, "name"); {
	case !present:
		q.toolBad = transcript.ToolAbsent
	case name.Kind() != canon.KindString:
		q.toolBad = transcript.ToolNotString
	default:
		s, _ := name.Str()
		if len(s) > transcript.MaxToolNameBytes {
			q.toolBad = transcript.ToolTooLong
		} else {
			q.tool = s
		}
	}
	if args, present, ambiguous := member(params, "arguments"); ambiguous {
		q.argsBad = string(canon.CodeDuplicateKey)
	} else if present {
		d, err := args.Digest(canon.PolicyMCPDecl)
		if err != nil {
			q.argsBad = codeOf(err)
		} else {
			q.argsDigest = d
		}
	}
	_, ir, _ := member(params, "inputResponses")
	_, rs, _ := member(params, "requestState")
	q.continues = ir || rs

	meta, metaPresent, metaAmbiguous := member(params, "_meta")
	switch {
	case metaAmbiguous || metaPresent && meta.Kind() != canon.KindObject:
		q.protoState = transcript.ProtoMalformed
		return q, nil
	case !metaPresent:
		q.protoState = transcript.ProtoAbsent
		return q, nil
	}
	switch pv, present, ambiguous := member(meta, transcript.MetaProtocolVersion); {
	case ambiguous:
		q.protoState = transcript.ProtoMalformed
	case !present:
		q.protoState = transcript.ProtoAbsent
	default:
		if s, ok := pv.Str(); ok && isRevision(s) {
			q.protoState, q.protoValue = transcript.ProtoPresent, s
		} else {
			q.protoState = transcript.ProtoMalformed
		}
	}
	q.corr.Traceparent, _ = corrValue(meta, transcript.MetaTraceparent, transcript.CheckTraceparent)
	q.corr.Tracestate, _ = corrValue(meta, transcript.MetaTracestate, transcript.CheckTracestate)
	q.corr.CorrelationID, q.corrID = corrValue(meta, transcript.MetaCorrelationID, transcript.CheckCorrelationID)
	q.corr.RetryOf, q.retryOf = corrValue(meta, transcript.MetaRetryOf, transcript.CheckCorrelationID)
	return q, nil
}

// corrValue applies a safe-shape check to a _meta member: absent -> nil;
// valid -> its value; invalid -> the reason only, never the raw bytes.
func corrValue(meta canon.Value, name string, check func(string) string) (*transcript.CorrValue, string) {
	v, present, ambiguous := member(meta, name)
	switch {
	case ambiguous:
		return &transcript.CorrValue{Reason: transcript.CorrBadShape}, ""
	case !present:
		return nil, ""
	}
	s, ok := v.Str()
	if !ok {
		return &transcript.CorrValue{Reason: transcript.CorrNotString}, ""
	}
	if r := check(s); r != "" {
		return &transcript.CorrValue{Reason: r}, ""
	}
	return &transcript.CorrValue{Valid: true, Value: s}, s
}

// isRevision accepts MCP's YYYY-MM-DD revision strings.
func isRevision(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i != 4 && i != 7 && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

func codeOf(err error) string {
	if ce, ok := err.(*canon.Error); ok {
		return string(ce.Code)
	}
	return "unsupported"
}

// response is what the recorder reads from a response line.
type response struct {
	resultType string
	isError    bool
	errorCode  *int64
}

func parseResponse(body []byte) response {
	root, err := parse(body)
	if err != nil {
		return response{}
	}
	if res, present, _ := member(root, "result"); present {
		r := response{resultType: "complete"} // MCP: a result without resultType is complete
		if rt, present, ambiguous := member(res, "resultType"); present || ambiguous {
			r.resultType = ""
			if s, ok := rt.Str(); ok && len(s) <= transcript.MaxReportedBytes && s != transcript.ResultTypeError {
				r.resultType = s
			}
		}
		if ie, present, _ := member(res, "isError"); present {
			r.isError, _ = ie.Bool()
		}
		return r
	}
	if e, present, _ := member(root, "error"); present {
		r := response{resultType: transcript.ResultTypeError}
		if c, present, _ := member(e, "code"); present && c.Kind() == canon.KindNumber {
			if n, err := strconv.ParseInt(string(c.Raw()), 10, 64); err == nil && n >= -canon.MaxSafeInteger && n <= canon.MaxSafeInteger {
				r.errorCode = &n
			}
		}
		return r
	}
	return response{}
}

// notification is what the recorder reads from a notification line.
type notification struct {
	method    string
	requestID *transcript.JSONRPCID
	idKey     string
}

func parseNotification(body []byte) (notification, error) {
	root, err := parse(body)
	if err != nil {
		return notification{}, err
	}
	m, present, _ := member(root, "method")
	s, ok := m.Str()
	if !present || !ok || s == "" || len(s) > transcript.MaxReportedBytes {
		return notification{}, errNoMethod
	}
	n := notification{method: s}
	if s == "notifications/cancelled" {
		params, _, _ := member(root, "params")
		if rid, present, _ := member(params, "requestId"); present {
			id := rpcID(rid, true)
			n.requestID, n.idKey = &id, string(rid.Raw())
		}
	}
	return n, nil
}
