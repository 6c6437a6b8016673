package snapshot

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSpecListsEveryCode keeps spec/snapshot.md and the string constants
// (codes, states, format ids), exported or not, in sync: each value must
// appear on the page in backticks. Unexported ones are on the wire too.
func TestSpecListsEveryCode(t *testing.T) {
	spec, err := os.ReadFile("../spec/snapshot.md")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files, err := parseGoFiles(fset)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
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
					if !strings.Contains(string(spec), "`"+v+"`") && !strings.Contains(string(spec), `"`+v+`"`) {
						t.Errorf("%s = %q is not in spec/snapshot.md", name.Name, v)
					}
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("found only %d string constants: is the parser looking at the package?", n)
	}
}

// parseGoFiles parses the package's non-test files that build here (go/build
// honours build tags, which parser.ParseDir did not).
func parseGoFiles(fset *token.FileSet) ([]*ast.File, error) {
	bp, err := build.ImportDir(".", 0)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
