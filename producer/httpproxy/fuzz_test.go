package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// FuzzReadEvent: the SSE reader never returns more bytes than it read,
// never data longer than its event, and never panics.
func FuzzReadEvent(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
	f.Add([]byte("id: 1\ndata:\n\n: comment\n\ndata: a\ndata: b\r\n\r\n"))
	f.Add([]byte("data: cut"))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var got []byte
		for range 1000 {
			raw, data, err := readEvent(br)
			got = append(got, raw...)
			if len(data) > len(raw) {
				t.Fatalf("data %q longer than its event %q", data, raw)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
		}
		if len(got) > len(in) {
			t.Fatalf("events hold %d bytes of a %d-byte stream", len(got), len(in))
		}
	})
}

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
