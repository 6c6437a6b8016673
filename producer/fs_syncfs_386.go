//go:build linux && 386

package producer

// syscall does not define SYS_SYNCFS on 386.
const sysSyncfs = 344
