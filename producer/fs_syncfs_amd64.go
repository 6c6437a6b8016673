//go:build linux && amd64

package producer

// syscall does not define SYS_SYNCFS on amd64.
const sysSyncfs = 306
