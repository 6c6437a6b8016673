package mcpsdk

import (
	"os"
	"syscall"
)

// sigTerm asks a server to end (on Windows, Signal refuses it and the
// server is killed).
var sigTerm os.Signal = syscall.SIGTERM
