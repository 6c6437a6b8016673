package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/snapfile"
	"github.com/tracectl/tracectl/snapshot"
)

type snapshotOptions struct {
	out          string
	maxPages     int64
	protocol     string
	relists      int
	probeTimeout time.Duration
	timeout      time.Duration
	argv         []string
	format       string
}

// snapshotMediaType is the media type of `tracectl snapshot --format json`.
const snapshotMediaType = "application/vnd.tracectl.snapshot-result.v1+json"

// snapshotResult is what `tracectl snapshot --format json` prints; the
// exit status is the same as with text (3 when incomplete).
type snapshotResult struct {
	MediaType         string   `json:"media_type"`
	File              string   `json:"file"`
	Pages             int      `json:"pages"`
	Tools             int      `json:"tools"`
	Complete          bool     `json:"complete"`
	IncompleteReasons []string `json:"incomplete_reasons"`
	ProtocolEra       string   `json:"protocol_era"`
	ProtocolVersion   *string  `json:"protocol_version"` // null when the server named none
	Digest            string   `json:"digest"`           // the manifest digest: the snapshot commitment
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newSnapshotCmd(s, runSnapshot) })
}

func newSnapshotCmd(s streams, runF func(streams, *snapshotOptions) error) *cobra.Command {
	o := &snapshotOptions{}
	cmd := &cobra.Command{
		Use:   "snapshot --out FILE [--max-pages N] [--protocol auto|modern|legacy] [--format text|json] -- SERVER [ARGS...]",
		Short: "Capture a complete paginated tools/list from a stdio MCP server",
		Long: `snapshot starts a stdio MCP server, speaks the protocol itself (raw JSON-RPC
lines, so every byte kept is the server's own), walks every tools/list page,
and writes one self-contained snapshot file: the canonical manifest and the
exact bytes of every page (spec/snapshot.md). The file is created exclusively
with mode 0600.

It prints one line: pages, tools, complete or why not, and the manifest
digest (the snapshot commitment). Exit status 0 when the collection is
complete, 3 when it is not (the file is still written: an incomplete
snapshot is evidence too), 2 on usage errors or when the server cannot be
started or completes no handshake. --format json prints that line as one
JSON object (file, pages, tools, complete, incomplete_reasons, protocol_era,
protocol_version, digest).`,
		Example: "  tracectl snapshot --out tools.snapshot.json -- npx -y @modelcontextprotocol/server-everything\n" +
			"  tracectl snapshot --out s.json --protocol legacy --max-pages 50 -- ./my-server --stdio",
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 0 {
				return usageErr(errors.New("the server command goes after --"), "tracectl snapshot --out FILE -- SERVER [ARGS...]")
			}
			o.argv = args
			return runF(s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "snapshot file to create (must not exist)")
	f.Int64Var(&o.maxPages, "max-pages", snapshot.DefaultMaxPages, "stop, incomplete, after this many pages")
	f.StringVar(&o.protocol, "protocol", snapshot.ProtocolAuto, "auto (probe modern, fall back to legacy), modern or legacy")
	f.IntVar(&o.relists, "relists", 2, "times to start over when the server sends list_changed during collection (0-10)")
	f.DurationVar(&o.probeTimeout, "probe-timeout", snapshot.DefaultProbeTimeout, "auto: how long server/discover may take before falling back to legacy")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on the whole capture after this long")
	formatFlag(cmd, &o.format, snapshotMediaType)
	return cmd
}

func runSnapshot(s streams, o *snapshotOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	if o.out == "" {
		return usageErr(errors.New("--out is required"), "tracectl snapshot --out FILE -- SERVER [ARGS...]")
	}
	if o.maxPages < 1 || o.maxPages > snapshot.CeilingMaxPages {
		return usageErr(fmt.Errorf("--max-pages %d outside 1..%d", o.maxPages, snapshot.CeilingMaxPages), "")
	}
	if o.relists < 0 || o.relists > snapshot.MaxRelistsCeiling {
		return usageErr(fmt.Errorf("--relists %d outside 0..%d", o.relists, snapshot.MaxRelistsCeiling), "")
	}
	switch o.protocol {
	case snapshot.ProtocolAuto, snapshot.ProtocolModern, snapshot.ProtocolLegacy:
	default:
		return usageErr(fmt.Errorf("unknown --protocol %q", o.protocol), "use auto, modern or legacy")
	}
	id, err := snapshot.NewCaptureID(rand.Reader)
	if err != nil {
		return err
	}
	// The output is claimed before the server starts, so a capture is never
	// wasted on a path that cannot be written, and never overwrites one.
	f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return usageErr(fmt.Errorf("create snapshot file: %w", err), "the output must not exist; choose a new path")
	}
	written := false
	defer func() {
		f.Close()
		if !written {
			os.Remove(o.out)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	prog := s.progress()
	snap, err := snapshot.Capture(ctx, o.argv, snapshot.CaptureOptions{
		Progress:      func(pages, tools int) { prog.show("capturing: %d pages, %d tools", pages, tools) },
		CaptureID:     id,
		Protocol:      o.protocol,
		Limits:        snapshot.Limits{MaxPages: o.maxPages},
		ProbeTimeout:  o.probeTimeout,
		MaxRelists:    o.relists,
		ClientName:    "tracectl",
		ClientVersion: version(),
	})
	prog.done()
	if err != nil {
		return usageErr(err, "check the server command; try --protocol legacy or modern to skip the probe")
	}
	data, err := snapfile.Encode(snap)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write snapshot file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write snapshot file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write snapshot file: %w", err)
	}
	written = true

	m := snap.Manifest
	state := "complete"
	if !m.Complete {
		state = "incomplete (" + joinReasons(m.IncompleteReasons) + ")"
	}
	if o.format == formatJSON {
		reasons := append([]string{}, m.IncompleteReasons...)
		if err := writeJSON(s.out, snapshotResult{MediaType: snapshotMediaType, File: o.out, Pages: len(m.Pages), Tools: len(m.Tools),
			Complete: m.Complete, IncompleteReasons: reasons, ProtocolEra: string(m.Protocol.Era), ProtocolVersion: m.Protocol.Version, Digest: snap.Digest}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(s.out, "snapshot: %d pages, %d tools, %s, %s %s, %s\n",
			len(m.Pages), len(m.Tools), state, m.Protocol.Era, escapeTerminal(deref(m.Protocol.Version)), snap.Digest)
	}
	if !m.Complete {
		hint := "the file holds what was observed; an incomplete snapshot never counts as complete"
		if m.Collection.Stop != nil && m.Collection.Stop.Detail != "" {
			hint = m.Collection.Stop.Detail
		}
		return &exitError{code: exitIncomplete, err: fmt.Errorf("snapshot is incomplete: %s", joinReasons(m.IncompleteReasons)), hint: hint}
	}
	return nil
}

func joinReasons(r []string) string {
	out := ""
	for i, s := range r {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}
