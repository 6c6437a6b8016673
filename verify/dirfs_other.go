//go:build !linux

package verify

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// openNoFollow checks every component with Lstat before opening. Unlike
// the Linux implementation it cannot close the window between the check
// and the open.
func (d *bundleDir) openNoFollow(name string) (*os.File, error) {
	if err := lstatComponents(d.dir, name); err != nil {
		return nil, err
	}
	return os.Open(d.dir + string(os.PathSeparator) + name)
}

// dirFDs keeps nothing open on these systems.
type dirFDs struct{}

func (*dirFDs) close() {}

// lstatComponents refuses a path any of whose components below dir is a
// symbolic link, and a last component that is not a regular file, without
// opening anything (the portable fallback of openNoFollow).
func lstatComponents(dir, name string) error {
	parts := strings.Split(name, "/")
	p := dir
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w (%s is a symbolic link)", ErrNotRegular, strings.Join(parts[:i+1], "/"))
		}
		if i == len(parts)-1 && !fi.Mode().IsRegular() && !fi.IsDir() {
			return fmt.Errorf("%w (%s)", ErrNotRegular, typeName(fi.Mode()))
		}
	}
	return nil
}
