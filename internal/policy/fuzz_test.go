package policy

import (
	"bytes"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// FuzzParse: Parse never panics; a policy it accepts decides any call
// without panicking, with allow or deny and a rule the policy has.
func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte(`{"version":1,"default":"deny","rules":[{"id":"a","tool":"x*","when":"args.n > 1","action":"allow"}]}`))
	f.Add([]byte("version: 1\ndefault: allow\nrules:\n  - id: a\n    when: 'args.xs.all(x, x > 0)'\n    action: deny\n"))
	args, _ := canon.Parse([]byte(`{"amount":500,"path":"/etc/x","xs":[1,2],"message":"m"}`), canon.ParseOptions{})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			return
		}
		e := NewEngine(p, nil)
		for _, tool := range []string{"transfer", "read_file", "x1", ""} {
			d := e.Decide(Input{Tool: tool, Args: args.Root()})
			if d.Action != Allow && d.Action != Deny || !e.HasRule(d.Rule) {
				t.Fatalf("decision %+v", d)
			}
		}
	})
}

// FuzzParseLock: ParseLock never panics, and a lock it accepts encodes to
// bytes it accepts again, encoding the same.
func FuzzParseLock(f *testing.F) {
	m, load := testManifest(&testing.T{}, "srv", `{"name":"a","description":"d","inputSchema":{"type":"object"}}`)
	l, err := NewLock(m, load)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := l.Encode()
	f.Add(b)
	f.Add([]byte(`{"format":"tracectl.lock/v1","declaration_policy":"x","server":{},"tools":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock(data)
		if err != nil {
			return
		}
		b, err := l.Encode()
		if err != nil {
			t.Fatal(err)
		}
		l2, err := ParseLock(b)
		if err != nil {
			t.Fatalf("re-encoded lock rejected: %v", err)
		}
		b2, _ := l2.Encode()
		if !bytes.Equal(b, b2) {
			t.Fatalf("encode not stable:\n%s\n%s", b, b2)
		}
	})
}
