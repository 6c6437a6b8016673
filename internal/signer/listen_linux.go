package signer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafeDirectory: the socket's directory is writable by anyone, who
// could replace the socket with their own and collect what recorders send.
var ErrUnsafeDirectory = errors.New("socket directory is world-writable")

// SocketMode is the socket's mode: the owner and the group may connect
// (connecting needs write permission); peers are then judged by uid.
const SocketMode = 0o660

// Listen creates the Unix socket path with mode SocketMode in a directory
// that is not world-writable, and listens on it. An existing path is
// refused (a stale socket is removed by hand). Closing the listener
// removes the socket.
func Listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("socket directory %s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("%w: %s (mode %04o)", ErrUnsafeDirectory, dir, fi.Mode().Perm())
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("socket %s: %w", path, os.ErrExist)
	}
	// bind(2) creates the socket with the umask applied: set it so the
	// socket is never more open than SocketMode, not even for an instant.
	old := syscall.Umask(0o777 &^ SocketMode)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, SocketMode); err != nil { // explicit, whatever bind(2) made of it
		l.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return l, nil
}
