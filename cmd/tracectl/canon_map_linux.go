//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// mapCanonInput maps the whole of regular file f (read from its start)
// read-only, without copying it, under a read lease: while canon holds the
// lease no process can open the file for writing or truncate it (the
// opener waits until canon is done), and none had it open for writing when
// the lease was granted. That keeps the bytes the parser validated the
// bytes the encoder reads again. ok is false when the file cannot be
// mapped that way: empty, too large, someone has it open for writing, it
// is not ours (leases need ownership), or its filesystem has no leases. The
// caller then reads it.
//
// The kernel revokes a lease that a waiting writer has asked for after
// /proc/sys/fs/lease-break-time (45 s by default), which a slow reader of
// canon's output could outlast; done reports an error if the file was
// written meanwhile, so the output is then known to be unreliable.
func mapCanonInput(f *os.File, size int64) (data []byte, done func() error, ok bool) {
	if size <= 0 || size >= maxCanonInput {
		return nil, nil, false
	}
	fd := int(f.Fd())
	if _, err := fcntl(fd, syscall.F_SETLEASE, syscall.F_RDLCK); err != nil {
		return nil, nil, false
	}
	unlease := func() { _, _ = fcntl(fd, syscall.F_SETLEASE, syscall.F_UNLCK) }
	// The file as it is now that no writer can reach it.
	var before syscall.Stat_t
	if syscall.Fstat(fd, &before) != nil || before.Size != size {
		unlease()
		return nil, nil, false
	}
	data, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		unlease()
		return nil, nil, false
	}
	done = func() error {
		var after syscall.Stat_t
		err := syscall.Fstat(fd, &after)
		if err == nil && (after.Size != before.Size || after.Mtim != before.Mtim || after.Ctim != before.Ctim) {
			err = errInputChanged
		}
		if merr := syscall.Munmap(data); err == nil {
			err = merr
		}
		unlease()
		return err
	}
	return data, done, true
}

var errInputChanged = errors.New("the input file was written while canon read it; the output is not reliable")

func fcntl(fd, cmd, arg int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if errno != 0 {
		return 0, fmt.Errorf("fcntl: %w", errno)
	}
	return int(r), nil
}
