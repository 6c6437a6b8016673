package mcpwire

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
)

// Mediation rules: why a server frame that the gate reads is still not
// delivered (spec/transcript.md, "The gate", "Server to client"). Like the
// gate's rules they are stable and never renamed; a server frame refused by
// one of them is committed with the rule and never reaches the client.
const (
	// RuleSettledResponse: a response whose id a real client matches to a
	// request that already has its response (or the proxy's own answer).
	// Settlement is final: whatever the client did with the first answer
	// is what the evidence says.
	RuleSettledResponse Rule = "settled_response"
	// RuleIDTwin: a response whose id is not exactly a waiting request's
	// id but that some real client matches to it (the TypeScript SDK
	// matches Number(id): "4", " 4" and "0x4" answer request 4; the Go SDK
	// matches 4.0 to 4).
	RuleIDTwin Rule = "id_twin"
	// RuleUnsolicited: a response under an id no request is open under, by
	// any client's matching. Ids are sequential, so a server can answer a
	// request the client has registered and sent but the proxy has not
	// read yet: the client would act on an answer no attempt binds.
	RuleUnsolicited Rule = "unsolicited_response"
	// RuleHTTPStatus (HTTP): a JSON-RPC message in a body the clients treat
	// by its status, not as a message, and differently from one another: a
	// non-2xx body (the Go SDK and the TypeScript SDK v2 read a JSON-RPC
	// error from it, v1 does not), a 2xx other than 200 (the TypeScript SDK
	// discards a 202's body, the Go SDK reads it), an event stream on any
	// status but 200.
	RuleHTTPStatus Rule = "http_status"
	// RulePadded (stdio): a server line with white space after its JSON
	// object. The TypeScript SDK reads it; the Go SDK's stdio reader (a
	// json.Decoder that wants LF or CR right after each value) fails the
	// whole connection on it.
	RulePadded Rule = "padded"
	// RuleForeignResponse (HTTP): a response on one request's stream to an
	// id that is not that request's. The client routes it by id to
	// whatever waits under it, which the stream's exchange cannot commit
	// to.
	RuleForeignResponse Rule = "foreign_response"
	// RuleCaptureStream (HTTP): a message, other than the page, on the
	// stream of the proxy's own tools/list request (its collection
	// before a call). No client waits on that stream: it is committed and
	// never delivered.
	RuleCaptureStream Rule = "capture_stream"
)

// SSE rules: an event whose framing not every reader parses alike
// (WHATWG, the eventsource-parser package the TypeScript SDK reads with,
// and the Go SDK's reader). The event is committed, refused, and not
// delivered.
const (
	ruleSSEBOM        Rule = "sse_bom"        // a UTF-8 byte order mark before the first event: WHATWG readers strip it, others do not
	ruleSSEBareCR     Rule = "sse_bare_cr"    // a CR not followed by LF: WHATWG ends the line there, the Go SDK does not
	ruleSSEEventName  Rule = "sse_event_name" // an event: field other than exactly "message": readers skip it, or read it differently after whitespace
	ruleSSEField      Rule = "sse_field"      // a line that is not a data, event, id or retry field or a comment: readers disagree on it
	ruleSSEDataLines  Rule = "sse_data_lines" // more than one data line: readers join and trim them differently
	ruleSSETooLarge   Rule = "sse_too_large"  // an event over MaxFrameBytes
	RuleSSEUnfinished Rule = "sse_unfinished" // the stream ended inside an event: WHATWG drops it, the Go SDK dispatches it
	RuleMediaType     Rule = "media_type"     // a 2xx body whose Content-Type is not exactly application/json or text/event-stream: the TypeScript SDK matches by substring
)

// ServerRules lists the rules that refuse server frames beyond the gate's
// own, for documentation and tests.
var ServerRules = []Rule{
	RuleSettledResponse, RuleIDTwin, RuleUnsolicited, RulePadded, RuleClientSchema, RuleForeignResponse, RuleCaptureStream, RuleHTTPStatus,
	ruleSSEBOM, ruleSSEBareCR, ruleSSEEventName, ruleSSEField, ruleSSEDataLines, ruleSSETooLarge, RuleSSEUnfinished,
	RuleMediaType,
}

