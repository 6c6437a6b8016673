package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// ErrNotToolsList is returned when a request given to the collector is not a
// tools/list request.
var ErrNotToolsList = errors.New("not a tools/list request")

// request is what the collector needs from a tools/list request line.
type request struct {
	id     []byte // exact JSON text of the id, nil when absent or unreadable
	cursor Field
}

// parseRequest reads a tools/list request line. A request that is not JSON,
// not a tools/list request, or whose params are unusable is an error: the
// caller decides what it is (the collector does not guess).
func parseRequest(line []byte, maxBytes int64) (request, error) {
	var r request
	doc, err := canon.Parse(line, canon.ParseOptions{AllowDuplicateKeys: true, Limits: canon.Limits{MaxBytes: maxBytes}})
	if err != nil {
		return r, fmt.Errorf("parse tools/list request: %w", err)
	}
	root := doc.Root()
	m, st := member(root, "method")
	if s, ok := m.Str(); st != statePresent || !ok || s != mcpwire.MethodToolsList {
		return r, ErrNotToolsList
	}
	if id, st := member(root, "id"); st == statePresent {
		r.id = id.Raw()
	}
	params, st := member(root, "params")
	switch {
	case st == stateAbsent:
		r.cursor = Field{State: stateAbsent}
	case st == statePresent && params.Kind() == canon.KindObject:
		r.cursor = stringField(member(params, "cursor"))
	case st == statePresent && params.Kind() == canon.KindNull:
		r.cursor = Field{State: stateAbsent}
	default:
		r.cursor = Field{State: stateInvalid, Kind: kindName(params)}
		if st == stateAmbiguous {
			r.cursor = Field{State: stateAmbiguous}
		}
	}
	return r, nil
}

// pageFacts is what one response contributes to a manifest.
type pageFacts struct {
	page  Page // without Request/Response/Cursor
	tools []Tool
	// stopDetail explains an error or invalid outcome.
	stopDetail string
	// nextRaw is the exact JSON text of nextCursor (a span of the line).
	nextRaw []byte
}

// analyzeResponse reads a tools/list response line. reqID is the request's
// exact id text (nil: not checked). It never fails: whatever the bytes are,
// the outcome says what they were.
func analyzeResponse(line, reqID []byte, pageIndex int64, maxBytes int64) pageFacts {
	doc, err := canon.Parse(line, canon.ParseOptions{AllowDuplicateKeys: true, Limits: canon.Limits{MaxBytes: maxBytes}})
	return analyzeDoc(doc, err, reqID, pageIndex)
}

// analyzeDoc is analyzeResponse on a line already parsed (with
// AllowDuplicateKeys), or the error parsing it gave.
func analyzeDoc(doc *canon.Doc, err error, reqID []byte, pageIndex int64) pageFacts {
	f := pageFacts{page: Page{
		NextCursor: Field{State: stateAbsent}, TTLMs: Field{State: stateAbsent},
		CacheScope: Field{State: stateAbsent}, ResultType: Field{State: stateAbsent},
	}}
	invalid := func(why, detail string) pageFacts {
		f.page.Outcome, f.page.Invalid, f.stopDetail, f.nextRaw = outcomeInvalid, why, detail, nil
		return f
	}
	if err != nil {
		var ce *canon.Error
		code := "syntax"
		if errors.As(err, &ce) {
			code = string(ce.Code)
		}
		f.page.InvalidCode = code
		return invalid(invalidNotJSON, err.Error())
	}
	root := doc.Root()
	if root.Kind() != canon.KindObject {
		return invalid(invalidNotResponse, "response is a JSON "+kindName(root))
	}
	v, st := member(root, "jsonrpc")
	if s, _ := v.Str(); st != statePresent || s != "2.0" {
		if st == stateAmbiguous {
			return invalid(invalidAmbiguous, `"jsonrpc" occurs more than once`)
		}
		return invalid(invalidNotResponse, `jsonrpc is not "2.0"`)
	}
	id, idSt := member(root, "id")
	if idSt == stateAmbiguous {
		return invalid(invalidAmbiguous, `"id" occurs more than once`)
	}
	res, resSt := member(root, "result")
	errv, errSt := member(root, "error")
	if resSt == stateAmbiguous || errSt == stateAmbiguous {
		return invalid(invalidAmbiguous, `"result" or "error" occurs more than once`)
	}
	if (resSt == statePresent) == (errSt == statePresent) {
		return invalid(invalidNotResponse, "want exactly one of result and error")
	}
	if errSt == statePresent {
		// An error may omit the id only when the request's could not be
		// read; it is still the answer to this page request.
		if idSt == statePresent && reqID != nil && id.Kind() != canon.KindNull && !bytes.Equal(id.Raw(), reqID) {
			return invalid(invalidIDMismatch, "error response id "+bounded(id.Raw())+" is not the request id "+bounded(reqID))
		}
		code, cst := member(errv, "code")
		n, ok := v02Int(code)
		if errv.Kind() != canon.KindObject || cst != statePresent || !ok {
			return invalid(invalidErrorNotReadable, "error without an integer code")
		}
		f.page.Outcome, f.page.ErrorCode = outcomeError, &n
		msg, _ := member(errv, "message")
		s, _ := msg.Str()
		f.stopDetail = fmt.Sprintf("code %d: %s", n, boundedString(s))
		return f
	}
	if idSt != statePresent || (reqID != nil && !bytes.Equal(id.Raw(), reqID)) {
		return invalid(invalidIDMismatch, "result id "+bounded(id.Raw())+" is not the request id "+bounded(reqID))
	}
	if res.Kind() != canon.KindObject {
		return invalid(invalidNotResponse, "result is a JSON "+kindName(res))
	}
	nc, ncSt := member(res, "nextCursor")
	f.page.NextCursor = stringField(nc, ncSt)
	if f.page.NextCursor.State == statePresent {
		f.nextRaw = nc.Raw()
	}
	f.page.TTLMs = intField(member(res, "ttlMs"))
	f.page.CacheScope = stringField(member(res, "cacheScope"))
	f.page.ResultType = stringField(member(res, "resultType"))
	tools, tst := member(res, "tools")
	// Record the tools even when the page turns out invalid below: they are
	// what was served.
	if tst == statePresent && tools.Kind() == canon.KindArray {
		f.tools = make([]Tool, 0, tools.Len())
		for i, t := range tools.Elems() {
			f.tools = append(f.tools, declare(t, pageIndex, int64(i)))
		}
		f.page.Tools = int64(len(f.tools))
	}
	switch {
	case f.page.NextCursor.State == stateAmbiguous || f.page.ResultType.State == stateAmbiguous || tst == stateAmbiguous:
		return invalid(invalidAmbiguous, "a result member occurs more than once")
	case tst != statePresent || tools.Kind() != canon.KindArray:
		return invalid(invalidToolsNotArray, "result.tools is not an array")
	case f.page.NextCursor.State == stateInvalid:
		return invalid(invalidNextCursor, "nextCursor is a JSON "+f.page.NextCursor.Kind)
	case f.page.ResultType.State != stateAbsent && (f.page.ResultType.State != statePresent || *f.page.ResultType.Value != "complete"):
		return invalid(invalidResultType, "resultType is not \"complete\"")
	}
	for _, t := range f.tools {
		if t.NameProblem == nameNotObject {
			return invalid(invalidToolNotObject, fmt.Sprintf("tools/%d is not an object", t.Index))
		}
	}
	f.page.Outcome = outcomeResult
	return f
}

