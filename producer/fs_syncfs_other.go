//go:build linux && !amd64 && !386

package producer

import "syscall"

const sysSyncfs = syscall.SYS_SYNCFS
