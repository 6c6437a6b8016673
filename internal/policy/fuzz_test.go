package policy

import (
	"bytes"
	"fmt"
	"strings"
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

// planConds are conditions FuzzPlan builds policies from: ones that read
// only the tool, server or declaration (folded by a plan), ones that read
// the arguments, and mixtures, including ones that fail to evaluate.
var planConds = []string{
	`tool == "shell" && size(args) > 0`, `tool == "echo" || args.n > 1`, `has(server.name) && server.name == "srv"`,
	`server.name == "evil"`, `has(declaration.annotations) && declaration.annotations.destructiveHint == true`,
	`declaration.annotations.readOnlyHint`, `declaration.description.contains("moves")`, `args.n > 1`,
	`has(args.n) && args.n > 100`, `args.text == "x" || true`, `false && args.text == "x"`, `size(args) > 1`,
	`args.text.startsWith("rm")`, `server.name == "srv" ? args.n > 1 : false`, `server.version == "1"`,
	`tool.startsWith("e") && !has(args.path)`, `declaration.inputSchema.type == "object" && args.n == 2`,
	`[1, 2].exists(x, x == 2) && server.name == "srv"`, `args.xs.all(x, x > 0)`, `int(server.name) > 1`,
	`true`, `false`, `server.name`, `args.n`,
}

// FuzzPlan: a plan decides every call as evaluating every rule does
// (plan.go): the same action, rule and reason, for tools the snapshot
// declares and ones it does not, with arguments of any shape.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{0, 7, 3, 12, 1, 4}, []byte(`{"n":2,"text":"rm -rf"}`), uint8(0))
	f.Add([]byte{2, 5, 9, 17, 22}, []byte(`{"xs":[1,-1],"path":"/etc"}`), uint8(1))
	f.Add([]byte{20, 1}, []byte(`{}`), uint8(2))
	m, load := testManifest(&testing.T{}, "srv",
		`{"name":"echo","description":"echoes","inputSchema":{"type":"object"}}`,
		`{"name":"transfer","description":"moves money","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`,
		`{"name":"eraser","description":"erases","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}`)
	tools := []string{"echo", "transfer", "eraser", "shell", ""}
	f.Fuzz(func(t *testing.T, picks, args []byte, toolPick uint8) {
		if len(picks) > 12 {
			picks = picks[:12]
		}
		var b strings.Builder
		b.WriteString("version: 1\ndefault: allow\nrules:\n")
		for i, k := range picks {
			fmt.Fprintf(&b, "  - id: r%d\n", i)
			switch k % 4 {
			case 1:
				b.WriteString("    tool: echo\n")
			case 2:
				b.WriteString("    tool: \"e*\"\n")
			}
			if k%5 != 4 {
				fmt.Fprintf(&b, "    when: %q\n", planConds[int(k)%len(planConds)])
			}
			fmt.Fprintf(&b, "    action: %s\n", []string{"deny", "allow", "approve"}[int(k)%3])
		}
		p, err := Parse([]byte(b.String()))
		if err != nil {
			t.Fatalf("policy: %v\n%s", err, b.String())
		}
		in := Input{Tool: tools[int(toolPick)%len(tools)], Snapshot: NewSnapshot(m, load)}
		if doc, err := canon.Parse(args, canon.ParseOptions{}); err == nil {
			in.Args = doc.Root()
		}
		for range 2 { // the second call through the cached plan
			got, want := p.decide(&in), p.decideAll(&in, false)
			if got != want {
				t.Fatalf("tool %q args %s\n%s\nplan: %+v\nall:  %+v", in.Tool, args, b.String(), got, want)
			}
		}
	})
}
