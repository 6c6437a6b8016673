package verify

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// openNoFollow opens dir/name one component at a time with openat and
// O_NOFOLLOW, so no link below dir is followed even if one appears between
// checks, and the last component with O_NONBLOCK, so a FIFO cannot block
// the open; an fstat then refuses anything but a regular file or a
// directory.
func openNoFollow(dir, name string) (*os.File, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open bundle directory: %w", err)
	}
	parts := strings.Split(name, "/")
	for i, part := range parts {
		last := i == len(parts)-1
		flags := syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		if last {
			flags |= syscall.O_NONBLOCK | syscall.O_NOCTTY
		} else {
			flags |= syscall.O_DIRECTORY
		}
		next, err := openat(fd, part, flags)
		syscall.Close(fd)
		if err != nil {
			if err == syscall.ELOOP || (!last && err == syscall.ENOTDIR) {
				return nil, fmt.Errorf("%w (%s is a symbolic link or not a directory)", ErrNotRegular, strings.Join(parts[:i+1], "/"))
			}
			return nil, err
		}
		fd = next
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
