//go:build unix

// Command maxrss runs a command with its standard output on /dev/null and
// prints "<wall nanoseconds> <peak RSS bytes>" of that process. canon's
// BenchmarkCLI starts its processes through it: on Linux a child started by
// a large process (vfork, then exec) reports at least that process's peak
// RSS, so measured straight from the benchmark, every command would look
// as large as the benchmark itself. This process is small.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

func main() {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdout, cmd.Stderr = null, os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wall := time.Since(t0)
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	if runtime.GOOS != "darwin" {
		rss *= 1024 // kilobytes, except on macOS
	}
	fmt.Println(wall.Nanoseconds(), rss)
}
