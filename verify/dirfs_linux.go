package verify

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
)

// openNoFollow opens d.dir/name without following any link below d.dir:
// each directory on the way is opened with openat(O_NOFOLLOW|O_DIRECTORY)
// from its parent (kept open in d.dirs, so a directory swapped for a link
// later is still the one first opened), and the last component with
// O_NOFOLLOW|O_NONBLOCK, so a FIFO cannot block the open; an fstat then
// refuses anything but a regular file or a directory.
func (d *bundleDir) openNoFollow(name string) (*os.File, error) {
	parent, base := "", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		parent, base = name[:i], name[i+1:]
	}
	pfd, owned, err := d.dirs.get(d.dir, parent)
	if err != nil {
		return nil, err
	}
	fd, err := openat(pfd, base, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY)
	if owned {
		syscall.Close(pfd)
	}
	if err != nil {
		if err == syscall.ELOOP {
			return nil, fmt.Errorf("%w (%s is a symbolic link)", ErrNotRegular, name)
		}
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// Directories open too (for the link scan); every read of a file goes
	// through openRegular, which refuses them.
	if m := st.Mode & syscall.S_IFMT; m != syscall.S_IFREG && m != syscall.S_IFDIR {
		syscall.Close(fd)
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, typeName(modeOf(st.Mode)))
	}
	return os.NewFile(uintptr(fd), name), nil
}

// maxDirFDs bounds the directories kept open per DirFS: a bundle has a
// handful (the root, blobs/, blobs/sha256/, quarantine/).
const maxDirFDs = 32

// dirFDs caches the directories of a bundle opened without following
// links, by bundle-relative path ("" is the root).
type dirFDs struct {
	mu  sync.Mutex
	fds map[string]int
}

// get returns the fd of directory rel below root, opened component by
// component with O_NOFOLLOW; owned means the caller must close it (the
// cache was full).
func (c *dirFDs) get(root, rel string) (fd int, owned bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(root, rel)
}

func (c *dirFDs) getLocked(root, rel string) (int, bool, error) {
	if fd, ok := c.fds[rel]; ok {
		return fd, false, nil
	}
	var fd int
	var err error
	if rel == "" {
		fd, err = syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return -1, false, fmt.Errorf("open bundle directory: %w", err)
		}
	} else {
		parent, base := "", rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			parent, base = rel[:i], rel[i+1:]
		}
		pfd, owned, err := c.getLocked(root, parent)
		if err != nil {
			return -1, false, err
		}
		fd, err = openat(pfd, base, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY|syscall.O_CLOEXEC)
		if owned {
			syscall.Close(pfd)
		}
		if err == syscall.ELOOP || err == syscall.ENOTDIR {
			return -1, false, fmt.Errorf("%w (%s is a symbolic link or not a directory)", ErrNotRegular, rel)
		}
		if err != nil {
			return -1, false, err
		}
	}
	if len(c.fds) >= maxDirFDs {
		return fd, true, nil
	}
	if c.fds == nil {
		c.fds = map[string]int{}
	}
	c.fds[rel] = fd
	return fd, false, nil
}

func (c *dirFDs) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fd := range c.fds {
		syscall.Close(fd)
	}
	c.fds = nil
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func modeOf(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	}
	return fs.ModeIrregular
}
