package httpproxy

import (
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// MCP HTTP headers (lower case, as recorded).
const (
	hProtocolVersion = "mcp-protocol-version"
	hSessionID       = "mcp-session-id"
	hMethod          = "mcp-method"
	hName            = "mcp-name"
	hParamPrefix     = "mcp-param-"
	hLastEventID     = "last-event-id"
)

// modernRevision is the first revision whose requests mirror routing
// headers (SEP-2243).
const modernRevision = "2026-07-28"

// headerRefusal is a request the header gate refused.
type headerRefusal struct {
	rule   string
	detail string
}

// one returns the single value of a header, and whether it was repeated.
func one(h http.Header, name string) (v string, present, repeated bool) {
	vals := h.Values(name)
	switch len(vals) {
	case 0:
		return "", false, false
	case 1:
		return vals[0], true, false
	}
	return vals[0], true, true
}

// bindings maps tool names to the x-mcp-header bindings their observed
// declarations carry.
type bindings struct {
	mu    sync.Mutex
	tools map[string][]binding
}

type binding struct {
	path   []string
	header string // lower case, without the prefix
}

// observe reads the tools of a tools/list result.
func (b *bindings) observe(result canon.Value) {
	tools, ok := result.Get("tools")
	if !ok || tools.Kind() != canon.KindArray {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tools == nil {
		b.tools = map[string][]binding{}
	}
	for _, t := range tools.Elems() {
		if t.Kind() != canon.KindObject {
			continue
		}
		name, ok := str(t, "name")
		if !ok {
			continue
		}
		var out []binding
		if schema, ok := t.Get("inputSchema"); ok {
			out = collect(schema, nil, out, 0)
		}
		b.tools[name] = out
	}
}

func collect(schema canon.Value, prefix []string, out []binding, depth int) []binding {
	if depth > 16 || schema.Kind() != canon.KindObject {
		return out
	}
	props, ok := schema.Get("properties")
	if !ok || props.Kind() != canon.KindObject {
		return out
	}
	for _, m := range props.Members() {
		path := append(append([]string(nil), prefix...), m.Name)
		if h, ok := str(m.Value, "x-mcp-header"); ok && h != "" {
			out = append(out, binding{path: path, header: strings.ToLower(h)})
		}
		out = collect(m.Value, path, out, depth+1)
	}
	return out
}

func (b *bindings) lookup(tool string) ([]binding, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.tools[tool]
	return v, ok
}

func str(v canon.Value, name string) (string, bool) {
	if !v.Valid() || v.Kind() != canon.KindObject {
		return "", false
	}
	m, ok := v.Get(name)
	if !ok {
		return "", false
	}
	return m.Str()
}

// checkHeaders is the gate's second half for HTTP: the routing headers a
// 2026-07-28 request mirrors from its body must be there and agree with it
// (SEP-2243), since intermediaries route and authorize on the headers
// while the server executes the body. A legacy request (no modern
// MCP-Protocol-Version header and no _meta protocolVersion) mirrors
// nothing and passes.
func checkHeaders(h http.Header, m *mcpwire.Message, decls *bindings) *headerRefusal {
	for _, n := range []string{hProtocolVersion, hMethod, hName} {
		if _, _, rep := one(h, n); rep {
			return &headerRefusal{transcript.RuleHeaderRepeated, n + " given more than once"}
		}
	}
	for n, vals := range h {
		if strings.HasPrefix(strings.ToLower(n), hParamPrefix) && len(vals) > 1 {
			return &headerRefusal{transcript.RuleHeaderRepeated, strings.ToLower(n) + " given more than once"}
		}
	}
	hv, hasHV, _ := one(h, hProtocolVersion)
	mv, hasMV := metaVersion(m)
	if hasMV && !hasHV {
		return &headerRefusal{transcript.RuleHeaderMissing, "mcp-protocol-version is required with _meta protocolVersion " + strconv.Quote(bounded(mv))}
	}
	if hasMV && hv != mv {
		return &headerRefusal{transcript.RuleHeaderMismatch, "mcp-protocol-version " + strconv.Quote(bounded(hv)) + " but _meta protocolVersion " + strconv.Quote(bounded(mv))}
	}
	if !hasMV && !(hasHV && hv >= modernRevision) {
		return nil // legacy: nothing is mirrored
	}
	if m.Kind != mcpwire.KindRequest {
		return nil
	}
	meth, hasMeth, _ := one(h, hMethod)
	if !hasMeth {
		return &headerRefusal{transcript.RuleHeaderMissing, "mcp-method is required on a " + modernRevision + " request"}
	}
	if meth != m.Method {
		return &headerRefusal{transcript.RuleHeaderMismatch, "mcp-method " + strconv.Quote(bounded(meth)) + " but the body's method is " + strconv.Quote(bounded(m.Method))}
	}
	var nameMember string
	switch m.Method {
	case mcpwire.MethodToolsCall, "prompts/get":
		nameMember = "name"
	case "resources/read":
		nameMember = "uri"
	}
	params := make(map[string]bool)
	for n := range h {
		if l := strings.ToLower(n); strings.HasPrefix(l, hParamPrefix) {
			params[l] = true
		}
	}
	if nameMember == "" {
		if len(params) > 0 {
			return &headerRefusal{transcript.RuleHeaderMismatch, "mcp-param-* headers on a " + strconv.Quote(bounded(m.Method)) + " request, which has no tool arguments"}
		}
		return nil
	}
	name, hasName, _ := one(h, hName)
	bodyName, ok := str(m.Params, nameMember)
	if !hasName {
		return &headerRefusal{transcript.RuleHeaderMissing, "mcp-name is required on " + m.Method}
	}
	if !ok || name != bodyName {
		return &headerRefusal{transcript.RuleHeaderMismatch, "mcp-name " + strconv.Quote(bounded(name)) + " but the body's " + nameMember + " is " + strconv.Quote(bounded(bodyName))}
	}
	if m.Method != mcpwire.MethodToolsCall {
		if len(params) > 0 {
			return &headerRefusal{transcript.RuleHeaderMismatch, "mcp-param-* headers on " + m.Method}
		}
		return nil
	}
	binds, known := decls.lookup(bodyName)
	if !known {
		if len(params) > 0 {
			return &headerRefusal{transcript.RuleHeaderUnverifiable, "mcp-param-* headers for tool " + strconv.Quote(bounded(bodyName)) + ", whose declaration this proxy has not observed"}
		}
		return nil
	}
	args, _ := m.Params.Get("arguments")
	for _, b := range binds {
		hn := hParamPrefix + b.header
		val, has, _ := one(h, hn)
		arg, found := lookupArg(args, b.path)
		if !found || arg.Kind() == canon.KindNull {
			if has {
				return &headerRefusal{transcript.RuleHeaderMismatch, hn + " for an absent or null argument " + strconv.Quote(bounded(strings.Join(b.path, ".")))}
			}
			continue
		}
		delete(params, hn)
		want, primitive := headerForm(arg)
		if !primitive {
			if has {
				return &headerRefusal{transcript.RuleHeaderMismatch, hn + " for an argument that is not a string, integer or boolean"}
			}
			continue
		}
		if !has {
			return &headerRefusal{transcript.RuleHeaderMissing, hn + " is required for argument " + strconv.Quote(bounded(strings.Join(b.path, ".")))}
		}
		got, ok := decodeHeaderValue(val)
		if !ok || got != want {
			return &headerRefusal{transcript.RuleHeaderMismatch, hn + " disagrees with argument " + strconv.Quote(bounded(strings.Join(b.path, ".")))}
		}
	}
	if len(params) > 0 {
		extra := make([]string, 0, len(params))
		for n := range params {
			extra = append(extra, n)
		}
		sort.Strings(extra)
		return &headerRefusal{transcript.RuleHeaderMismatch, bounded(extra[0]) + " names no argument the tool's declaration mirrors"}
	}
	return nil
}

func metaVersion(m *mcpwire.Message) (string, bool) {
	if !m.Params.Valid() || m.Params.Kind() != canon.KindObject {
		return "", false
	}
	meta, ok := m.Params.Get("_meta")
	if !ok {
		return "", false
	}
	v, ok := meta.Get(mcpwire.MetaProtocolVersion)
	if !ok {
		return "", false
	}
	s, _ := v.Str()
	return s, true // a non-string is "present and disagreeing" with any header
}

func lookupArg(args canon.Value, path []string) (canon.Value, bool) {
	cur := args
	for _, p := range path {
		if !cur.Valid() || cur.Kind() != canon.KindObject {
			return canon.Value{}, false
		}
		v, ok := cur.Get(p)
		if !ok {
			return canon.Value{}, false
		}
		cur = v
	}
	return cur, cur.Valid()
}

// headerForm is the text an argument's header carries (SEP-2243): a
// string as is, an integer in decimal, a boolean as true/false.
func headerForm(v canon.Value) (string, bool) {
	switch v.Kind() {
	case canon.KindString:
		s, _ := v.Str()
		return s, true
	case canon.KindBool:
		return string(v.Raw()), true
	case canon.KindNumber:
		raw := string(v.Raw())
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n > 1<<53-1 || n < -(1<<53-1) {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

func decodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				return "", false
			}
			return string(b), true
		}
	}
	return v, true
}

// bounded cuts a peer's string for a detail (the detail is escaped where
// it is shown).
func bounded(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
