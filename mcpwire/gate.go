package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
)

// Limits of the gate (spec/transcript.md, "The gate").
const (
	// MaxFrameBytes bounds the bytes of one frame the gate reads, terminator
	// excluded. A client frame over it is refused; a server frame over it is
	// committed by digest and length, unread.
	MaxFrameBytes = canon.DefaultMaxBytes
	// MaxFrameDepth bounds nesting. Deeper frames are refused rather than
	// forwarded unread: a server with a deeper limit would execute them.
	MaxFrameDepth = canon.DefaultMaxDepth
	// maxFrameValues bounds the JSON values in one frame, counted before it
	// is parsed: the parser's memory grows with values, not bytes, and 64
	// MiB of "[0,0,0,...]" is 32 million of them. A tools/list page of
	// 10,000 real declarations holds about half a million.
	maxFrameValues = 1 << 21
)

// Rule names the gate rule a frame broke. Rules are stable, documented in
// spec/transcript.md ("Refusal rules") and never renamed. The gate's
// list (clientRules, checked against the spec by its tests) and
// [ServerRules] name them all; a rule only this package applies has no
// exported constant (compare [Refusal.Rule] with its documented name), a
// rule another package applies or reports (a frame over the size limit,
// an HTTP status, a media type) has one.
type Rule string

// The gate's rules, in the order Read applies them.
const (
	RuleTooLarge        Rule = "frame_too_large"     // over MaxFrameBytes
	ruleUnterminated    Rule = "unterminated"        // the stream ended without LF: a line reader may still take it
	ruleBOM             Rule = "bom"                 // starts with a UTF-8 byte order mark, which lenient decoders skip
	ruleBareCR          Rule = "bare_cr"             // a CR other than the CRLF terminator: a line reader may split there
	ruleDuplicateMember Rule = "duplicate_member"    // a member name repeated in one object, at any depth
	ruleTooDeep         Rule = "too_deep"            // nesting deeper than MaxFrameDepth
	ruleTooManyValues   Rule = "too_many_values"     // more than maxFrameValues JSON values
	ruleInvalidJSON     Rule = "invalid_json"        // not strict RFC 8259 JSON (NaN, Infinity, invalid UTF-8, lone surrogates, two values, ...)
	ruleBatch           Rule = "batch"               // a JSON-RPC batch array (removed from MCP in 2025-06-18)
	ruleNotObject       Rule = "not_object"          // a JSON value that is not an object
	ruleCaseVariant     Rule = "case_variant_member" // a member name that differs from an envelope or tools/call member only by letter case
	ruleNotJSONRPC      Rule = "not_jsonrpc"         // jsonrpc is not "2.0", or the members fit no JSON-RPC message
	ruleBadMethod       Rule = "bad_method"          // method is not a string
	ruleBadID           Rule = "bad_id"              // a request's id is an object, array or boolean, or not in canonical form
)

// clientRules lists every rule of the gate, for the tests that hold the
// spec to it.
var clientRules = []Rule{
	RuleTooLarge, ruleUnterminated, ruleBOM, ruleBareCR, ruleTooManyValues, ruleDuplicateMember, ruleTooDeep,
	ruleInvalidJSON, ruleBatch, ruleNotObject, ruleCaseVariant, ruleNotJSONRPC, ruleBadMethod, ruleBadID,
}

// Refusal says why a frame is not understood. A client frame refused is
// never forwarded; a server frame refused is still committed and delivered.
type Refusal struct {
	Rule   Rule
	Detail string // which member or byte, bounded; never the frame itself
	// ID is the exact JSON text of the frame's id when it can be read
	// unambiguously (a string or number), else "null": the id the refusal
	// answers with.
	ID  string
	Err error // the *canon.Error behind invalid_json, duplicate_member, too_deep
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return "frame refused: " + string(r.Rule)
	}
	return "frame refused: " + string(r.Rule) + ": " + r.Detail
}

func (r *Refusal) Unwrap() error { return r.Err }

// Kind is what a frame the gate understood is.
type Kind uint8

// Message kinds.
const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // id and exactly one of result and error
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Message is a frame the gate understood: one strict JSON-RPC object. The
// values point into the parsed frame; the frame bytes are never changed.
type Message struct {
	Kind       Kind
	Body       []byte // the exact frame without its terminator
	Terminator string // TermLF or TermCRLF
	Root       canon.Value
	Method     string      // requests and notifications
	ID         canon.Value // valid when the id member is present
	Params     canon.Value // valid when present
	Result     canon.Value // responses: valid when a result
	Error      canon.Value // responses: valid when an error
}