// MatchKey is the key by which some real client matches a response's id to
// its request: requests and responses with equal MatchKeys may be taken for
// one another by a client, whatever their exact text. It is the union of
// the readers: the TypeScript SDK's Number(id) (so "4", " 4", "0x4", "4.0"
// and 4 are one key, and null is 0), the Go SDK's match by numeric value,
// and exact strings.
//
// A number's key is its float64 value; a string that JavaScript's Number
// reads as a number has that number's key, any other string its own text.
func MatchKey(id canon.Value) string {
	switch id.Kind() {
	case canon.KindNumber:
		f, err := strconv.ParseFloat(string(id.Raw()), 64)
		if err != nil && !math.IsInf(f, 0) {
			return "t:" + string(id.Raw())
		}
		return numberKey(f)
	case canon.KindString:
		s, _ := id.Str()
		return stringKey(s)
	case canon.KindNull:
		return numberKey(0) // Number(null) is 0
	case canon.KindBool:
		if b, _ := id.Bool(); b {
			return numberKey(1)
		}
		return numberKey(0)
	}
	return "t:" + string(id.Raw())
}

// ResponseKeys are the MatchKeys of the requests a client could take a
// response with this id for: MatchKey, and for a number that is not an
// integer, its integer part too (the Go SDK reads a response's id 1.5 as
// 1).
func ResponseKeys(id canon.Value) []string {
	k := MatchKey(id)
	if id.Kind() == canon.KindNumber {
		if f, err := strconv.ParseFloat(string(id.Raw()), 64); err == nil && f != math.Trunc(f) {
			return []string{k, numberKey(math.Trunc(f))}
		}
	}
	return []string{k}
}

func stringKey(s string) string {
	if f, ok := jsNumber(s); ok {
		return numberKey(f)
	}
	return "s:" + s
}

func numberKey(f float64) string {
	if f == 0 {
		f = 0 // -0 and 0 are one key (SameValueZero)
	}
	return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
}

// jsNumber is JavaScript's Number(s) (ECMA-262 StringToNumber): ok is false
// where it gives NaN. Whitespace and line terminators around the number are
// ignored, "" is 0, Infinity may be signed, 0x, 0o and 0b prefixes are read
// (unsigned), and a decimal may omit either side of its point.
func jsNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, jsSpace)
	if s == "" {
		return 0, true
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			return radix(s[2:], base)
		}
	}
	// StrDecimalLiteral: [sign] (digits [. digits] | . digits) [exponent].
	i := 0
	if s[i] == '+' || s[i] == '-' {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && isDigit(s[i]) {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// radix reads an unsigned integer in base 2, 8 or 16 as JavaScript does:
// exactly, then rounded to float64.
func radix(s string, base int) (float64, bool) {
	if s == "" {
		return 0, false
	}
	f := 0.0
	for i := 0; i < len(s); i++ {
		d, err := strconv.ParseUint(s[i:i+1], base, 8)
		if err != nil {
			return 0, false
		}
		f = f*float64(base) + float64(d)
	}
	return f, true
}

// jsSpace is ECMA-262's WhiteSpace and LineTerminator.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// LenientIDs returns the MatchKeys of every id a lenient reader could take
// from body, a frame the gate refused: a UTF-8 BOM skipped (fetch's json()
// strips one), every JSON value in it (the Go SDK's stdio reader is a
// json.Decoder over the stream), every element of an array (the TypeScript
// SDK takes a batch), and every top-level member named "id" in any letter
// case (encoding/json matches field names so; JSON.parse keeps the last of
// repeated members, encoding/json too). It answers one question: could a
// client take this frame as the answer to a request? Nothing is recorded
// on its word.
func LenientIDs(body []byte) []string {
	body = bytes.TrimLeft(body, " \t\r\n")
	for bytes.HasPrefix(body, bom) {
		body = bytes.TrimLeft(body[len(bom):], " \t\r\n")
	}
	if len(body) > MaxFrameBytes {
		return nil
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for n := 0; n < maxLenientValues; n++ {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break // io.EOF, or bytes no reader takes further
		}
		switch first(v) {
		case '{':
			keys = appendIDs(keys, v)
		case '[':
			var elems []json.RawMessage
			if json.Unmarshal(v, &elems) == nil {
				for i, e := range elems {
					if i == maxLenientValues {
						break
					}
					if first(e) == '{' {
						keys = appendIDs(keys, e)
					}
				}
			}
		}
	}
	return keys
}

// maxLenientValues bounds the values LenientIDs looks into: a frame is
// within MaxFrameBytes already, this bounds the keys it can yield.
const maxLenientValues = 1024

func first(v []byte) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// appendIDs adds the keys of obj's members named like "id", repeated ones
// included.
func appendIDs(keys []string, obj []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return keys
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return keys
		}
		if !strings.EqualFold(name, memberID) || len(keys) >= maxLenientValues {
			continue
		}
		keys = append(keys, lenientKeys(v)...)
	}
	return keys
}

