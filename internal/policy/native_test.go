package policy

import (
	"testing"

	"github.com/google/cel-go/common/types"

	"github.com/tracectl/tracectl/canon"
)

// nativeGen builds a CEL condition from fuzz bytes over the native
// subset, and a little beyond it (uint and bytes literals, server,
// comprehensions, arithmetic), so both sides of the boundary are held.
type nativeGen struct {
	b []byte
	n int
}

func (g *nativeGen) pick(k int) int {
	if len(g.b) == 0 {
		return 0
	}
	c := int(g.b[0])
	g.b = g.b[1:]
	return c % k
}

var nativeFields = []string{"text", "n", "path", "o", "xs", "amount", "f", "b", "z"}

func (g *nativeGen) field() string { return nativeFields[g.pick(len(nativeFields))] }

func (g *nativeGen) term(depth int) string {
	if g.n++; depth > 3 || g.n > 40 {
		return `args.` + g.field()
	}
	switch g.pick(14) {
	case 0, 1:
		return "args." + g.field()
	case 2:
		return "args.o." + g.field()
	case 3:
		return `args["` + g.field() + `"]`
	case 4:
		return "args.xs[" + []string{"0", "1", "-1", "7"}[g.pick(4)] + "]"
	case 5:
		return "size(" + g.term(depth+1) + ")"
	case 6:
		return g.term(depth+1) + ".size()"
	case 7:
		return "tool"
	case 8:
		return []string{`"a"`, `""`, `"rm -rf"`, `"/etc"`, `"é"`, `"\u00e9"`, `'x'`}[g.pick(7)]
	case 9:
		return []string{"-1", "0", "1", "100", "9223372036854775807", "-9223372036854775808"}[g.pick(6)]
	case 10:
		return []string{"1.0", "0.5", "-0.0", "1e308", "100.0"}[g.pick(5)]
	case 11:
		return []string{"true", "false", "null"}[g.pick(3)]
	case 12:
		return []string{"1u", `b"a"`, "server.name", "args.n + 1", "[1, 2]", "{'a': 1}", "args", "server.version",
			"declaration.description", "declaration.annotations.destructiveHint", "declaration.inputSchema", "declaration.nope", "declaration"}[g.pick(13)]
	}
	return "(" + g.cond(depth+1) + " ? " + g.term(depth+1) + " : " + g.term(depth+1) + ")"
}

func (g *nativeGen) cond(depth int) string {
	if g.n++; depth > 3 || g.n > 40 {
		return "has(args." + g.field() + ")"
	}
	switch g.pick(10) {
	case 0, 1:
		return g.term(depth+1) + " " + []string{"==", "!=", "<", "<=", ">", ">="}[g.pick(6)] + " " + g.term(depth+1)
	case 2:
		return "(" + g.cond(depth+1) + " && " + g.cond(depth+1) + ")"
	case 3:
		return "(" + g.cond(depth+1) + " || " + g.cond(depth+1) + ")"
	case 4:
		return "!" + g.cond(depth+1)
	case 5:
		return "has(args." + g.field() + ")"
	case 6:
		return []string{"has(args.o." + g.field() + ")", "has(server.name)", "has(declaration.annotations)",
			"has(declaration.annotations.readOnlyHint)", "has(declaration." + g.field() + ")"}[g.pick(5)]
	case 7:
		return g.term(depth+1) + "." + []string{"startsWith", "endsWith", "contains"}[g.pick(3)] + "(" + g.term(depth+1) + ")"
	case 8:
		return g.term(depth+1) + `.matches("` + []string{"^rm", "a+", "[", "é$"}[g.pick(4)] + `")`
	}
	return "(" + g.cond(depth+1) + " ? " + g.cond(depth+1) + " : " + g.cond(depth+1) + ")"
}