// IDText is the exact JSON text of the id ("" when absent): what responses
// and cancellations are matched by.
func (m *Message) IDText() string {
	if !m.ID.Valid() {
		return ""
	}
	return string(m.ID.Raw())
}

// IsToolCall reports whether the message is a tools/call, with or without
// an id (a tools/call without an id is still dispatched by lenient servers).
func (m *Message) IsToolCall() bool {
	return (m.Kind == KindRequest || m.Kind == KindNotification) && m.Method == MethodToolsCall
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// envelope and toolCallParams are the members whose case variants a
// lenient decoder (Go's encoding/json, for one) would read as them.
var (
	envelopeNames  = []string{memberJSONRPC, memberID, memberMethod, memberParams, memberResult, memberError}
	toolCallParams = []string{"name", "arguments", "_meta"}
)

// Read is the gate: the one strict reading of one stdio frame (its exact
// bytes, terminator included). It returns the message when the frame is
// exactly one JSON-RPC 2.0 object on one LF- or CRLF-terminated line, in the
// canon grammar within MaxFrameBytes and MaxFrameDepth, with no repeated
// member at any depth and no member name that differs from an envelope
// member (or, in a tools/call, from name, arguments or _meta) only by letter
// case. Anything else is refused, with the rule it broke.
//
// The rules exist because real servers parse leniently (NaN, BOMs,
// case-insensitive names, the last of repeated members, several values per
// line, batches): a frame the monitor did not understand exactly may be a
// tool call it did not record.
func Read(line []byte) (*Message, *Refusal) { return read(line, MaxFrameBytes) }

// ReadLarge is [Read] with a size limit of maxBytes (at most 2^31-1)
// instead of MaxFrameBytes, every other rule the same: for a server frame
// that was spooled whole because it is longer than the gate holds, which a
// proxy reads in memory only when it answers a call waiting for it (the
// caller bounds that memory).
func ReadLarge(line []byte, maxBytes int64) (*Message, *Refusal) { return read(line, maxBytes) }

func read(line []byte, maxBytes int64) (*Message, *Refusal) {
	body, term := SplitTerminator(line)
	if int64(len(body)) > maxBytes {
		return nil, &Refusal{Rule: RuleTooLarge, Detail: "over the gate's limit", ID: "null"}
	}
	if term == TermNone {
		return nil, &Refusal{Rule: ruleUnterminated, Detail: "no LF before the end of the stream", ID: readableID(body)}
	}
	if bytes.HasPrefix(body, bom) {
		return nil, &Refusal{Rule: ruleBOM, Detail: "a UTF-8 byte order mark at byte 0", ID: readableID(body[len(bom):])}
	}
	if i := bytes.IndexByte(body, '\r'); i >= 0 {
		return nil, &Refusal{Rule: ruleBareCR, Detail: "a CR at byte " + strconv.Itoa(i) + " that does not end the line", ID: "null"}
	}
	// Every value but the first follows a byte of its own, so a frame
	// shorter than maxFrameValues cannot hold too many: the scan is only
	// needed for longer ones.
	if len(body) >= maxFrameValues {
		if n := valuesAtMost(body); n > maxFrameValues {
			return nil, &Refusal{Rule: ruleTooManyValues, Detail: "up to " + strconv.Itoa(n) + " JSON values, over the gate's " + strconv.Itoa(maxFrameValues), ID: "null"}
		}
	}
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: maxBytes, MaxDepth: MaxFrameDepth}})
	if err != nil {
		r := &Refusal{Rule: ruleInvalidJSON, ID: lenientID(body), Err: err}
		var ce *canon.Error
		if errors.As(err, &ce) {
			switch ce.Code {
			case canon.CodeDuplicateKey:
				r.Rule = ruleDuplicateMember
			case canon.CodeDepthLimit:
				r.Rule = ruleTooDeep
			case canon.CodeSizeLimit:
				r.Rule = RuleTooLarge
			}
			r.Detail = string(ce.Code) + " at byte " + strconv.Itoa(int(ce.Offset))
			if ce.Pointer != "" {
				r.Detail += " (" + bounded(ce.Pointer) + ")"
			}
		}
		return nil, r
	}
	root := doc.Root()
	switch root.Kind() {
	case canon.KindObject:
	case canon.KindArray:
		return nil, &Refusal{Rule: ruleBatch, Detail: "a JSON-RPC batch of " + strconv.Itoa(root.Len()) + " values", ID: "null"}
	default:
		return nil, &Refusal{Rule: ruleNotObject, Detail: "a JSON " + root.Kind().String(), ID: "null"}
	}
	// One pass over the envelope's members: the members by exact name (a
	// Doc has no repeated name: Parse refused them) and the first name
	// that is a case variant of one of them.
	env := envelopeOf(root)
	if env.variant != "" {
		return nil, &Refusal{Rule: ruleCaseVariant, Detail: "member " + bounded(env.variant) + " is not " + env.want, ID: env.readableID()}
	}
	m := &Message{Body: body, Terminator: term, Root: root}
	if v := env.jsonrpc; !v.Valid() {
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "no jsonrpc member", ID: env.readableID()}
	} else if string(v.Raw()) != `"2.0"` {
		if s, _ := v.Str(); s != "2.0" { // written with escapes
			return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: `jsonrpc is not "2.0"`, ID: env.readableID()}
		}
	}
	m.ID = env.id
	if m.ID.Valid() {
		switch m.ID.Kind() {
		case canon.KindString, canon.KindNumber, canon.KindNull:
		default:
			return nil, &Refusal{Rule: ruleBadID, Detail: "id is a JSON " + m.ID.Kind().String(), ID: "null"}
		}
	}
	if env.method.Valid() && m.ID.Valid() && !canonicalID(m.ID) {
		// Servers match ids by value (the Go SDK through float64, Python
		// and JavaScript after unescaping): 7, 7.0 and 7e0, or "a" and
		// "\u0061", are one id to them and several to a matcher of exact
		// text, which would then bind one call's response to another.
		return nil, &Refusal{Rule: ruleBadID, Detail: "a request id not in canonical form (an integer within ±(2^53-1) written plainly, or a string with minimal escapes)", ID: "null"}
	}
	m.Params, m.Result, m.Error = env.params, env.result, env.error
	if meth := env.method; meth.Valid() {
		s, isStr := methodOf(meth)
		if !isStr {
			return nil, &Refusal{Rule: ruleBadMethod, Detail: "method is a JSON " + meth.Kind().String(), ID: env.readableID()}
		}
		if m.Result.Valid() || m.Error.Valid() {
			return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "method together with result or error", ID: env.readableID()}
		}
		m.Method = s
		m.Kind = KindNotification
		if m.ID.Valid() {
			m.Kind = KindRequest
		}
		if s == MethodToolsCall && m.Params.Kind() == canon.KindObject {
			if name, want, ok := caseVariant(m.Params, toolCallParams); ok {
				return nil, &Refusal{Rule: ruleCaseVariant, Detail: "params member " + bounded(name) + " is not " + want, ID: env.readableID()}
			}
		}
		return m, nil
	}
	switch {
	case !m.ID.Valid():
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "neither method nor id", ID: env.readableID()}
	case m.Result.Valid() == m.Error.Valid():
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "a response needs exactly one of result and error", ID: env.readableID()}
	}
	m.Kind = KindResponse
	return m, nil
}

