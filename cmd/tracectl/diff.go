package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/internal/snapdiff"
	"github.com/tracectl/tracectl/internal/snapfile"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/verify"
)

// diffMediaType is the versioned media type of `tracectl diff --format json`.
const diffMediaType = "application/vnd.tracectl.snapshot-diff.v1+json"

type diffOptions struct {
	format   string
	values   bool
	maxValue int
	old, new string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newDiffCmd(s, runDiff) })
}

func newDiffCmd(s streams, runF func(streams, *diffOptions) error) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff OLD NEW [--format text|json] [--values]",
		Short: "Compare the tool declarations of two snapshots (declaration drift)",
		Long: `diff compares two snapshot files (from tracectl snapshot) tool by tool: added,
removed, changed (with the members that changed, as JSON Pointers), unchanged,
or cannot_compare (a declaration that cannot be canonicalized, an ambiguous
name, or a tool absent from an incomplete snapshot: never called removed).
Every member of a declaration counts, including _meta and unknown members.
Each file's pages are checked against its manifest first.

OLD and NEW are snapshot files (tracectl snapshot), bundles (their last
snapshot), or BUNDLE#SNAPSHOT_ID (a snapshot a bundle recorded, e.g.
run.trace#s1; tracectl show lists them). --values prints the old and new
value of each changed member (escaped, at most --max-value bytes each).

Exit status: 0 identical, 1 drift found, 3 no drift found but some tool could
not be compared or a snapshot is incomplete, 2 unreadable or inconsistent
input.`,
		Example: "  tracectl diff before.json after.json\n  tracectl diff --format json signed.json today.json\n" +
			"  tracectl diff --values run.trace#s1 run.trace#s2\n  tracectl diff run.trace today.json",
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			o.old, o.new = args[0], args[1]
			return runF(s, o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&o.values, "values", false, "show the old and new value of each changed member")
	cmd.Flags().IntVar(&o.maxValue, "max-value", 512, "with --values: at most this many bytes of each value")
	return cmd
}

