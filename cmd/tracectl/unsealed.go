package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/transcript"
)

// unsealedTail bounds how much of a journal's end is read to find its last
// line: a seal line is small.
const unsealedTail = 64 << 10

// unsealedBundle explains a bundle without record.json: one whose recording
// stopped before it sealed (a crash, a SIGKILL from an MCP client), or one
// sealed without a key. path is the bundle or its record.json. ok is false
// when path is not such a bundle; err then says what it is and hint what
// to run.
func unsealedBundle(path string) (hint string, ok bool, err error) {
	dir := path
	if filepath.Base(path) == "record.json" {
		dir = filepath.Dir(path)
	}
	if _, err := os.Stat(filepath.Join(dir, "record.json")); err == nil {
		return "", false, nil
	}
	f, err := os.Open(filepath.Join(dir, "transcript.jsonl"))
	if err != nil {
		return "", false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, nil
	}
	off := max(0, fi.Size()-unsealedTail)
	tail, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return "", false, nil
	}
	tail = bytes.TrimSuffix(tail, []byte("\n"))
	last := tail[bytes.LastIndexByte(tail, '\n')+1:]
	if ev, derr := transcript.DecodeLine(last); derr == nil {
		if _, sealed := ev.(*transcript.Seal); sealed {
			return "sign it with 'tracectl seal --bundle " + dir + " --key KEY'", true,
				fmt.Errorf("bundle %s is sealed but not signed: it has no record.json", dir)
		}
	}
	return "run 'tracectl seal --recover --bundle " + dir + " --key KEY', then verify it again", true,
		fmt.Errorf("bundle %s was never sealed: the recording stopped before it could seal (no record.json)", dir)
}

// explainUnsealed wraps verify's RunE: a bundle that is not sealed is named
// as such, with the command that seals it, instead of a missing file.
func explainUnsealed(c *cobra.Command) {
	f := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		err := f(cmd, args)
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != exitUsage || len(args) != 1 {
			return err
		}
		if hint, ok, uerr := unsealedBundle(args[0]); ok {
			return usageErr(uerr, hint)
		}
		return err
	}
}
