//go:build !linux

package signer

import (
	"errors"
	"net"
)

// ErrUnsafeDirectory: the socket's directory is writable by anyone.
var ErrUnsafeDirectory = errors.New("socket directory is world-writable")

// Listen is linux-only: peers are judged by SO_PEERCRED.
func Listen(string) (*net.UnixListener, error) { return nil, errNoPeerCred }
