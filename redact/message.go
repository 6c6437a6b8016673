package redact

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
)

// Redaction is one redacted value: where it was in the message (an RFC 6901
// JSON Pointer from the message's root) and the class that redacted it. It
// deliberately holds no offset or length: the list is retained as evidence,
// and a length says something about a secret.
type Redaction struct {
	Pointer string `json:"pointer"`
	Class   Class  `json:"class"`
}

// Result is a redacted message.
type Result struct {
	// Redacted is the message with each redacted value's token replaced by
	// the JSON string "[REDACTED:<class>]"; every other byte is the
	// input's. It is the input slice itself when nothing was redacted.
	Redacted []byte
	// Redactions are sorted by Pointer (byte order), then document order.
	Redactions []Redaction
}

// marker returns the JSON string token that replaces a value of class c.
func marker(c Class) []byte { return []byte(`"[REDACTED:` + string(c) + `]"`) }

// Message redacts one JSON-RPC message given as its exact bytes (one JSON
// value; surrounding whitespace is kept). See the package doc for what is
// redacted. rules nil means Default().
//
// A message that is not strict JSON (canon's grammar, duplicate names
// allowed) fails with CodeInvalidMessage, one whose member names hold a
// secret with CodeSecretInName, one with a value to redact under a
// repeated member name with CodeAmbiguousPointer; in each case the caller
// must not retain the message's bytes at all.
func Message(msg []byte, rules *Rules) (Result, error) {
	res, _, err := message(msg, rules)
	return res, err
}

// message is Message that also returns the spans it replaced, in document
// order, for tests.
func message(msg []byte, rules *Rules) (Result, []span, error) {
	if rules == nil {
		rules = Default()
	}
	doc, err := canon.Parse(msg, canon.ParseOptions{Limits: rules.limits, AllowDuplicateKeys: true})
	if err != nil {
		// canon's detail quotes input and its pointer names members,
		// either of which may be a secret here: keep the code and the
		// offset only, so the error is safe to log.
		var ce *canon.Error
		if errors.As(err, &ce) {
			err = &canon.Error{Code: ce.Code, Offset: ce.Offset, Detail: "detail withheld: the input may hold a secret"}
		}
		return Result{}, nil, &Error{Code: CodeInvalidMessage, Rule: -1, Err: err}
	}
	return redactRoot(msg, doc.Root(), rules)
}

// MessageParsed is Message for a message already parsed: root must be the
// root of a canon parse of exactly msg (the gate's reading of a frame,
// mcpwire.Message.Root), so its values' offsets are msg's. It saves the
// second parse; the result is Message's.
func MessageParsed(msg []byte, root canon.Value, rules *Rules) (Result, error) {
	if rules == nil {
		rules = Default()
	}
	res, _, err := redactRoot(msg, root, rules)
	return res, err
}

func redactRoot(msg []byte, root canon.Value, rules *Rules) (Result, []span, error) {
	w := walker{rules: rules}
	if err := w.value(root, rules.pointers); err != nil {
		return Result{}, nil, err
	}
	if w.err != nil {
		return Result{}, nil, w.err
	}
	if len(w.spans) == 0 {
		return Result{Redacted: msg}, nil, nil
	}
	out := make([]byte, 0, len(msg))
	at := int64(0)
	reds := make([]Redaction, len(w.spans))
	for i, s := range w.spans {
		out = append(out, msg[at:s.start]...)
		out = append(out, marker(s.class)...)
		at = s.end
		reds[i] = Redaction{Pointer: s.pointer, Class: s.class}
	}
	out = append(out, msg[at:]...)
	slices.SortStableFunc(reds, func(a, b Redaction) int { return strings.Compare(a.Pointer, b.Pointer) })
	return Result{Redacted: out, Redactions: reds}, w.spans, nil
}

type span struct {
	start, end int64
	class      Class
	pointer    string
}