// FuzzNative: a condition's native form (native.go), whenever it decides,
// decides as its CEL program does; where CEL errs, it does not decide.
func FuzzNative(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 8, 0}, []byte(`{"text":"a","n":1}`), "echo")
	f.Add([]byte{2, 5, 0, 5, 1}, []byte(`{"path":"/etc/x","o":{"text":"a"}}`), "shell")
	f.Add([]byte{1, 0, 9, 2, 0, 10, 0}, []byte(`{"n":1.0,"xs":[1,"a",null]}`), "")
	f.Add([]byte{7, 0, 8, 2}, []byte(`{"text":"rm -rf /","text":"x"}`), "echo")
	f.Add([]byte{0, 9, 1, 5}, []byte(`5`), "echo")
	f.Add([]byte{5, 3}, []byte(``), "echo")
	f.Add([]byte{0, 12, 8, 0, 8, 0}, []byte(`{}`), "transfer")
	f.Add([]byte{6, 2}, []byte(`{}`), "echo")
	env, err := newEnv()
	if err != nil {
		f.Fatal(err)
	}
	m, load := testManifest(&testing.T{}, "srv",
		`{"name":"echo","description":"echoes","inputSchema":{"type":"object"}}`,
		`{"name":"transfer","description":"moves money","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true,"readOnlyHint":1.5}}`)
	snap := NewSnapshot(m, load)
	f.Fuzz(func(t *testing.T, shape, args []byte, tool string) {
		g := &nativeGen{b: shape}
		expr := g.cond(0)
		prg, _, nat, err := compile(env, expr)
		if err != nil || nat == nil {
			return
		}
		in := Input{Tool: tool}
		if len(tool)%2 == 0 {
			in.Snapshot = snap
		}
		if doc, err := canon.Parse(args, canon.ParseOptions{AllowDuplicateKeys: true}); err == nil {
			in.Args = doc.Root()
		}
		got, ok := nat.eval(&in)
		out, _, err := prg.Eval(in.activation())
		want, isBool := out.(types.Bool)
		if !ok {
			return
		}
		if err != nil || !isBool || bool(want) != got {
			t.Fatalf("%s over %s (tool %q): native %v, CEL %v (%v)", expr, args, tool, got, out, err)
		}
	})
}

// TestNativeSubset: the conditions policies are written in are native;
// ones outside the subset are not, and a native condition leaves CEL's
// errors to CEL.
func TestNativeSubset(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		expr   string
		native bool
	}{
		{`args.text == "forbidden"`, true},
		{`size(args.text) > 4096`, true},
		{`has(args.path) && args.path.startsWith("/etc")`, true},
		{`args["amount"] >= 100 || tool.endsWith("_admin")`, true},
		{`args.text.matches("^rm\\s")`, true},
		{`args.xs[0] == 1 ? true : args.n != 2`, true},
		{`server.name == "evil" || declaration.annotations.destructiveHint == true`, true},
		{`args.xs.exists(x, x > 1)`, false},
		{`args.n + 1 > 2`, false},
		{`args.n == 1u`, false},
	} {
		_, _, nat, err := compile(env, c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if (nat != nil) != c.native {
			t.Errorf("%s: native %v, want %v", c.expr, nat != nil, c.native)
		}
	}
	_, _, nat, _ := compile(env, `args.text == "a"`)
	doc, _ := canon.Parse([]byte(`{"n":1}`), canon.ParseOptions{})
	if _, ok := nat.eval(&Input{Tool: "echo", Args: doc.Root()}); ok {
		t.Fatal("a missing key was decided natively; CEL errs (no such key)")
	}
	_, _, nat, _ = compile(env, `args.n == 1`)
	doc, _ = canon.Parse([]byte(`{"n":1.0}`), canon.ParseOptions{})
	if _, ok := nat.eval(&Input{Tool: "echo", Args: doc.Root()}); ok {
		t.Fatal("a double compared with an int was decided natively; CEL's heterogeneous equality decides it")
	}
	_, _, nat, _ = compile(env, `has(args.path) && args.path.startsWith("/etc") || size(args.o) > 1`)
	for args, want := range map[string]bool{`{"path":"/etc/passwd"}`: true, `{"path":"/tmp","o":{"a":1}}`: false, `{"o":[1,2]}`: true} {
		doc, _ = canon.Parse([]byte(args), canon.ParseOptions{})
		if got, ok := nat.eval(&Input{Tool: "echo", Args: doc.Root()}); !ok || got != want {
			t.Errorf("%s: native %v (decided %v), want %v", args, got, ok, want)
		}
	}
}
