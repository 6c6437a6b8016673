//go:build !linux

package signer

import (
	"errors"
	"net"
)

// errNoPeerCred: without SO_PEERCRED no peer can be judged, so none is
// served (tracectl signer serve is linux-only).
var errNoPeerCred = errors.New("peer credentials are read with SO_PEERCRED, on linux only")

func peerCred(net.Conn) (Peer, error) { return Peer{}, errNoPeerCred }
