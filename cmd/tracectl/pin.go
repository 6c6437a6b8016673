package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/policy"
)

type pinOptions struct {
	from, out string
	update    bool
	format    string
}

// pinMediaType is the media type of `tracectl pin --format json`.
const pinMediaType = "application/vnd.tracectl.pin.v1+json"

// pinResult is what `tracectl pin --format json` prints on stdout; the
// messages on stderr are the same as with text.
type pinResult struct {
	MediaType string   `json:"media_type"`
	Lockfile  string   `json:"lockfile"`
	Tools     int      `json:"tools"`   // tools pinned
	Updated   bool     `json:"updated"` // --update replaced a lockfile
	Changed   []string `json:"changed"` // --update: what changed against it, one entry per change
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newPinCmd(s, runPin) })
}

func newPinCmd(s streams, runF func(streams, *pinOptions) error) *cobra.Command {
	o := &pinOptions{}
	cmd := &cobra.Command{
		Use:   "pin BUNDLE|SNAPSHOT --out tools.lock [--update] [--format text|json]",
		Short: "Pin a server's tool declarations in a lockfile (for wrap/proxy --pin)",
		Long: `pin writes a lockfile (spec/policy.md, "Lockfile") from a complete snapshot:
the server as it described itself and, per tool, the digest of its whole
declaration under the declaration canonicalization and of each member.

The snapshot is a snapshot file (tracectl snapshot), a bundle (its last
snapshot) or BUNDLE#SNAPSHOT_ID. Its pages are checked against its manifest
first; an incomplete snapshot, a declaration that cannot be canonicalized and
a repeated tool name cannot be pinned.

With wrap --pin (or proxy --pin), a call to a tool the lock does not pin, or
whose declaration in the snapshot the call binds differs from its pin (a rug
pull), is denied by rule "pin", with the drifted members named.

--update replaces an existing lockfile after review, and prints on stderr what
changed against it; without --update the lockfile must not exist.

pin prints nothing on stdout unless --format json, which prints one JSON
object: the lockfile, the number of tools pinned, whether it was updated
and what changed.`,
		Example: "  tracectl snapshot --out tools.json -- npx -y @modelcontextprotocol/server-everything\n" +
			"  tracectl pin tools.json --out tools.lock\n  tracectl wrap --pin tools.lock --bundle run.trace -- npx -y @modelcontextprotocol/server-everything\n" +
			"  tracectl pin --update run.trace --out tools.lock",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.from = args[0]
			return runF(s, o)
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "the lockfile to write")
	cmd.Flags().BoolVar(&o.update, "update", false, "replace an existing lockfile (printing what changed)")
	formatFlag(cmd, &o.format, pinMediaType)
	return cmd
}

func runPin(s streams, o *pinOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	if o.out == "" {
		return usageErr(errors.New("pin needs --out FILE"), "tracectl pin BUNDLE|SNAPSHOT --out tools.lock")
	}
	side, err := readDiffSide(o.from)
	if err != nil {
		return usageErr(err, "")
	}
	lock, err := policy.NewLock(side.in.Manifest, side.in.Load)
	if err != nil {
		return usageErr(err, "")
	}
	data, err := lock.Encode()
	if err != nil {
		return err
	}
	if !o.update {
		if err := writeExclusive(o.out, data); err != nil {
			if errors.Is(err, os.ErrExist) {
				return usageErr(fmt.Errorf("%s already exists", o.out), "review the drift, then pass --update to replace it")
			}
			return err
		}
		fmt.Fprintf(s.err, "tracectl: pinned %d tools in %s\n", len(lock.Tools), escapeTerminal(o.out))
		return o.result(s, len(lock.Tools), nil)
	}
	old, err := readBounded(o.out, policy.MaxLockBytes)
	if err != nil {
		return usageErr(fmt.Errorf("--update: %w", err), "without an existing lockfile, leave out --update")
	}
	prev, err := policy.ParseLock(old)
	if err != nil {
		return usageErr(fmt.Errorf("--update %s: %w", o.out, err), "")
	}
	// Replaced atomically: a crash leaves the old lock or the new one.
	tmp := filepath.Join(filepath.Dir(o.out), "."+filepath.Base(o.out)+".new")
	if err := writeExclusive(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, o.out); err != nil {
		os.Remove(tmp)
		return err
	}
	drift := policy.Drift(prev, lock)
	for _, d := range drift {
		fmt.Fprintln(s.err, "tracectl: "+escapeTerminal(d))
	}
	fmt.Fprintf(s.err, "tracectl: updated %s: %d tools pinned, %d changed\n", escapeTerminal(o.out), len(lock.Tools), len(drift))
	return o.result(s, len(lock.Tools), drift)
}

// result prints pin's JSON object under --format json.
func (o *pinOptions) result(s streams, tools int, drift []string) error {
	if o.format != formatJSON {
		return nil
	}
	return writeJSON(s.out, pinResult{MediaType: pinMediaType, Lockfile: o.out, Tools: tools, Updated: o.update, Changed: append([]string{}, drift...)})
}
