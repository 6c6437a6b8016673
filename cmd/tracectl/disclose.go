package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/verify"
)

type discloseOptions struct {
	bundle  string
	attempt string
	out     string
	format  string
}

// discloseMediaType is the media type of `tracectl disclose --format json`.
const discloseMediaType = "application/vnd.tracectl.disclose.v1+json"

// discloseResult is what `tracectl disclose --format json` prints.
type discloseResult struct {
	MediaType string `json:"media_type"`
	Out       string `json:"out"` // the disclosed bundle written
	Attempt   string `json:"attempt"`
	Lines     int    `json:"lines"`     // lines disclosed
	TreeSize  int64  `json:"tree_size"` // lines in the transcript
	Payloads  int    `json:"payloads"`  // payloads disclosed
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newDiscloseCmd(s, runDisclose) })
}

func newDiscloseCmd(s streams, runF func(streams, *discloseOptions) error) *cobra.Command {
	o := &discloseOptions{}
	cmd := &cobra.Command{
		Use:   "disclose --bundle DIR --attempt ID --out DIR2 [--format text|json]",
		Short: "Write a bundle that discloses one attempt, and nothing checkable about the rest",
		Long: `disclose writes a new bundle DIR2 holding the signed record, the inclusion proof of
one attempt's lines (the header, the snapshot line it binds, the attempt, and
every observation, resolution and notification naming it) and only the payloads
those lines commit to, with their salts: the attempt's request and response
bytes (as retained: redacted copies stay redacted) and the bound snapshot's
manifest and pages. 'tracectl verify DIR2' checks all of it against the record;
every other line is represented by hashes in the proof, and its payloads are not
there, so their salted commitments reveal nothing.

DIR2 is created new (it must not exist), mode 0700, its files 0600.
--format json prints the summary as one JSON object (out, attempt, lines,
tree_size, payloads).`,
		Example: "  tracectl disclose --bundle run.trace --attempt a7 --out a7.disclosed\n  tracectl verify --trusted-key key.pub a7.disclosed",
		Args:    cobra.NoArgs,
		RunE:    func(c *cobra.Command, args []string) error { return runF(s, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.bundle, "bundle", "", "the bundle directory (required)")
	f.StringVar(&o.attempt, "attempt", "", "the attempt id to disclose (required)")
	f.StringVar(&o.out, "out", "", "the disclosed bundle directory to create (required)")
	formatFlag(cmd, &o.format, discloseMediaType)
	for _, name := range []string{"bundle", "attempt", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func runDisclose(s streams, o *discloseOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	d, err := verify.Disclose(verify.DirFS(o.bundle), o.attempt)
	if err != nil {
		hint := ""
		switch {
		case errors.Is(err, verify.ErrAttemptNotFound):
			hint = "attempt ids are the attempt_id members of the transcript's attempt lines (tracectl show lists them)"
		case errors.Is(err, fs.ErrNotExist):
			hint = "--bundle takes a sealed, signed bundle directory (record.json, transcript.jsonl)"
		}
		return usageErr(fmt.Errorf("disclose: %w", err), hint)
	}
	if err := os.Mkdir(o.out, 0o700); err != nil {
		return usageErr(fmt.Errorf("disclose: %w", err), "--out must not exist yet")
	}
	// The files verify.Disclose chose: the record, the proof, the pack,
	// and the record's anchoring (anchors/record.json with its receipt
	// anchors/<seq>.json, its Rekor entry anchors/rekor/record.json).
	for _, name := range slices.Sorted(maps.Keys(d.Files)) {
		data := d.Files[name]
		err := os.MkdirAll(filepath.Dir(filepath.Join(o.out, filepath.FromSlash(name))), 0o700)
		if err == nil {
			err = writeExclusive(filepath.Join(o.out, filepath.FromSlash(name)), data)
		}
		if err != nil {
			// The directory was created just now: a half-written
			// disclosure is removed, never left to be mistaken for one.
			os.RemoveAll(o.out)
			return fmt.Errorf("disclose: %w", err)
		}
	}
	if o.format == formatJSON {
		return writeJSON(s.out, discloseResult{MediaType: discloseMediaType, Out: o.out, Attempt: o.attempt,
			Lines: d.Lines, TreeSize: d.TreeSize, Payloads: d.Payloads})
	}
	_, err = fmt.Fprintf(s.out, "%s: attempt %s: %d of %d lines and %d payloads disclosed\n", escapeTerminal(o.out), escapeTerminal(o.attempt), d.Lines, d.TreeSize, d.Payloads)
	return err
}

// writeExclusive creates name (it must not exist), mode 0600, with data,
// fsynced.
func writeExclusive(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
