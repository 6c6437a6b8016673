//go:build !unix

package producer

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("not supported on this platform")

func lockFile(*os.File) error { return errUnsupported }