// lenientKeys are the ResponseKeys of a value encoding/json read (invalid
// UTF-8 and lone surrogates replaced, as both SDKs' readers do).
func lenientKeys(v json.RawMessage) []string {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil && err != io.EOF {
		return nil
	}
	switch x := x.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil
		}
		if f != math.Trunc(f) && !math.IsInf(f, 0) {
			return []string{numberKey(f), numberKey(math.Trunc(f))} // the Go SDK's reading too
		}
		return []string{numberKey(f)}
	case string:
		if !utf8.ValidString(x) {
			x = strings.ToValidUTF8(x, "\uFFFD")
		}
		return []string{stringKey(x)}
	case nil:
		return []string{numberKey(0)}
	case bool:
		if x {
			return []string{numberKey(1)}
		}
		return []string{numberKey(0)}
	}
	return nil // an object or array id: no client matches it
}

// RuleClientSchema: a message the gate reads that a real client reads
// differently or not at all (the differential readers in
// internal/clientread): a top-level member JSON-RPC does not define (the
// TypeScript SDK's schema refuses the message, so a response resolves
// nothing), a response id not in canonical form (the Go SDK reads 1.5 as
// 1, and 1e20 as a negative int64), an error that is not an object with an
// integer code and a string message (the Go SDK invents the missing ones),
// a result that is not an object, a request with a null id (the Go SDK
// reads a notification), params that are not an object.
const RuleClientSchema Rule = "client_schema"

// ClientReadable returns a refusal under RuleClientSchema when m, a server
// message the gate read, is one real clients read differently; nil when
// every client reads it as the gate did.
func (m *Message) ClientReadable() *Refusal {
	bad := func(detail string) *Refusal {
		return &Refusal{Rule: RuleClientSchema, Detail: detail, ID: "null"}
	}
	var unknown []byte
	m.Root.RangeMembers(func(name []byte, _ canon.Value) bool {
		switch string(name) {
		case memberJSONRPC, memberID, memberMethod, memberParams, memberResult, memberError:
			return true
		}
		unknown = name
		return false
	})
	if unknown != nil {
		// The raw name (escapes and all) suffices for a detail: a name
		// with an escape is not an envelope name either way.
		return bad("member " + bounded(string(unknown)) + " is not a JSON-RPC member")
	}
	switch m.Kind {
	case KindResponse:
		if m.ID.Kind() == canon.KindNull && !m.Error.Valid() {
			return bad("a result under a null id")
		}
		if !canonicalID(m.ID) {
			return bad("a response id not in canonical form")
		}
		if m.Result.Valid() && m.Result.Kind() != canon.KindObject {
			return bad("result is a JSON " + m.Result.Kind().String())
		}
		if m.Error.Valid() {
			code, hasCode := m.Error.Get("code")
			msg, hasMsg := m.Error.Get("message")
			if m.Error.Kind() != canon.KindObject || !hasCode || code.Kind() != canon.KindNumber || !plainInt(code.Raw()) || !hasMsg || msg.Kind() != canon.KindString {
				return bad("error is not an object with an integer code and a string message")
			}
		}
	case KindRequest:
		if m.ID.Kind() == canon.KindNull {
			return bad("a request with a null id")
		}
	}
	if (m.Kind == KindRequest || m.Kind == KindNotification) && m.Params.Valid() && m.Params.Kind() != canon.KindObject {
		return bad("params is a JSON " + m.Params.Kind().String())
	}
	if overflows(m.Body) {
		return bad("a number beyond float64 (encoding/json refuses it, JavaScript reads Infinity)")
	}
	return nil
}

// overflows reports whether a JSON text holds a number whose magnitude is
// beyond float64: one scan outside strings, parsing only numbers with an
// exponent or over 300 characters.
func overflows(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == '-' || c >= '0' && c <= '9':
			j, exp := i, false
			for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] >= '0' && b[j] <= '9') {
				exp = exp || b[j] == 'e' || b[j] == 'E'
				j++
			}
			if exp || j-i > 300 {
				if f, err := strconv.ParseFloat(string(b[i:j]), 64); err != nil && math.IsInf(f, 0) {
					return true
				}
			}
			i = j - 1
		}
	}
	return false
}
