package producer

import (
	"errors"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// The recorder derives every member of an attempt, observation and
// notification line from the message bytes with transcript's Derive*
// functions: a verifier re-derives them from the retained bytes with the
// same code (spec/verification.md, "Payloads"), so the two never drift.

// splitTerminator separates an exact line from its terminator.
func splitTerminator(line []byte) ([]byte, string) {
	n := len(line)
	switch {
	case n >= 2 && line[n-2] == '\r' && line[n-1] == '\n':
		return line[:n-2], mcpwire.TermCRLF
	case n >= 1 && line[n-1] == '\n':
		return line[:n-1], mcpwire.TermLF
	}
	return line, mcpwire.TermNone
}

// request is what the recorder reads from a tools/call request line.
type request struct {
	id         transcript.JSONRPCID
	idKey      string // exact id text: what a notifications/cancelled names ("" when absent)
	tool       string
	toolBad    string // tool_invalid: "absent", "not_string" or "too_long"
	argsDigest string
	argsBad    string // canon code when arguments cannot be canonicalized
	protoState string // transcript.ProtoPresent / ProtoAbsent / ProtoMalformed
	protoValue string
	corr       transcript.Correlation
	corrID     string // the valid caller correlation id, or ""
	retryOf    string // the valid declared retry correlation id, or ""
	toolUseID  string // the valid agent host's tool-use id, or ""
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

// parseRequest reads a tools/call request, from the gate's parse when the
// caller has one; otherwise it parses body once, and returns that parse as
// the message too (redaction walks it).
func parseRequest(body []byte, m *mcpwire.Message, toolUseMeta ...string) (*request, *mcpwire.Message, error) {
	var f *transcript.RequestFacts
	var err error
	if m == nil {
		var perr error
		if m, perr = parseLoose(body); perr != nil {
			return nil, nil, &notToolCall{"not JSON the recorder can read: " + perr.Error()}
		}
	}
	f, err = transcript.DeriveRequestFrom(m.Root, toolUseMeta...)
	if err != nil {
		var nt *transcript.NotToolCallError
		if errors.As(err, &nt) {
			return nil, nil, &notToolCall{nt.Reason}
		}
		return nil, nil, &notToolCall{err.Error()}
	}
	return &request{
		id: f.RPCID, idKey: f.IDText,
		tool: f.Tool, toolBad: f.ToolInvalid,
		argsDigest: f.ArgsDigest, argsBad: f.ArgsUnsupported,
		protoState: f.ProtoState, protoValue: f.ProtoVersion,
		corr: f.Correlation, corrID: f.CorrelationID, retryOf: f.RetryOf, toolUseID: f.ToolUseID,
		continues: f.Continues,
	}, m, nil
}

// response is what the recorder reads from a response line.
type response struct {
	resultType string
	isError    bool
	errorCode  *int64
}

// parseLoose parses a frame as the recorder reads one (duplicate names
// allowed, bounded by transcript.MaxDeriveBytes).
func parseLoose(body []byte) (*mcpwire.Message, error) {
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: transcript.MaxDeriveBytes}, AllowDuplicateKeys: true})
	if err != nil {
		return nil, err
	}
	return &mcpwire.Message{Body: body, Root: doc.Root()}, nil
}

func parseResponse(body []byte, m *mcpwire.Message) response {
	var f transcript.ResponseFacts
	if m != nil {
		f = transcript.DeriveResponseFrom(m.Root)
	} else {
		f = transcript.DeriveResponse(body)
	}
	return response{resultType: f.ResultType, isError: f.IsError, errorCode: f.ErrorCode}
}

// notification is what the recorder reads from a notification line.
type notification struct {
	method    string
	requestID *transcript.JSONRPCID
	idKey     string
}

func parseNotification(body []byte, m *mcpwire.Message) (notification, error) {
	var f transcript.NotificationFacts
	var err error
	if m != nil {
		f, err = transcript.DeriveNotificationFrom(m.Root)
	} else {
		f, err = transcript.DeriveNotification(body)
	}
	if errors.Is(err, transcript.ErrNoMethod) {
		return notification{}, errNoMethod
	}
	if err != nil {
		return notification{}, err
	}
	return notification{method: f.Method, requestID: f.RequestID, idKey: f.RequestIDText}, nil
}
