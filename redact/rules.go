package redact

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/tracectl/tracectl/canon"
)

// Code is a stable error code. Codes are part of tracectl's contract and are
// never renamed. A Code is also an error value, so callers can write
// errors.Is(err, redact.CodeBadPointer).
type Code string

func (c Code) Error() string { return string(c) }

// Error codes.
const (
	// Rules (NewRules).
	CodeBadPointer   Code = "redact_bad_pointer"   // a --redact pointer is not RFC 6901, or names no base
	CodeBadPattern   Code = "redact_bad_pattern"   // a --redact-pattern is not a Go RE2 expression
	CodeEmptyPattern Code = "redact_empty_pattern" // a --redact-pattern matches the empty string (it would redact every string)
	CodeTooManyRules Code = "redact_too_many_rules"
	// Messages (Message). The caller must withhold the whole payload: what
	// cannot be redacted exactly is not retained.
	CodeInvalidMessage Code = "redact_invalid_message" // not one strict JSON value (wraps the *canon.Error)
	CodeSecretInName   Code = "redact_secret_in_name"  // a member name itself holds a secret: splicing values cannot hide it
	// A value to redact lies under a repeated member name, so its pointer
	// would name more than one value and the redaction could not be checked.
	CodeAmbiguousPointer Code = "redact_ambiguous_pointer"
	// A value to redact lies where no checkable pointer reaches: its
	// pointer is longer than 1024 bytes, maxPointerLen (Check refuses such a list).
	CodePointerTooLong Code = "redact_pointer_too_long"
)