func readSnapshotFile(name string) (*snapfile.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, snapfile.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	sf, err := snapfile.Parse(data)
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

// diffSide is one side of a comparison: a snapshot file, a bundle's last
// snapshot, or BUNDLE#SNAPSHOT_ID.
type diffSide struct {
	in     snapdiff.Input
	digest string
}

func readDiffSide(name string) (diffSide, error) {
	bundle, id := name, ""
	if fi, err := os.Stat(name); err != nil || !fi.IsDir() {
		i := strings.LastIndexByte(name, '#')
		if err == nil || i < 0 {
			f, err := readSnapshotFile(name)
			if err != nil {
				return diffSide{}, err
			}
			return diffSide{in: snapdiff.Input{Manifest: f.Manifest, Load: f.Load}, digest: f.Digest}, nil
		}
		bundle, id = name[:i], name[i+1:]
		if fi, err := os.Stat(bundle); err != nil || !fi.IsDir() {
			return diffSide{}, fmt.Errorf("%s: not a snapshot file, and %s is not a bundle directory", name, bundle)
		}
	}
	fsys := verify.DirFS(bundle)
	b, err := inspect.Load(context.Background(), fsys, inspect.Options{})
	if err != nil {
		return diffSide{}, fmt.Errorf("bundle %s: %w", bundle, err)
	}
	if id == "" {
		if len(b.Snapshots) == 0 {
			return diffSide{}, fmt.Errorf("bundle %s recorded no snapshot", bundle)
		}
		id = b.Snapshots[len(b.Snapshots)-1].SnapshotID
	}
	in, err := b.SnapshotInput(fsys, id)
	if err != nil {
		return diffSide{}, fmt.Errorf("bundle %s: %w", bundle, err)
	}
	for _, p := range snapshot.VerifyPages(in.Manifest, in.Load) {
		if p.Kind == snapshot.ProblemMismatch {
			return diffSide{}, fmt.Errorf("%s: pages do not match the manifest: %s", name, p)
		}
	}
	digest := ""
	for _, s := range b.Snapshots {
		if s.SnapshotID == id {
			digest = s.ManifestDigest
		}
	}
	return diffSide{in: in, digest: digest}, nil
}

func runDiff(s streams, o *diffOptions) error {
	if o.format != "text" && o.format != "json" {
		return usageErr(fmt.Errorf("unknown --format %q", o.format), "use --format text or --format json")
	}
	if o.maxValue <= 0 || o.maxValue > 1<<20 {
		return usageErr(errors.New("--max-value must be between 1 and 1048576"), "")
	}
	oldS, err := readDiffSide(o.old)
	if err != nil {
		return usageErr(err, "")
	}
	newS, err := readDiffSide(o.new)
	if err != nil {
		return usageErr(err, "")
	}
	r := snapdiff.Diff(oldS.in, newS.in)
	var values map[string][]snapdiff.MemberValue
	if o.values {
		values = map[string][]snapdiff.MemberValue{}
		for _, d := range r.Tools {
			if v := snapdiff.Values(oldS.in, newS.in, d, o.maxValue); v != nil {
				values[d.Name] = v
			}
		}
	}
	if o.format == "json" {
		out := struct {
			MediaType string `json:"media_type"`
			OldDigest string `json:"old_manifest_digest"`
			NewDigest string `json:"new_manifest_digest"`
			*snapdiff.Result
			Values map[string][]snapdiff.MemberValue `json:"values,omitempty"`
		}{diffMediaType, oldS.digest, newS.digest, r, values}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		if _, err := s.out.Write(append(jsonSafe(b), '\n')); err != nil {
			return err
		}
	} else if err := printDiff(s.out, r); err != nil {
		return err
	} else if err := printValues(s.out, r, values); err != nil {
		return err
	}
	switch r.Verdict {
	case snapdiff.VerdictDrifted:
		return &exitError{code: exitFailed}
	case snapdiff.VerdictIncomplete:
		return &exitError{code: exitIncomplete}
	}
	return nil
}

// printValues prints the old and new value of each changed member.
func printValues(w io.Writer, r *snapdiff.Result, values map[string][]snapdiff.MemberValue) error {
	if values == nil {
		return nil
	}
	var b strings.Builder
	side := func(label string, v *string) {
		if v == nil {
			fmt.Fprintf(&b, "  %s (absent)\n", label)
			return
		}
		fmt.Fprintf(&b, "  %s %s\n", label, escapeTerminal(*v))
	}
	for _, d := range r.Tools {
		for _, v := range values[d.Name] {
			ptr := v.Pointer
			if ptr == "" {
				ptr = "(whole declaration)"
			}
			fmt.Fprintf(&b, "\n%s %s\n", escapeTerminal(d.Name), escapeTerminal(ptr))
			side("old:", v.Old)
			side("new:", v.New)
			if v.Truncated {
				b.WriteString("  (cut at --max-value)\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func printDiff(w io.Writer, r *snapdiff.Result) error {
	counts := map[string]int{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	rows := 0
	for _, d := range r.Tools {
		counts[d.Change]++
		if d.Change == snapdiff.ChangeUnchanged {
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
	side := func(s snapdiff.Side) string {
		if s.Complete {
			return "complete"
		}
		return "incomplete: " + strings.Join(s.IncompleteReasons, ", ")
	}
	_, err := fmt.Fprintf(w, "%s: %d added, %d removed, %d changed, %d unchanged, %d cannot compare (old %s; new %s)\n",
		r.Verdict, counts[snapdiff.ChangeAdded], counts[snapdiff.ChangeRemoved], counts[snapdiff.ChangeChanged],
		counts[snapdiff.ChangeUnchanged], counts[snapdiff.ChangeCannotCompare], side(r.Old), side(r.New))
	return err
}