// walker visits a parsed message in document order. spans come out in
// document order and never overlap: a redacted value's children are not
// visited.
type walker struct {
	rules *Rules
	path  [][]byte // reference tokens from the root to the current value (read-only slices)
	spans []span
	sc    scratch
	dups  int // members on the path whose name their object repeats
	err   *Error
}

func (w *walker) redact(v canon.Value, c Class) {
	if w.dups > 0 && w.err == nil {
		// A pointer through a repeated name names two values; a verifier
		// could not check which one was replaced.
		w.err = &Error{Code: CodeAmbiguousPointer, Rule: -1, Pointer: w.pointer(), Detail: "a value to redact lies under a repeated member name"}
	}
	p := w.pointer()
	if len(p) > maxPointerLen && w.err == nil {
		// Check would refuse the list: the message cannot be redacted in
		// a form a verifier can check.
		w.err = &Error{Code: CodePointerTooLong, Rule: -1, Pointer: p[:maxPointerLen], Detail: fmt.Sprintf("a value to redact at a pointer of %d bytes, at most %d", len(p), maxPointerLen)}
	}
	start := v.Offset()
	w.spans = append(w.spans, span{start: start, end: start + int64(len(v.Raw())), class: c, pointer: p})
}

// value visits v, whose path is w.path; node is the pointer-rule trie at
// that path (nil when no rule reaches below).
func (w *walker) value(v canon.Value, node *trie) error {
	if node != nil && node.end {
		if !isMarker(v) {
			w.redact(v, classOperatorPointer)
		}
		return nil
	}
	switch v.Kind() {
	case canon.KindString:
		if isMarker(v) {
			return nil
		}
		if c := w.rules.classify(w.text(v), &w.sc); c != "" {
			w.redact(v, c)
		}
	case canon.KindArray:
		for i, e := range v.Elems() {
			w.path = append(w.path, indexToken(i))
			err := w.value(e, node.child(w.path[len(w.path)-1]))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	case canon.KindObject:
		return w.object(v, node)
	}
	return nil
}

func (w *walker) object(v canon.Value, node *trie) error {
	var repeated map[string]int
	if v.HasDuplicates() {
		repeated = map[string]int{}
		v.RangeMembers(func(name []byte, _ canon.Value) bool {
			repeated[string(name)]++
			return true
		})
	}
	// The members of a JSON Schema "properties" map (and its kin) name
	// parameters, not data: a tool's "password" parameter is declared by a
	// subschema object, which is evidence to keep.
	schemaMap := len(w.path) > 0 && schemaMaps[string(w.path[len(w.path)-1])]
	// An AWS secret access key is a bare 40-character string: redact one
	// only beside a member holding an access key id.
	// A name/value pair ({"name":"DB_PASSWORD","value":"..."}, as in
	// environment lists and HTTP header arrays) names its value.
	awsPair, namedSecret := false, false
	if w.rules.defaults {
		v.RangeMembers(func(name []byte, val canon.Value) bool {
			// Both shapes are short (an escape is at most 6 bytes a
			// character): long strings are left to value.
			if val.Kind() != canon.KindString || len(val.Raw()) > 6*maxNameLen+2 {
				return true
			}
			if t := w.text(val); len(t) == awsKeyIDLen && awsKeyIDShape().Match(t) {
				awsPair = true
			}
			if (string(name) == "name" || string(name) == "key") && nameLooksSecret(w.text(val), true) {
				namedSecret = true
			}
			return true
		})
	}
	var err error
	v.RangeMembers(func(name []byte, val canon.Value) bool {
		if c := w.rules.classifyName(name, &w.sc); c != "" {
			// The pointer is the object's: the name is the secret.
			err = &Error{Code: CodeSecretInName, Rule: -1, Pointer: w.pointer(), Detail: "a member name matches " + string(c)}
			return false
		}
		w.path = append(w.path, name)
		amb := repeated[string(name)] > 1
		if amb {
			w.dups++
		}
		child := node.child(name)
		switch {
		case child != nil && child.end:
			err = w.value(val, child)
		case w.rules.defaults && (nameLooksSecret(name, true) && !(schemaMap && val.Kind() == canon.KindObject) ||
			namedSecret && string(name) == "value") && worthRedacting(val):
			w.redact(val, classSecretName)
		case awsPair && val.Kind() == canon.KindString && awsSecretShape().Match(w.text(val)):
			w.redact(val, classAWSSecretKey)
		default:
			err = w.value(val, child)
		}
		if amb {
			w.dups--
		}
		w.path = w.path[:len(w.path)-1]
		return err == nil
	})
	return err
}

// indexTokens are the reference tokens of the first array indices.
var indexTokens = func() (t [256][]byte) {
	for i := range t {
		t[i] = []byte(strconv.Itoa(i))
	}
	return t
}()

// indexToken is the reference token of array index i.
func indexToken(i int) []byte {
	if i < len(indexTokens) {
		return indexTokens[i]
	}
	return []byte(strconv.Itoa(i))
}

// schemaMaps are the JSON Schema keywords whose members are named
// subschemas.
var schemaMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true}

