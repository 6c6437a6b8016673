package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run the real tracectl main as the command
// "tracectl" inside scripts, so CLI behaviour is tested end to end.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"tracectl": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs every testdata/script/*.txtar. Each failure code of each
// command has a script that asserts its exit status.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// Pass through where the npm test peer lives, if known.
			env.Setenv("TRACECTL_EVERYTHING_BIN", os.Getenv("TRACECTL_EVERYTHING_BIN"))
			return nil
		},
	})
}
