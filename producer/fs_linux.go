//go:build linux

package producer

import (
	"os"
	"syscall"
)

func syncFS(d *os.File) error {
	if _, _, errno := syscall.Syscall(sysSyncfs, d.Fd(), 0, 0); errno != 0 {
		return errno
	}
	return nil
}
