package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tracectl/tracectl/mcpwire"
)

func TestLeadingID(t *testing.T) {
	for _, tc := range []struct {
		head, want string
		ok         bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[`, "7", true},
		{`{"jsonrpc":"2.0","id":-12,"result":`, "-12", true},
		{`{"jsonrpc":"2.0","id":"big","result":`, `"big"`, true},
		{`{"jsonrpc":"2.0","id":"a\"b","result":`, "", false}, // escapes: not a canonical-looking id
		{`{"jsonrpc":"2.0","id":7`, "", false},                // the id may go on past the prefix
		{`{"id":7,"jsonrpc":"2.0","result":`, "", false},      // another member order: not read
		{`{"jsonrpc":"2.0","id":7.5,"result":`, "", false},
		{`{"jsonrpc":"2.0","id":,"result":`, "", false},
	} {
		got, ok := leadingID([]byte(tc.head))
		if got != tc.want || ok != tc.ok {
			t.Errorf("leadingID(%s) = %q, %v; want %q, %v", tc.head, got, ok, tc.want, tc.ok)
		}
	}
}

// TestErrorLineIsJSON: what the proxy writes to the client itself is one
// valid JSON-RPC error line, whatever the message holds.
func TestErrorLineIsJSON(t *testing.T) {
	for _, msg := range []string{"plain", "bad \xff\xfe bytes", "quote \" backslash \\ newline \n nul \x00", "\u2028 \u202e bidi"} {
		line := errorLine(`"x"`, mcpwire.CodeInvalidRequest, msg)
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Errorf("%q: not one line: %q", msg, line)
		}
		var v struct {
			ID    string `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct{ Source, Reason string }
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &v); err != nil || !json.Valid(line) || !utf8.Valid(line) {
			t.Errorf("%q: %q is not valid JSON: %v", msg, line, err)
		}
		if v.ID != "x" || v.Error.Code != mcpwire.CodeInvalidRequest || v.Error.Data.Source != "tracectl" || v.Error.Data.Reason != "refused" {
			t.Errorf("%q: decoded %+v", msg, v)
		}
	}
}

// FuzzLeadingID: leadingID never panics, and what it returns is exactly
// the id text between the fixed prefix and the next comma.
func FuzzLeadingID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a\"","result":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, ok := leadingID(b)
		if !ok {
			return
		}
		if !bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","id":`+key+`,`)) {
			t.Fatalf("leadingID(%q) = %q, not the text after the prefix", b, key)
		}
		if strings.Contains(key, `\`) || key[0] != '"' && strings.Contains(key, ",") {
			t.Fatalf("leadingID(%q) = %q: an escape, or a number with a comma", b, key)
		}
	})
}
