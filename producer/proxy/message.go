package proxy

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// MCP _meta keys the proxy reads. tracectl's own keys use its own prefix; the
// io.modelcontextprotocol/ prefix is reserved by MCP.
const (
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	MetaServerInfo      = "io.modelcontextprotocol/serverInfo"
	MetaCorrelationID   = "dev.tracectl/correlationId" // caller correlation id (seeds/correlation-id.txt)
	MetaRetryOf         = "dev.tracectl/retryOf"       // caller-declared retry: the correlation id of the earlier call
)

type msgKind uint8

const (
	kindInvalid      msgKind = iota // not a JSON-RPC message we can read: forwarded, not interpreted
	kindRequest                     // method + id
	kindNotification                // method, no id
	kindResponse                    // id + result or error
	// kindUnrecordableCall: a line a JSON-RPC peer could read as a
	// tools/call, but not exactly (invalid UTF-8, a lone surrogate, a
	// repeated id or method). It is refused, never forwarded unrecorded.
	kindUnrecordableCall
)

// message is what the proxy reads from one line. It never changes the line:
// the exact bytes are forwarded and committed, this is only an observation.
type message struct {
	kind   msgKind
	method string
	id     transcript.JSONRPCID
	idKey  string // exact id text: the key responses are matched by
	params canon.Value
	result canon.Value
	hasErr bool
	errNum canon.Value
	why    string // kindUnrecordableCall: what makes it unrecordable
}

// parseMessage reads a JSON-RPC message from one line (terminator removed).
// Ambiguous members (duplicate keys) make the member unreadable rather than
// picking one of its values.
func parseMessage(line []byte, maxBytes int64) message {
	doc, err := canon.Parse(line, canon.ParseOptions{Limits: canon.Limits{MaxBytes: maxBytes}, AllowDuplicateKeys: true})
	if err != nil {
		return lenientToolCall(line, err)
	}
	root := doc.Root()
	if root.Kind() != canon.KindObject {
		return message{}
	}
	if root.HasDuplicates() && anyToolCall(root) {
		if _, ok := root.Get("method"); !ok {
			return message{kind: kindUnrecordableCall, why: "its method member is repeated", idKey: exactID(root)}
		}
		if _, ok := root.Get("id"); !ok {
			return message{kind: kindUnrecordableCall, why: "its id member is repeated", idKey: "null"}
		}
	}
	var m message
	if id, ok := root.Get("id"); ok {
		m.id = transcript.JSONRPCID{Present: true, Kind: id.Kind().String(), Text: string(id.Raw())}
		m.idKey = string(id.Raw())
	} else {
		m.id = transcript.JSONRPCID{Present: false}
	}
	if meth, ok := root.Get("method"); ok {
		s, isStr := meth.Str()
		if !isStr {
			return message{}
		}
		m.method = s
		m.params, _ = root.Get("params")
		if m.id.Present {
			m.kind = kindRequest
		} else {
			m.kind = kindNotification
		}
		return m
	}
	if !m.id.Present {
		return message{}
	}
	if res, ok := root.Get("result"); ok {
		m.kind = kindResponse
		m.result = res
		return m
	}
	if e, ok := root.Get("error"); ok {
		m.kind = kindResponse
		m.hasErr = true
		m.errNum, _ = e.Get("code")
		return m
	}
	return message{}
}

// str returns a string member of an object value.
func str(v canon.Value, name string) (string, bool) {
	if !v.Valid() {
		return "", false
	}
	m, ok := v.Get(name)
	if !ok {
		return "", false
	}
	return m.Str()
}

// protocolState reads the per-request protocol revision of the modern era:
// present (a calendar-date string), absent, or malformed.
func (m message) protocolState() (state, version string) {
	if !m.params.Valid() {
		return "absent", ""
	}
	metaV, ok := m.params.Get("_meta")
	if !ok {
		return "absent", ""
	}
	if metaV.Kind() != canon.KindObject {
		return "malformed", ""
	}
	pv, ok := metaV.Get(MetaProtocolVersion)
	if !ok {
		if metaV.HasDuplicates() {
			return "malformed", ""
		}
		return "absent", ""
	}
	s, isStr := pv.Str()
	if !isStr || !isDateVersion(s) {
		return "malformed", ""
	}
	return "present", s
}

// isDateVersion accepts MCP's YYYY-MM-DD revision strings.
func isDateVersion(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// splitTerminator separates a line from its terminator and names it.
func splitTerminator(line []byte) ([]byte, string) {
	n := len(line)
	switch {
	case n >= 2 && line[n-2] == '\r' && line[n-1] == '\n':
		return line[:n-2], "crlf"
	case n >= 1 && line[n-1] == '\n':
		return line[:n-1], "lf"
	}
	return line, "none"
}

// anyToolCall reports whether any "method" member of the object says
// tools/call (a peer may read any one of repeated members).
func anyToolCall(root canon.Value) bool {
	for _, mem := range root.Members() {
		if mem.Name == "method" {
			if s, ok := mem.Value.Str(); ok && s == "tools/call" {
				return true
			}
		}
	}
	return false
}

// exactID returns the exact id text when the id member is unambiguous, else
// "null".
func exactID(root canon.Value) string {
	if id, ok := root.Get("id"); ok {
		return string(id.Raw())
	}
	return "null"
}

// lenientToolCall reads a line strict parsing refused the way a lenient
// JSON-RPC peer would (encoding/json: invalid UTF-8 and lone surrogates
// become U+FFFD, the last of repeated members wins). If that reading is a
// tools/call, the line must not reach the server unrecorded.
func lenientToolCall(line []byte, strictErr error) message {
	var env struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &env) != nil || env.Method != "tools/call" {
		return message{}
	}
	id := "null"
	if len(env.ID) > 0 && json.Valid(env.ID) && utf8.Valid(env.ID) {
		id = string(env.ID)
	}
	code := "invalid JSON"
	var ce *canon.Error
	if errors.As(strictErr, &ce) {
		code = string(ce.Code) + " at " + ce.Pointer
	}
	return message{kind: kindUnrecordableCall, why: "not strict JSON (" + code + ")", idKey: id}
}
