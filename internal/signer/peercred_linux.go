package signer

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// peerCred reads a Unix socket peer's credentials (SO_PEERCRED): the
// kernel's record of the process that connected, which it cannot forge.
func peerCred(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, fmt.Errorf("%T is not a Unix socket connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	if cred == nil {
		return Peer{}, errors.New("SO_PEERCRED: no credentials")
	}
	return Peer{UID: cred.Uid, PID: cred.Pid}, nil
}