// envelope is what one pass over a frame's top-level members finds.
type envelope struct {
	jsonrpc, id, method, params, result, error canon.Value
	variant, want                              string // the first member (in document order) that is a case variant of an envelope name, and that name
	idVariant                                  bool   // some member is a case variant of "id"
}

// envelopeOf reads the envelope members of obj, a parsed object (so no
// name occurs twice in it).
func envelopeOf(obj canon.Value) envelope {
	var e envelope
	for _, mem := range obj.Members() {
		switch mem.Name {
		case memberJSONRPC:
			e.jsonrpc = mem.Value
		case memberID:
			e.id = mem.Value
		case memberMethod:
			e.method = mem.Value
		case memberParams:
			e.params = mem.Value
		case memberResult:
			e.result = mem.Value
		case memberError:
			e.error = mem.Value
		default:
			// Envelope names fold apart, so a name is a variant of one of
			// them at most.
			for _, n := range envelopeNames {
				if strings.EqualFold(mem.Name, n) {
					if e.variant == "" {
						e.variant, e.want = mem.Name, n
					}
					e.idVariant = e.idVariant || n == memberID
					break
				}
			}
		}
	}
	return e
}

// readableID is the id a refusal answers under: the id's exact text when
// it is a string or number and no other member is named like "id" in
// another letter case; else "null".
func (e *envelope) readableID() string {
	if e.idVariant || e.id.Kind() != canon.KindString && e.id.Kind() != canon.KindNumber {
		return "null"
	}
	return string(e.id.Raw())
}

