package vectors

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tracectl/tracectl/producer"
)

// memFS is an in-memory producer.FS: the generator records each vector's
// evidence through the real producer without touching a disk, then reads
// the files back as bytes. Paths are slash-separated and relative.
type memFS struct {
	mu    sync.Mutex
	files map[string]*memData
	dirs  map[string]bool
}

type memData struct{ b []byte }

func newMemFS() *memFS {
	return &memFS{files: map[string]*memData{}, dirs: map[string]bool{".": true}}
}

func clean(name string) string { return path.Clean(strings.ReplaceAll(name, `\`, "/")) }

func (m *memFS) Mkdir(name string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if m.dirs[name] || m.files[name] != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	if !m.dirs[path.Dir(name)] {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrNotExist}
	}
	m.dirs[name] = true
	return nil
}

func (m *memFS) OpenFile(name string, flag int, _ fs.FileMode) (producer.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if m.dirs[name] {
		return &memFile{fs: m, name: name, dir: true}, nil
	}
	d := m.files[name]
	switch {
	case d != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case d == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case d == nil:
		if !m.dirs[path.Dir(name)] {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		d = &memData{}
		m.files[name] = d
	}
	if flag&os.O_TRUNC != 0 {
		d.b = nil
	}
	return &memFile{fs: m, name: name, d: d, append: flag&os.O_APPEND != 0}, nil
}

func (m *memFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = clean(oldname), clean(newname)
	d := m.files[oldname]
	if d == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = d
	return nil
}

func (m *memFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = clean(oldname), clean(newname)
	d := m.files[oldname]
	if d == nil {
		return &fs.PathError{Op: "link", Path: oldname, Err: fs.ErrNotExist}
	}
	if m.files[newname] != nil || m.dirs[newname] {
		return &fs.PathError{Op: "link", Path: newname, Err: fs.ErrExist}
	}
	m.files[newname] = &memData{b: bytes.Clone(d.b)}
	return nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if m.files[name] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if !m.dirs[name] {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var out []fs.DirEntry
	for f, d := range m.files {
		if path.Dir(f) == name {
			out = append(out, memInfo{name: path.Base(f), size: int64(len(d.b))})
		}
	}
	for dn := range m.dirs {
		if dn != name && path.Dir(dn) == name {
			out = append(out, memInfo{name: path.Base(dn), dir: true})
		}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if m.dirs[name] {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	if d := m.files[name]; d != nil {
		return memInfo{name: path.Base(name), size: int64(len(d.b))}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// tree returns the files under dir, keyed by their path relative to dir.
func (m *memFS) tree(dir string) map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := clean(dir) + "/"
	out := map[string][]byte{}
	for name, d := range m.files {
		if rel, ok := strings.CutPrefix(name, prefix); ok {
			out[rel] = bytes.Clone(d.b)
		}
	}
	return out
}

type memFile struct {
	fs     *memFS
	name   string
	d      *memData
	dir    bool
	append bool
	off    int
}

func (f *memFile) Read(p []byte) (int, error) {
	if f.dir {
		return 0, errors.New("read of a directory")
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.off >= len(f.d.b) {
		return 0, io.EOF
	}
	n := copy(p, f.d.b[f.off:])
	f.off += n
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.dir {
		return 0, errors.New("write to a directory")
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.append {
		f.off = len(f.d.b)
	}
	end := f.off + len(p)
	if end > len(f.d.b) {
		f.d.b = append(f.d.b, make([]byte, end-len(f.d.b))...)
	}
	copy(f.d.b[f.off:], p)
	f.off = end
	return len(p), nil
}

func (f *memFile) Close() error { return nil }
func (f *memFile) Sync() error  { return nil }
func (f *memFile) Lock() error  { return nil }

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.dir || size < 0 || size > int64(len(f.d.b)) {
		return errors.New("truncate: bad size")
	}
	f.d.b = f.d.b[:size]
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	if f.dir {
		return memInfo{name: path.Base(f.name), dir: true}, nil
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return memInfo{name: path.Base(f.name), size: int64(len(f.d.b))}, nil
}

// memInfo is both the fs.FileInfo and the fs.DirEntry of a memFS entry.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o700
	}
	return 0o600
}
func (i memInfo) ModTime() time.Time         { return time.Time{} }
func (i memInfo) IsDir() bool                { return i.dir }
func (i memInfo) Sys() any                   { return nil }
func (i memInfo) Type() fs.FileMode          { return i.Mode().Type() }
func (i memInfo) Info() (fs.FileInfo, error) { return i, nil }
