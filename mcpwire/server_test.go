package mcpwire_test

import (
	"slices"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

func idValue(t testing.TB, text string) canon.Value {
	t.Helper()
	doc, err := canon.Parse([]byte(text), canon.ParseOptions{})
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return doc.Root()
}

// TestMatchKey: ids a real client takes for one another share a key; ids
// no client confuses do not.
func TestMatchKey(t *testing.T) {
	same := [][]string{
		{`4`, `"4"`, `" 4 "`, `"0x4"`, `4.0`, `4e0`, `"4.0"`, `"\u0034"`},
		{`0`, `""`, `null`, `"0"`, `-0`, `"-0"`},
		{`"abc"`, `"\u0061bc"`},
	}
	for _, group := range same {
		want := mcpwire.MatchKey(idValue(t, group[0]))
		for _, id := range group[1:] {
			if got := mcpwire.MatchKey(idValue(t, id)); got != want {
				t.Errorf("MatchKey(%s) = %q, want %q (the key of %s)", id, got, want, group[0])
			}
		}
	}
	apart := []string{`4`, `5`, `"abc"`, `"4a"`, `1.5`, `"1.5x"`}
	seen := map[string]string{}
	for _, id := range apart {
		k := mcpwire.MatchKey(idValue(t, id))
		if prev, dup := seen[k]; dup {
			t.Errorf("MatchKey(%s) = MatchKey(%s) = %q", id, prev, k)
		}
		seen[k] = id
	}
}

// TestResponseKeys: the Go SDK truncates a fractional id, so 1.5 may answer
// request 1.
func TestResponseKeys(t *testing.T) {
	keys := mcpwire.ResponseKeys(idValue(t, `1.5`))
	if !slices.Contains(keys, mcpwire.MatchKey(idValue(t, `1`))) {
		t.Errorf("ResponseKeys(1.5) = %q, want it to hold request 1's key", keys)
	}
	if keys := mcpwire.ResponseKeys(idValue(t, `2`)); len(keys) != 1 {
		t.Errorf("ResponseKeys(2) = %q, want one key", keys)
	}
}

// TestLenientIDs: every id a lenient reader could take from a refused
// frame, repeated, case-variant, batched or behind a BOM.
func TestLenientIDs(t *testing.T) {
	four := mcpwire.MatchKey(idValue(t, `4`))
	for _, tc := range []struct {
		name, body string
		want       bool // holds request 4's key
	}{
		{"repeated result", `{"jsonrpc":"2.0","id":4,"result":{},"result":{}}`, true},
		{"repeated id", `{"jsonrpc":"2.0","id":5,"id":4,"result":{}}`, true},
		{"case variant id", `{"jsonrpc":"2.0","ID":4,"result":{}}`, true},
		{"bom", "\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":4,"result":{}}`, true},
		{"batch", `[{"jsonrpc":"2.0","id":9,"result":{}},{"jsonrpc":"2.0","id":"4","result":{}}]`, true},
		{"two values", `{"id":9} {"id":4}`, true},
		{"fraction", `{"jsonrpc":"2.0","id":4.5,"result":{}}`, true},
		{"not json", `server started on port 4`, false},
		{"other id", `{"jsonrpc":"2.0","id":5,"result":{},"result":{}}`, false},
	} {
		if got := slices.Contains(mcpwire.LenientIDs([]byte(tc.body)), four); got != tc.want {
			t.Errorf("%s: LenientIDs holds 4: %v, want %v (%q)", tc.name, got, tc.want, mcpwire.LenientIDs([]byte(tc.body)))
		}
	}
}

// FuzzLenientIDs: never panics, and a frame the gate reads as a response
// yields its own id's key among the lenient ones.
func FuzzLenientIDs(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"result":{},"result":{}}`))
	f.Add([]byte(`[{"id":"0x4"}]`))
	f.Add([]byte("\xef\xbb\xbf{\"id\":null}"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":4.5,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"\ud800","result":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys := mcpwire.LenientIDs(b)
		m, ref := mcpwire.Read(append(append([]byte{}, b...), '\n'))
		if ref == nil && m.Kind == mcpwire.KindResponse {
			if k := mcpwire.MatchKey(m.ID); !slices.Contains(keys, k) {
				t.Fatalf("a response the gate reads under %s; LenientIDs %q lacks its key %q", m.IDText(), keys, k)
			}
		}
	})
}
