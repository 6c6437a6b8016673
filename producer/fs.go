package producer

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// FS is the file system a Recorder writes the bundle to. It is an input so
// tests can inject faults (a full disk, a failing fsync, a lock held
// elsewhere); [OS] is the real one, and a fault injector wraps it. Names are paths as given to Open
// (joined with the bundle directory).
type FS interface {
	// Mkdir creates a directory; it fails if name exists.
	Mkdir(name string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Link creates newname as a hard link to oldname; it fails if newname
	// exists, which is how record.json is created exclusively and atomically.
	Link(oldname, newname string) error
	Remove(name string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	// Lock takes an exclusive advisory lock without waiting; it returns an
	// error wrapping ErrLocked when another holder has it. Closing the file
	// releases it.
	Lock() error
}

// OS is the operating system's file system: what a nil FS means.
var OS FS = osFS{}

type osFS struct{}

func (osFS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Link(oldname, newname string) error         { return os.Link(oldname, newname) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }

type osFile struct{ *os.File }

func (f osFile) Lock() error { return lockFile(f.File) }

// ErrLocked reports a bundle whose journal another recorder (or a recovery)
// holds: two writers would interleave history.
var ErrLocked = errors.New("bundle is locked by another recorder")
