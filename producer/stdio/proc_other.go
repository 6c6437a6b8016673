//go:build !unix

package stdio

import (
	"os"
	"os/exec"
	"syscall"
)

// Without process groups (Windows), the server itself is ended: SIGTERM
// cannot be delivered there, so both steps kill it; what it started may
// outlive it.
var (
	sigTerm = syscall.SIGKILL
	sigKill = syscall.SIGKILL
)

func ownGroup(*exec.Cmd) {}

func signalGroup(p *os.Process, _ syscall.Signal) error { return p.Kill() }

func killGroup(int, syscall.Signal) error { return nil }

func groupAlive(int) bool { return false }

func termSignal(*os.ProcessState) (int, bool) { return 0, false }
