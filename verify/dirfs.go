package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
)

// ErrNotRegular is wrapped by every refusal to open a bundle file that is
// not a regular file inside the bundle: a symbolic link (in any path
// component), a FIFO, a device, a socket or a directory. Such a file is
// never read: a FIFO would block verification forever, a device such as
// /dev/zero never ends, and a link would let bytes from outside the bundle
// pass as evidence.
var ErrNotRegular = errors.New("not a regular file inside the bundle")

// DirFS returns the bundle directory dir as an fs.FS for Bundle that opens
// only regular files and directories inside dir (spec/verification.md, "Bounded input"): no
// path component below dir is followed if it is a symbolic link, and a
// FIFO or device is detected without blocking (on Linux the file is opened
// with O_NOFOLLOW|O_NONBLOCK one component at a time with openat, so a
// file swapped for a link or a FIFO between checks is still refused).
// Refusals wrap ErrNotRegular. dir itself is resolved as given: naming the
// bundle is the caller's choice.
//
// Use it instead of os.DirFS, which follows links and blocks on FIFOs.
func DirFS(dir string) fs.FS {
	d := &bundleDir{dir: dir, dirs: new(dirFDs)}
	// The directories opened on the way to files are kept open while the
	// FS is in use (Linux: one openat per file instead of one per path
	// component) and closed when it is no longer reachable.
	runtime.AddCleanup(d, func(c *dirFDs) { c.close() }, d.dirs)
	return d
}

type bundleDir struct {
	dir  string
	dirs *dirFDs
}

func (d *bundleDir) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) || strings.Contains(name, `\`) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := d.openNoFollow(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f, nil
}

// openRegular opens name in fsys and checks that it is a regular file:
// every fs.FS, not only DirFS, gets the check (an fstest.MapFS entry may
// carry fs.ModeSymlink or fs.ModeNamedPipe).
func openRegular(fsys fs.FS, name string) (fs.File, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, typeName(fi.Mode()))}
	}
	return f, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file"
}

// Bounds of the scan for links and special files (scanTree): deeper or
// more entries than a producer writes are not listed, and the scan says
// it stopped.
const (
	maxScanDepth   = 4
	maxScanEntries = 64 << 20
)

// scanTree reports every symbolic link and special file in the bundle,
// whether or not a check would read it (a producer writes only regular
// files and directories): file_refused, never followed. Directories are
// read in batches, so memory does not grow with the number of blobs; the
// entry types come from the directory itself (no stat per file).
func (b *bundleCheck) scanTree(ctx context.Context) error {
	var seen int64
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		f, err := b.fsys.Open(dir)
		if err != nil {
			return nil // the checks that read files report what is missing
		}
		defer f.Close()
		rd, ok := f.(fs.ReadDirFile)
		if !ok {
			return nil
		}
		for {
			ents, err := rd.ReadDir(256)
			for _, e := range ents {
				if seen++; seen > maxScanEntries {
					return errScanBound
				}
				name := e.Name()
				if dir != "." {
					name = dir + "/" + name
				}
				switch t := e.Type(); {
				case t&fs.ModeSymlink != 0 || (t&fs.ModeType != 0 && !t.IsDir()):
					if b.scanned == nil {
						b.scanned = map[string]bool{}
					}
					b.scanned[name] = true
					b.r.add(CodeFileRefused, checkTranscript, StatusFail, name,
						fmt.Sprintf("%s in the bundle: never followed or read; a producer writes only regular files and directories", typeName(t)))
				case t.IsDir():
					if depth+1 > maxScanDepth {
						continue
					}
					if err := walk(name, depth+1); err != nil {
						return err
					}
				}
			}
			if err != nil {
				return nil // io.EOF, or a directory that cannot be read further
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := walk(".", 0); err != nil && !errors.Is(err, errScanBound) {
		return err
	}
	return nil
}

var errScanBound = errors.New("scan bound reached")
