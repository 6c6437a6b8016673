package clientread

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// The Node process is shared by the package's tests and started on first use.
var (
	nodeOnce sync.Once
	nodeProc *Node
	nodeSkip string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if nodeProc != nil {
		nodeProc.Close()
	}
	os.Exit(code)
}

// testNode returns the shared Node, or skips: the TypeScript readers need
// node on PATH (or TRACECTL_NODE22_BIN) and the SDK at TRACECTL_TS_SDK_V1,
// which .ci/run installs from .ci/npm.
func testNode(t testing.TB) *Node {
	t.Helper()
	nodeOnce.Do(func() {
		bin := os.Getenv("TRACECTL_NODE22_BIN")
		if bin == "" {
			p, err := exec.LookPath("node")
			if err != nil {
				nodeSkip = "node not on PATH and TRACECTL_NODE22_BIN unset: TypeScript SDK readers not run"
				return
			}
			bin = p
		}
		sdk := os.Getenv("TRACECTL_TS_SDK_V1")
		if sdk == "" {
			nodeSkip = "TRACECTL_TS_SDK_V1 unset (run .ci/run, or npm ci in .ci/npm and point it at node_modules/@modelcontextprotocol/sdk): TypeScript SDK readers not run"
			return
		}
		n, err := StartNode(bin, sdk)
		if errors.Is(err, ErrNodeSetup) {
			nodeSkip = "TypeScript SDK readers not loadable from " + sdk + ": " + err.Error()
			return
		}
		if err != nil {
			nodeSkip = "cannot start node: " + err.Error()
			return
		}
		nodeProc = n
	})
	if nodeProc == nil {
		t.Skip(nodeSkip)
	}
	return nodeProc
}
