package signer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafeDirectory: the socket's directory is writable by others than
// its owner (without the sticky bit), who could replace the socket with
// their own and collect what recorders send.
var ErrUnsafeDirectory = errors.New("socket directory is writable by others than its owner")

// SocketMode is the socket's mode: the owner and the group may connect
// (connecting needs write permission); peers are then judged by uid.
const SocketMode = 0o660

// Listen creates the Unix socket path with mode SocketMode in a directory
// only its owner may write (or a sticky one), and listens on it. An existing path is
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
	// A directory others or the group may write lets them unlink the
	// socket and bind their own in its place (the sticky bit alone stops
	// that): recorders would then send their statements to, and sign
	// under, an impostor's key. Recorders need only search (x) on the
	// directory to connect.
	if m := fi.Mode(); m.Perm()&0o022 != 0 && m&os.ModeSticky == 0 {
		return nil, fmt.Errorf("%w: %s (mode %04o): make it writable by its owner only (0750), or sticky", ErrUnsafeDirectory, dir, m.Perm())
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
	// No chmod after bind: the umask made the mode, and a chmod by path
	// would follow whatever another user put at the path meanwhile.
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm()&^SocketMode != 0 {
		l.Close()
		return nil, fmt.Errorf("socket %s: not the socket bind(2) made with mode %04o", path, SocketMode)
	}
	return l, nil
}
