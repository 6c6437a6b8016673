package vectors

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Generate builds every vector from the fixed seed key, the fixed clock
// and fixed entropy, and returns their files keyed by slash-separated path
// ("<id>/vector.json", "<id>/blobs/sha256/<hex>", ...). The output is the
// same bytes on every run: a change to any format shows as a diff of the
// committed vectors.
func Generate() (map[string][]byte, error) {
	g, err := newGenerator()
	if err != nil {
		return nil, fmt.Errorf("generate vectors: %w", err)
	}
	vs, err := g.cases()
	if err != nil {
		return nil, fmt.Errorf("generate vectors: %w", err)
	}
	out := map[string][]byte{}
	for _, v := range vs {
		mb, err := v.m.Encode()
		if err != nil {
			return nil, fmt.Errorf("generate vector %s: %w", v.m.ID, err)
		}
		if _, dup := out[v.m.ID+"/"+ManifestFile]; dup {
			return nil, fmt.Errorf("generate vectors: id %s twice", v.m.ID)
		}
		out[v.m.ID+"/"+ManifestFile] = mb
		for name, b := range v.files {
			out[v.m.ID+"/"+name] = b
		}
	}
	return out, nil
}

// WriteDir writes generated files under dir, which must not exist: it is
// created (mode 0755) and every file is created exclusively, so nothing is
// ever overwritten. Paths must be relative and local.
func WriteDir(dir string, files map[string][]byte) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("write vectors: %w", err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if !fs.ValidPath(n) || strings.Contains(n, `\`) {
			return fmt.Errorf("write vectors: %q is not a local path", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write vectors: %w", err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("write vectors: %w", err)
		}
		_, err = f.Write(files[n])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write vectors: %s: %w", n, err)
		}
	}
	return nil
}

// ReadTree returns every regular file of fsys keyed by slash path, for
// comparing a directory of vectors with Generate's output. It fails on
// anything that is not a regular file or a directory, and on a file over
// max bytes.
func ReadTree(fsys fs.FS, max int64) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", p)
		}
		b, err := readBounded(fsys, p, max)
		if err != nil {
			return err
		}
		out[path.Clean(p)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read vectors: %w", err)
	}
	return out, nil
}
