package verify_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/verify"
)

// declaredCodes parses the package source and returns the value of every
// constant of type Code.
func declaredCodes(t *testing.T) []string {
	t.Helper()
	files, err := parseGoFiles(token.NewFileSet())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						t.Fatalf("a Code constant that is not a string literal: %T", v)
					}
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, s)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// specCodes returns the codes of the table in spec/verification.md's
// "Codes" section, in order, with their status column.
func specCodes(t *testing.T) (codes []string, status map[string]string) {
	t.Helper()
	data, err := os.ReadFile("../spec/verification.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Codes\n")
	if !ok {
		t.Fatal("spec/verification.md has no Codes section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| [^|]+ \\| ([^|]+) \\|")
	status = map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		codes = append(codes, m[1])
		status[m[1]] = strings.TrimSpace(m[2])
	}
	return codes, status
}

// TestCodesInSpec keeps the Code constants, AllCodes and the spec's table
// in step: a code in one and not the others fails.
func TestCodesInSpec(t *testing.T) {
	declared := declaredCodes(t)
	var all []string
	for _, c := range verify.AllCodes() {
		all = append(all, string(c))
	}
	spec, _ := specCodes(t)
	if !slices.Equal(all, spec) {
		t.Errorf("AllCodes and spec/verification.md differ (order matters):\n  AllCodes: %v\n  spec:     %v", all, spec)
	}
	sortedAll := slices.Sorted(slices.Values(all))
	if !slices.Equal(declared, sortedAll) {
		t.Errorf("Code constants and AllCodes differ:\n  constants: %v\n  AllCodes:  %v", declared, sortedAll)
	}
	if len(slices.Compact(slices.Clone(sortedAll))) != len(sortedAll) {
		t.Errorf("a code is listed twice: %v", sortedAll)
	}
}

// TestSpecStatuses checks the spec's status column names only real
// statuses, so the table can be trusted by readers of the JSON report.
func TestSpecStatuses(t *testing.T) {
	valid := map[string]bool{"pass": true, "fail": true, "unavailable": true, "unsupported": true, "info": true, "warning": true}
	_, status := specCodes(t)
	for code, st := range status {
		for _, s := range strings.Split(st, ",") {
			if !valid[strings.TrimSpace(s)] {
				t.Errorf("spec: %s has status %q", code, s)
			}
		}
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
