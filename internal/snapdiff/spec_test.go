package snapdiff

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSpecListsEveryValue keeps spec/snapshot.md and the string constants
// of the diff (changes, verdicts, reasons), exported or not, in sync.
func TestSpecListsEveryValue(t *testing.T) {
	spec, err := os.ReadFile("../../spec/snapshot.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "diff.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				n++
				if !strings.Contains(string(spec), "`"+v+"`") {
					t.Errorf("%s = %q is not in spec/snapshot.md", name.Name, v)
				}
			}
		}
	}
	if n < 13 {
		t.Fatalf("found only %d string constants in diff.go", n)
	}
}
