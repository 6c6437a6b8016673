package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
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
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("TRACECTL_UPDATE_SCRIPTS") != "",
		Setup: func(env *testscript.Env) error {
			// Pass through where the npm test peer lives, if known.
			env.Setenv("TRACECTL_EVERYTHING_BIN", os.Getenv("TRACECTL_EVERYTHING_BIN"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":    cmdExits,
			"mkbundle": cmdMkBundle,
		},
	})
}

// cmdExits runs a command and asserts its exact exit status:
//
//	exits 3 tracectl verify bundle
//
// stdout and stderr are kept for the assertions that follow.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}
