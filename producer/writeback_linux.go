package producer

import "syscall"

// startWriteback asks the kernel to start writing f's dirty pages back
// (sync_file_range SYNC_FILE_RANGE_WRITE over the whole file) without
// waiting for them: it is not an fsync and makes nothing durable. Control
// holds the descriptor open for the call, so a concurrent Close cannot
// turn it into another file's. Errors are ignored: Seal's fsync is what
// counts.
func startWriteback(f File) {
	of, ok := f.(osFile)
	if !ok {
		return
	}
	rc, err := of.File.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SyncFileRange(int(fd), 0, 0, 0x2 /* SYNC_FILE_RANGE_WRITE */)
	})
}
