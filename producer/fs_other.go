//go:build unix && !linux

package producer

import (
	"os"
	"syscall"
)

// syncFS falls back to sync(2) where syncfs(2) does not exist.
func syncFS(*os.File) error {
	syscall.Sync()
	return nil
}
