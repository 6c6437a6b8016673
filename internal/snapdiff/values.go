package snapdiff

import (
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
)

// MemberValue is the old and new value of one drifted member of a tool,
// as JSON text (canonical under canon.PolicyMCPDecl when it can be, else
// as served), cut at the caller's bound. A nil side is absent there.
type MemberValue struct {
	Pointer   string  `json:"pointer"` // relative to the tool; "" is the whole declaration
	Old       *string `json:"old,omitempty"`
	New       *string `json:"new,omitempty"`
	Truncated bool    `json:"truncated,omitempty"` // a side was longer than the bound and is cut
}

// Values returns the old and new values of each member d names (a
// changed tool of Diff(old, new)), each at most maxBytes long. It returns
// nil when the page bytes of either side are not available.
func Values(old, new Input, d ToolDiff, maxBytes int) []MemberValue {
	if d.Change != ChangeChanged || len(d.Members) == 0 {
		return nil
	}
	o, n := index(old.Manifest)[d.Name], index(new.Manifest)[d.Name]
	if len(o) != 1 || len(n) != 1 {
		return nil
	}
	var oc, nc pageCache
	ov, oerr := oc.tool(old, o[0])
	nv, nerr := nc.tool(new, n[0])
	if oerr != "" || nerr != "" {
		return nil
	}
	out := make([]MemberValue, 0, len(d.Members))
	for _, ptr := range d.Members {
		mv := MemberValue{Pointer: ptr}
		mv.Old, mv.Truncated = valueText(ov, ptr, maxBytes)
		var cut bool
		mv.New, cut = valueText(nv, ptr, maxBytes)
		mv.Truncated = mv.Truncated || cut
		out = append(out, mv)
	}
	return out
}

// valueText resolves an RFC 6901 pointer in v and returns its JSON text.
func valueText(v canon.Value, ptr string, max int) (*string, bool) {
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch v.Kind() {
			case canon.KindObject:
				next, ok := v.Get(tok)
				if !ok {
					return nil, false
				}
				v = next
			case canon.KindArray:
				i, err := strconv.Atoi(tok)
				el := v.Elems()
				if err != nil || i < 0 || i >= len(el) {
					return nil, false
				}
				v = el[i]
			default:
				return nil, false
			}
		}
	}
	b, err := v.Canonical(canon.PolicyMCPDecl)
	if err != nil {
		b = v.Raw()
	}
	cut := false
	if len(b) > max {
		b, cut = b[:max], true
	}
	s := string(b)
	return &s, cut
}
