package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

type proveOptions struct {
	bundle  string
	attempt string
	out     string
	format  string
}

// proveMediaType is the media type of `tracectl prove --format json`.
const proveMediaType = "application/vnd.tracectl.prove.v1+json"

// proveResult is what `tracectl prove --format json` prints.
type proveResult struct {
	MediaType      string `json:"media_type"`
	Proof          string `json:"proof"` // the file written
	Attempt        string `json:"attempt"`
	Lines          int    `json:"lines"`     // lines disclosed
	TreeSize       int64  `json:"tree_size"` // lines in the transcript
	TranscriptRoot string `json:"transcript_root"`
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newProveCmd(s, runProve) })
}

func newProveCmd(s streams, runF func(streams, *proveOptions) error) *cobra.Command {
	o := &proveOptions{}
	cmd := &cobra.Command{
		Use:   "prove --bundle DIR --attempt ID --out PROOF [--format text|json]",
		Short: "Write an inclusion proof of one attempt's lines",
		Long: `prove writes the lines of one attempt (the header, the snapshot line it binds,
the attempt, and every observation, resolution and notification naming it)
with their RFC 6962 inclusion proofs. Anyone holding the signed record can
check them with 'tracectl verify --proof PROOF RECORD.json' without seeing the
rest of the transcript. The disclosed lines hold digests, never payloads;
tool arguments and responses stay in the bundle.

PROOF is created new (an existing file is never overwritten). --format json
prints the summary as one JSON object (proof, attempt, lines, tree_size,
transcript_root).`,
		Example: "  tracectl prove --bundle run.trace --attempt a7 --out a7.proof\n  tracectl verify --trusted-key key.pub --proof a7.proof run.trace/record.json",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runF(s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bundle, "bundle", "", "the bundle directory (required)")
	f.StringVar(&o.attempt, "attempt", "", "the attempt id to prove (required)")
	f.StringVar(&o.out, "out", "", "the proof file to create (required)")
	formatFlag(cmd, &o.format, proveMediaType)
	for _, name := range []string{"bundle", "attempt", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func runProve(s streams, o *proveOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	// Not os.Open: a transcript that is a FIFO or a link must not hang or
	// redirect prove any more than verify.
	f, err := verify.DirFS(o.bundle).Open(transcript.TranscriptFile)
	if err != nil {
		return usageErr(err, "--bundle takes a bundle directory holding transcript.jsonl")
	}
	defer f.Close()
	p, err := verify.ProveAttempt(f, o.attempt)
	if err != nil {
		hint := ""
		if errors.Is(err, verify.ErrAttemptNotFound) {
			hint = "attempt ids are the attempt_id members of the transcript's attempt lines"
		}
		return usageErr(fmt.Errorf("prove: %w", err), hint)
	}
	data, err := p.Marshal()
	if err != nil {
		return usageErr(err, "")
	}
	out, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return usageErr(err, "the proof file must not exist yet")
	}
	if _, err := out.Write(data); err != nil {
		out.Close()
		os.Remove(o.out)
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(o.out)
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	if o.format == formatJSON {
		return writeJSON(s.out, proveResult{MediaType: proveMediaType, Proof: o.out, Attempt: o.attempt,
			Lines: len(p.Entries), TreeSize: p.TreeSize, TranscriptRoot: p.Root})
	}
	_, err = fmt.Fprintf(s.out, "%s: %d lines of a %d-line transcript with root %s\n", o.out, len(p.Entries), p.TreeSize, p.Root)
	return err
}
