//go:build unix

package stdio

import (
	"os"
	"os/exec"
	"syscall"
)

var (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// ownGroup starts the server as the leader of a new process group, so the
// whole group (what the server starts too) can be ended together, and so a
// signal to the client's process group does not reach it directly.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func signalGroup(p *os.Process, sig syscall.Signal) error { return killGroup(p.Pid, sig) }

func killGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

// groupAlive reports whether any process of the group is left.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	return liveMember(pgid)
}

func termSignal(ps *os.ProcessState) (int, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}