// methodOf is the method's text: the method constants without a copy.
func methodOf(v canon.Value) (string, bool) {
	if v.Kind() != canon.KindString {
		return "", false
	}
	switch string(v.Raw()) {
	case `"` + MethodToolsCall + `"`:
		return MethodToolsCall, true
	case `"` + MethodToolsList + `"`:
		return MethodToolsList, true
	case `"` + NotifyProgress + `"`:
		return NotifyProgress, true
	case `"` + NotifyCancelled + `"`:
		return NotifyCancelled, true
	}
	return v.Str()
}

// valuesAtMost bounds the number of JSON values in b from above, without
// parsing: every value but the first follows a ',', '[' or ':' outside a
// string.
func valuesAtMost(b []byte) int {
	n := 1
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ',' || c == '[' || c == ':':
			n++
		}
	}
	return n
}

// canonicalID reports whether an id is written in its one canonical form
// (RFC 8785 under the TRACE v0.2 integer policy): equal ids then have equal
// text.
func canonicalID(id canon.Value) bool {
	raw := id.Raw()
	switch id.Kind() {
	case canon.KindString:
		// Validated and without a backslash: the string is its own
		// canonical form (no byte in it needs an escape).
		if bytes.IndexByte(raw, '\\') < 0 {
			return true
		}
	case canon.KindNumber:
		if plainInt(raw) {
			return true
		}
	}
	c, err := id.Canonical(canon.PolicyV02)
	return err == nil && bytes.Equal(c, id.Raw())
}

// plainInt reports whether b is an integer written plainly with at most 15
// digits (so within ±(2^53-1)): its own canonical form. Anything else is
// judged by canon.
func plainInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
		if len(b) == 1 && b[0] == '0' {
			return false // -0 is written 0
		}
	}
	if len(b) == 0 || len(b) > 15 || len(b) > 1 && b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Key is the text an id-like value (a request id, a cancellation's
// requestId, a progress token) is matched by: its canonical form when it
// has one (so 7.0 and 7, or "\u0061" and "a", match, as they do for the
// peers), else its exact text.
func Key(v canon.Value) string {
	if c, err := v.Canonical(canon.PolicyMCPDecl); err == nil {
		return string(c)
	}
	return string(v.Raw())
}

// caseVariant finds a member whose name equals one of names under Unicode
// simple case folding (as encoding/json matches field names) without being
// it.
func caseVariant(obj canon.Value, names []string) (got, want string, found bool) {
	for _, mem := range obj.Members() {
		for _, n := range names {
			if mem.Name != n && strings.EqualFold(mem.Name, n) {
				return mem.Name, n, true
			}
		}
	}
	return "", "", false
}

// readableID strictly parses body for its id alone; "null" unless it is one
// unambiguous string or number.
func readableID(body []byte) string {
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxFrameBytes, MaxDepth: MaxFrameDepth}})
	if err != nil {
		return lenientID(body)
	}
	if doc.Root().Kind() != canon.KindObject {
		return "null"
	}
	return readableIDOf(doc.Root())
}

// lenientID finds the id a client expects an answer under in a frame the
// strict parser refused (say, for a lone surrogate deep in the arguments):
// the frame's top level, read by a lenient decoder, must hold exactly one
// member named like "id" in any letter case, named exactly "id", whose
// value is a strict JSON string or number. It only addresses the refusal:
// nothing is recorded or forwarded on its word.
func lenientID(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "null"
	}
	var id json.RawMessage
	seen := 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "null"
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "null" // an id may follow where it cannot be read
		}
		if strings.EqualFold(name, memberID) {
			seen++
			if name == memberID {
				id = v
			}
		}
	}
	if seen != 1 || id == nil {
		return "null"
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return "null"
	}
	if _, err := dec.Token(); err != io.EOF { // a second value: whose id?
		return "null"
	}
	doc, err := canon.Parse(id, canon.ParseOptions{})
	if err != nil || doc.Root().Kind() != canon.KindString && doc.Root().Kind() != canon.KindNumber {
		return "null"
	}
	return string(id)
}

func readableIDOf(root canon.Value) string {
	if _, _, v := caseVariant(root, []string{memberID}); v {
		return "null"
	}
	id, ok := root.Get(memberID)
	if !ok || id.Kind() != canon.KindString && id.Kind() != canon.KindNumber {
		return "null"
	}
	return string(id.Raw())
}

// bounded quotes a peer-supplied name for a detail: at most 64 bytes, every
// byte outside printable ASCII escaped.
func bounded(s string) string {
	const max = 64
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s) && i < max; i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			const hex = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	if len(s) > max {
		b.WriteString("...")
	}
	b.WriteByte('"')
	return b.String()
}
