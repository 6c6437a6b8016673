package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/tracectl/tracectl/snapshot"
)

// diffMediaType is the versioned media type of `tracectl diff --format json`.
const diffMediaType = "application/vnd.tracectl.snapshot-diff.v1+json"

type diffOptions struct {
	format   string
	old, new string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newDiffCmd(s, runDiff) })
}

func newDiffCmd(s streams, runF func(streams, *diffOptions) error) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff OLD NEW [--format text|json]",
		Short: "Compare the tool declarations of two snapshot files (declaration drift)",
		Long: `diff compares two snapshot files (from tracectl snapshot) tool by tool: added,
removed, changed (with the members that changed, as JSON Pointers), unchanged,
or cannot_compare (a declaration that cannot be canonicalized, an ambiguous
name, or a tool absent from an incomplete snapshot: never called removed).
Every member of a declaration counts, including _meta and unknown members.
Each file's pages are checked against its manifest first.

Exit status: 0 identical, 1 drift found, 3 no drift found but some tool could
not be compared or a snapshot is incomplete, 2 unreadable or inconsistent
input.`,
		Example: "  tracectl diff before.json after.json\n  tracectl diff --format json signed.json today.json",
		Args:    cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			o.old, o.new = args[0], args[1]
			return runF(s, o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: text or json")
	return cmd
}

func readSnapshotFile(name string) (*snapshot.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, snapshot.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	sf, err := snapshot.ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, p := range snapshot.VerifyPages(sf.Manifest, sf.Load) {
		if p.Kind == snapshot.ProblemMismatch {
			return nil, fmt.Errorf("%s: pages do not match the manifest: %s", name, p)
		}
	}
	return sf, nil
}

func runDiff(s streams, o *diffOptions) error {
	if o.format != "text" && o.format != "json" {
		return usageErr(fmt.Errorf("unknown --format %q", o.format), "use --format text or --format json")
	}
	oldF, err := readSnapshotFile(o.old)
	if err != nil {
		return usageErr(err, "")
	}
	newF, err := readSnapshotFile(o.new)
	if err != nil {
		return usageErr(err, "")
	}
	r := snapshot.Diff(snapshot.DiffInput{Manifest: oldF.Manifest, Load: oldF.Load}, snapshot.DiffInput{Manifest: newF.Manifest, Load: newF.Load})
	if o.format == "json" {
		out := struct {
			MediaType string `json:"media_type"`
			OldDigest string `json:"old_manifest_digest"`
			NewDigest string `json:"new_manifest_digest"`
			*snapshot.DiffResult
		}{diffMediaType, oldF.Digest, newF.Digest, r}
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if err := printDiff(s.out, r); err != nil {
		return err
	}
	switch r.Verdict {
	case snapshot.VerdictDrifted:
		return &exitError{code: exitFailed}
	case snapshot.VerdictIncomplete:
		return &exitError{code: exitIncomplete}
	}
	return nil
}

func printDiff(w io.Writer, r *snapshot.DiffResult) error {
	counts := map[string]int{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	rows := 0
	for _, d := range r.Tools {
		counts[d.Change]++
		if d.Change == snapshot.ChangeUnchanged {
			continue
		}
		if rows == 0 {
			fmt.Fprintln(tw, "TOOL\tCHANGE\tMEMBERS")
		}
		rows++
		detail := strings.Join(d.Members, " ")
		if len(d.Members) == 1 && d.Members[0] == "" {
			detail = "(whole declaration)"
		}
		if d.Truncated {
			detail += " ..."
		}
		if d.Reason != "" {
			detail = strings.TrimSpace(detail + " " + d.Reason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", escapeTerminal(d.Name), d.Change, escapeTerminal(detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	side := func(s snapshot.DiffSide) string {
		if s.Complete {
			return "complete"
		}
		return "incomplete: " + strings.Join(s.IncompleteReasons, ", ")
	}
	_, err := fmt.Fprintf(w, "%s: %d added, %d removed, %d changed, %d unchanged, %d cannot compare (old %s; new %s)\n",
		r.Verdict, counts[snapshot.ChangeAdded], counts[snapshot.ChangeRemoved], counts[snapshot.ChangeChanged],
		counts[snapshot.ChangeUnchanged], counts[snapshot.ChangeCannotCompare], side(r.Old), side(r.New))
	return err
}
