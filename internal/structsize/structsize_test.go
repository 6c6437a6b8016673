// Package structsize holds a test over the whole module's source: no struct
// type in non-test code has more than maxFields fields.
package structsize

import (
	"cmp"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFields bounds a struct's fields. A struct past it holds the state of
// several concerns at once (verify's bundleCheck had 52, the producer's
// Recorder 38): its fields belong in named sub-structs, each documented
// with what it follows.
const maxFields = 30

// structSize is one struct type and its field count (an embedded field
// counts as one).
type structSize struct {
	name   string // pkgdir.Type, or pkgdir.(anonymous) for a struct literal type
	pos    string // module-relative file:line
	fields int
}

func TestStructFields(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := structSizes(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) == 0 {
		t.Fatalf("no struct types found under %s", root)
	}
	slices.SortStableFunc(sizes, func(a, b structSize) int { return cmp.Compare(b.fields, a.fields) })
	for _, s := range sizes[:min(5, len(sizes))] {
		t.Logf("%3d fields: %s (%s)", s.fields, s.name, s.pos)
	}
	for _, s := range sizes {
		if s.fields > maxFields {
			t.Errorf("%s (%s) has %d fields, more than %d: group them into named sub-structs", s.name, s.pos, s.fields, maxFields)
		}
	}
}

// moduleRoot is the nearest directory above the working directory (the
// package's) holding a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// structSizes parses every non-test Go file of the module at root, whatever
// its build constraints, skipping testdata, hidden and underscore
// directories and nested modules, as the go command does.
func structSizes(root string) ([]structSize, error) {
	var out []structSize
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root {
				if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		named := map[*ast.StructType]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if st, ok := n.Type.(*ast.StructType); ok {
					named[st] = n.Name.Name
				}
			case *ast.StructType:
				name, ok := named[n]
				if !ok {
					name = "(anonymous)"
				}
				p := fset.Position(n.Pos())
				out = append(out, structSize{
					name:   pkg + "." + name,
					pos:    fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line),
					fields: countFields(n),
				})
			}
			return true
		})
		return nil
	})
	return out, err
}

// countFields counts field names; an embedded field counts as one.
func countFields(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(1, len(f.Names))
	}
	return n
}
