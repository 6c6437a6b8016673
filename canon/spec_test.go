package canon

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSpecInSync keeps spec/canonicalization.md and the Go constants in
// step: every Code constant declared in errors.go has its row in the spec's
// error table (code and Go name together), every row names a declared code,
// and the policy identifiers and default limits are stated.
func TestSpecInSync(t *testing.T) {
	specBytes, err := os.ReadFile("../spec/canonicalization.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(specBytes)

	f, err := goparser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // code -> Go name
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for i, name := range vs.Names {
				code, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				declared[code] = name.Name
			}
		}
	}
	if len(declared) != len(knownCodes) {
		t.Errorf("errors.go declares %d codes, the tests know %d", len(declared), len(knownCodes))
	}
	for code, name := range declared {
		if !knownCodes[Code(code)] {
			t.Errorf("code %s is not in the tests' knownCodes", code)
		}
		if !strings.Contains(spec, "| `"+code+"` | `"+name+"` |") {
			t.Errorf("spec/canonicalization.md has no error table row for %s (%s)", code, name)
		}
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\| `Code[A-Za-z0-9]+` \\|")
	for _, m := range row.FindAllStringSubmatch(spec, -1) {
		if _, ok := declared[m[1]]; !ok {
			t.Errorf("spec/canonicalization.md documents %s, which errors.go does not declare", m[1])
		}
	}

	for _, want := range []string{
		"`" + PolicyV02ID + "`", "`" + PolicyMCPDeclID + "`",
		"`DefaultMaxBytes` = 67,108,864", "`DefaultMaxDepth` = 1,000", "`depthCeiling` = 100,000",
		strconv.Itoa(MaxSafeInteger),
	} {
		if !strings.Contains(spec, want) {
			t.Errorf("spec/canonicalization.md does not state %s", want)
		}
	}
	if DefaultMaxBytes != 67_108_864 || DefaultMaxDepth != 1_000 || depthCeiling != 100_000 {
		t.Error("a default limit changed: update spec/canonicalization.md section 3 and this test")
	}
}