// declare makes the manifest entry of one served tool.
func declare(t canon.Value, page, index int64) Tool {
	out := Tool{Page: page, Index: index}
	if t.Kind() != canon.KindObject {
		out.NameProblem = nameNotObject
	} else {
		n, st := member(t, "name")
		switch s, ok := n.Str(); {
		case st == stateAbsent:
			out.NameProblem = nameMissing
		case st == stateAmbiguous:
			out.NameProblem = nameAmbiguous
		case !ok:
			out.NameProblem = nameNotString
		default:
			out.Name = &s
		}
	}
	d, err := t.Digest(canon.PolicyMCPDecl)
	if err == nil {
		out.Declaration = Declaration{Status: DeclOK, Digest: d}
		return out
	}
	var ce *canon.Error
	code, ptr := "unsupported", ""
	if errors.As(err, &ce) {
		code = string(ce.Code)
		ptr = strings.TrimPrefix(ce.Pointer, t.Pointer())
	}
	out.Declaration = Declaration{Status: DeclUnsupported, Code: code, Pointer: &ptr}
	return out
}

// member looks a name up in an object and says whether it is absent,
// present once, or ambiguous (present more than once).
func member(obj canon.Value, name string) (canon.Value, string) {
	if v, ok := obj.Get(name); ok {
		return v, statePresent
	}
	if obj.HasDuplicates() {
		n := 0
		for _, m := range obj.Members() {
			if m.Name == name {
				n++
			}
		}
		if n > 1 {
			return canon.Value{}, stateAmbiguous
		}
	}
	return canon.Value{}, stateAbsent
}

func stringField(v canon.Value, st string) Field {
	switch {
	case st != statePresent:
		return Field{State: st}
	case v.Kind() == canon.KindString:
		s, _ := v.Str()
		return Field{State: statePresent, Value: &s}
	}
	return Field{State: stateInvalid, Kind: kindName(v)}
}

func intField(v canon.Value, st string) Field {
	switch {
	case st != statePresent:
		return Field{State: st}
	case v.Kind() != canon.KindNumber:
		return Field{State: stateInvalid, Kind: kindName(v)}
	}
	if n, ok := v02Int(v); ok {
		return Field{State: statePresent, Integer: &n}
	}
	return Field{State: stateUnsupported, Kind: "number"}
}

// v02Int reads a number the way the v0.2 boundary does: an integer by value
// within ±(2^53-1), or nothing.
func v02Int(v canon.Value) (int64, bool) {
	if v.Kind() != canon.KindNumber {
		return 0, false
	}
	c, err := v.Canonical(canon.PolicyV02)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(c), 10, 64)
	return n, err == nil
}

func kindName(v canon.Value) string {
	if !v.Valid() {
		return "null"
	}
	return v.Kind().String()
}

func bounded(b []byte) string {
	if b == nil {
		return "(none)"
	}
	return boundedString(string(b))
}

func boundedString(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
