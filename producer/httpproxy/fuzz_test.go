package httpproxy

import (
	"net/http"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// FuzzCheckHeaders: the header gate never panics, and refuses every
// request whose Mcp-Method disagrees with a modern body.
func FuzzCheckHeaders(f *testing.F) {
	f.Add(callBody, "2026-07-28", "tools/call", "echo", "")
	f.Add(callBody, "2026-07-28", "tools/list", "echo", "x")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", "", "", "")
	f.Fuzz(func(t *testing.T, body, version, method, name, param string) {
		m, ref := mcpwire.Read([]byte(body + "\n"))
		if ref != nil {
			return
		}
		h := http.Header{}
		for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name, "Mcp-Param-Region": param} {
			if v != "" {
				h.Set(k, v)
			}
		}
		var decls bindings
		r := checkHeaders(h, m, &decls)
		if r != nil {
			switch r.rule {
			case transcript.RuleHeaderMissing, transcript.RuleHeaderMismatch, transcript.RuleHeaderRepeated, transcript.RuleHeaderUnverifiable:
			default:
				t.Fatalf("unknown rule %q", r.rule)
			}
		}
		if _, modern := metaVersion(m); modern && m.Kind == mcpwire.KindRequest && method != "" && method != m.Method && r == nil {
			t.Fatalf("Mcp-Method %q on a %q request passed", method, m.Method)
		}
	})
}
