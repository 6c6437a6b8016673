// Command tracectl records, signs and verifies TRACE v0.3 MCP transcripts.
//
// The commands are thin: flags become an options struct, the options go to a
// library call, and one place (exitCode) maps the outcome to the exit status.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