func (w *walker) pointer() string {
	var b []byte
	for _, t := range w.path {
		b = append(b, '/')
		b = append(b, strings.ReplaceAll(strings.ReplaceAll(string(t), "~", "~0"), "/", "~1")...)
	}
	return string(b)
}

// classify returns the class that redacts the decoded string s, or "".
func (r *Rules) classify(s []byte, sc *scratch) Class {
	if r.defaults {
		if c := detect(s, sc); c != "" {
			return c
		}
	}
	for _, re := range r.patterns {
		if re.Match(s) {
			return classOperatorPattern
		}
	}
	return ""
}

// classifyName is classify for a member name; names shorter than any
// built-in detector's match need no conversion when no operator pattern
// could match them.
func (r *Rules) classifyName(name []byte, sc *scratch) Class {
	if len(name) < minDetect && len(r.patterns) == 0 {
		return ""
	}
	return r.classify(name, sc)
}

// worthRedacting is false for values under a secret-like name that hold
// nothing to hide: null, booleans, "" and empty containers, and a marker
// already there.
func worthRedacting(v canon.Value) bool {
	switch v.Kind() {
	case canon.KindNull, canon.KindBool:
		return false
	case canon.KindString:
		return len(v.Raw()) > 2 && !isMarker(v)
	case canon.KindArray, canon.KindObject:
		return v.Len() > 0
	}
	return true
}

// text returns the decoded text of a string value: a span of the input
// when it has no escapes, else decoded into w.sc.text (valid until the next
// call).
func (w *walker) text(v canon.Value) []byte {
	raw := v.Raw()
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body
	}
	w.sc.text = unescape(w.sc.text[:0], body)
	return w.sc.text
}

// unescape appends the decoded UTF-8 of a JSON string body that canon has
// validated (every escape well formed, surrogates paired).
func unescape(dst, body []byte) []byte {
	for i := 0; i < len(body); {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			return append(dst, body[i:]...)
		}
		dst = append(dst, body[i:i+j]...)
		i += j
		switch c := body[i+1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(body[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) && i+6 <= len(body) {
				r = utf16.DecodeRune(r, hex4(body[i+2:i+6]))
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

// isMarker reports whether v is exactly a marker token, as written: what
// was redacted once is not redacted again, so redaction is idempotent.
func isMarker(v canon.Value) bool {
	if v.Kind() != canon.KindString {
		return false
	}
	raw := v.Raw()
	const pre, post = `"[REDACTED:`, `]"`
	if len(raw) <= len(pre)+len(post) || !bytes.HasPrefix(raw, []byte(pre)) || !bytes.HasSuffix(raw, []byte(post)) {
		return false
	}
	for _, c := range raw[len(pre) : len(raw)-len(post)] {
		if (c < 'a' || c > 'z') && c != '_' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
