// Command jcsanchor is the anchor of the tracectl canon whole-process
// benchmark (canon's BenchmarkCLI): the smallest program that canonicalizes
// a file with gowebpki/jcs, reading it whole and writing the result.
package main

import (
	"fmt"
	"os"

	"github.com/gowebpki/jcs"
)

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out, err := jcs.Transform(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		os.Exit(1)
	}
}