// Error is a rejection with a stable Code. Rule is the index of the
// offending operator rule (NewRules), Pointer the RFC 6901 pointer of the
// offending place in a message (Message), Err the cause (a *canon.Error or
// a regexp error) when there is one. Errors from Message never quote the
// message: they are safe to log.
type Error struct {
	Code    Code
	Rule    int    // index in Config.Pointers or Config.Patterns; -1 when not about a rule
	Pointer string // where in the message; "" is the whole message or not about a message
	Detail  string // human-readable; quoted input is bounded and escaped
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	if e.Rule >= 0 {
		fmt.Fprintf(&b, " (rule %d)", e.Rule)
	}
	if e.Pointer != "" {
		fmt.Fprintf(&b, " at %s", quoteBounded(e.Pointer))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is this error's Code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

func (e *Error) Unwrap() error { return e.Err }

// quoteBounded quotes at most 64 bytes of s, escaping everything outside
// printable ASCII, so hostile input never reaches a terminal raw.
func quoteBounded(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "..."
	}
	return strconv.QuoteToASCII(s)
}

// Limits on operator rules. They bound the work per string value (every
// pattern runs on every string) and what a configuration can make the
// redactor hold.
const (
	maxPointers      = 256
	maxPatterns      = 64
	maxPointerLen    = 1024
	maxPatternLen    = 4096
	maxPointerTokens = 64
)

// Config is what an operator asks for. The zero Config is the default:
// built-in detectors on, no operator rules.
type Config struct {
	// Pointers are RFC 6901 JSON Pointers whose first reference token names
	// the base they are relative to (see Pointer bases in the package doc):
	// "/arguments/...", "/result/..." or "/_meta/...". The value there is
	// redacted whole, whatever its type. (--redact POINTER)
	Pointers []string
	// Patterns are Go RE2 expressions, matched unanchored against decoded
	// text; a string value (or argv entry) any of them matches is redacted
	// whole, and a member name one matches makes the message unredactable
	// (CodeSecretInName), as a detector's would. (--redact-pattern REGEX)
	Patterns []string
	// NoDefault turns the built-in detectors off, the secret-like names
	// included: only Pointers and Patterns redact. (--no-default-redaction)
	NoDefault bool
	// Limits bound the messages Message parses; zero fields take canon's
	// defaults.
	Limits canon.Limits
}

// Rules is a validated Config, safe for concurrent use.
type Rules struct {
	defaults  bool
	nPointers int   // operator pointers, as configured
	pointers  *trie // absolute message paths, expanded from the bases
	patterns  []*regexp.Regexp
	limits    canon.Limits
}

// Default returns the rules of the zero Config. They are immutable and
// shared.
func Default() *Rules { return defaultRules() }

var defaultRules = sync.OnceValue(func() *Rules {
	r, _ := NewRules(Config{})
	return r
})

// NewRules validates c. Every problem is an *Error with a stable code and
// the index of the offending rule.
func NewRules(c Config) (*Rules, error) {
	r := &Rules{defaults: !c.NoDefault, nPointers: len(c.Pointers), pointers: &trie{}, limits: c.Limits}
	if len(c.Pointers) > maxPointers {
		return nil, &Error{Code: CodeTooManyRules, Rule: -1, Detail: fmt.Sprintf("%d pointers, at most %d", len(c.Pointers), maxPointers)}
	}
	if len(c.Patterns) > maxPatterns {
		return nil, &Error{Code: CodeTooManyRules, Rule: -1, Detail: fmt.Sprintf("%d patterns, at most %d", len(c.Patterns), maxPatterns)}
	}
	for i, p := range c.Pointers {
		toks, err := parsePointer(p)
		if err != nil {
			return nil, &Error{Code: CodeBadPointer, Rule: i, Detail: quoteBounded(p) + ": " + err.Error()}
		}
		for _, base := range pointerBases[toks[0]] {
			r.pointers.insert(append(append([]string(nil), base...), toks[1:]...))
		}
	}
	for i, p := range c.Patterns {
		if len(p) > maxPatternLen {
			return nil, &Error{Code: CodeBadPattern, Rule: i, Detail: fmt.Sprintf("pattern of %d bytes, at most %d", len(p), maxPatternLen)}
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, &Error{Code: CodeBadPattern, Rule: i, Detail: quoteBounded(p), Err: err}
		}
		if re.MatchString("") {
			return nil, &Error{Code: CodeEmptyPattern, Rule: i, Detail: quoteBounded(p) + " matches the empty string, so it would redact every string"}
		}
		r.patterns = append(r.patterns, re)
	}
	return r, nil
}

// pointerBases maps the first token of an operator pointer to the message
// paths it is relative to. _meta is both the request's (and
// notification's) params._meta and the response's result._meta.
var pointerBases = map[string][][]string{
	"arguments": {{"params", "arguments"}},
	"result":    {{"result"}},
	"_meta":     {{"params", "_meta"}, {"result", "_meta"}},
}

// parsePointer splits an operator's RFC 6901 pointer into its unescaped
// reference tokens and checks that the first names a base.
func parsePointer(p string) ([]string, error) {
	parts, err := splitPointer(p)
	if err != nil {
		return nil, err
	}
	if _, ok := pointerBases[parts[0]]; !ok {
		return nil, fmt.Errorf("unknown base %s: the first token is arguments, result or _meta", quoteBounded(parts[0]))
	}
	return parts, nil
}

// splitPointer splits a non-empty RFC 6901 pointer into its unescaped
// reference tokens.
func splitPointer(p string) ([]string, error) {
	if len(p) > maxPointerLen {
		return nil, fmt.Errorf("pointer of %d bytes, at most %d", len(p), maxPointerLen)
	}
	if !strings.HasPrefix(p, "/") {
		return nil, errors.New("a pointer starts with '/' and names a base: /arguments/REST, /result/REST or /_meta/REST")
	}
	parts := strings.Split(p[1:], "/")
	if len(parts) > maxPointerTokens {
		return nil, fmt.Errorf("%d reference tokens, at most %d", len(parts), maxPointerTokens)
	}
	for i, t := range parts {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("'~' must be followed by 0 or 1 (RFC 6901)")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// trie holds the absolute paths of the pointer rules, one reference token
// per level (an array index is its decimal text).
type trie struct {
	end  bool
	next map[string]*trie
}

func (t *trie) insert(path []string) {
	for _, tok := range path {
		if t.next == nil {
			t.next = map[string]*trie{}
		}
		n := t.next[tok]
		if n == nil {
			n = &trie{}
			t.next[tok] = n
		}
		t = n
	}
	t.end = true
}

// child returns the node for tok, or nil.
func (t *trie) child(tok []byte) *trie {
	if t == nil {
		return nil
	}
	return t.next[string(tok)]
}
