package main

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/transparency-dev/tessera/client"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/audit"
	"github.com/tracectl/tracectl/internal/tlog"
	"github.com/tracectl/tracectl/sign"
)

type auditOptions struct {
	log, logKey, state string
	trusted            []string
	bundles            []string
	format             string
}

// auditMediaType is the media type of `tracectl audit --format json`.
const auditMediaType = "application/vnd.tracectl.audit.v1+json"

// auditResult is what `tracectl audit --format json` prints; the exit
// status is the same as with text.
type auditResult struct {
	MediaType string          `json:"media_type"`
	Log       string          `json:"log"`     // the log's origin, as its checkpoint names it
	Size      int             `json:"size"`    // entries in the log
	Trusted   int             `json:"trusted"` // statements signed by a --trusted-key
	Others    int             `json:"others"`  // entries signed by other keys
	Sessions  int             `json:"sessions"`
	Bundles   int             `json:"bundles"`
	Findings  []audit.Finding `json:"findings"`
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newAuditCmd(s, runAudit) })
}

func newAuditCmd(s streams, runF func(context.Context, streams, *auditOptions) error) *cobra.Command {
	o := &auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit --log URL|DIR --log-key FILE --trusted-key PUB... [--format text|json] BUNDLE-DIR...",
		Short: "Find sessions missing or rewritten across a fleet, against a transparency log",
		Long: `audit reads a transparency log (its URL, or a directory mirroring its static
tlog-tiles files, offline), checks its checkpoint under --log-key and every
entry against it, keeps the statements signed by the trusted keys, groups them
by session (tool_transcript.transcript_uri) and compares each with its bundle.
A BUNDLE-DIR is a bundle or a directory of bundles.

Findings: missing (the log holds a session with no bundle), rewritten (the log
holds a statement of a session its bundle does not), truncated (that statement
covers more calls than the bundle's record), non_increasing (a session's
statements go backward), unlogged (a bundle with receipts the log does not
hold), log_forked (the log is not consistent with the checkpoint the last audit
saw, kept in --state, or its entries do not make its root).

--format json prints one JSON object: the log's origin, its size, the
statements by trusted keys and others, sessions, bundles, and the findings
(code, subject, detail).

Exit status: 0 nothing found, 1 a finding, 2 usage error or unreadable input.`,
		Example: "  tracectl audit --log http://127.0.0.1:7480 --log-key log.pub --trusted-key key.pem.pub bundles/",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.bundles = args
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.log, "log", "", "the log: its URL, or a directory holding its checkpoint and tiles (required)")
	f.StringVar(&o.logKey, "log-key", "", "the log's verifier key file (log.pub) (required)")
	f.StringArrayVar(&o.trusted, "trusted-key", nil, "a producer's public key (repeatable; required)")
	f.StringVar(&o.state, "state", "", "where the last checkpoint seen per log is kept (default: $XDG_STATE_HOME/tracectl/audit.json)")
	formatFlag(cmd, &o.format, auditMediaType)
	return cmd
}

func runAudit(ctx context.Context, s streams, o *auditOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	if o.log == "" || o.logKey == "" || len(o.trusted) == 0 {
		return usageErr(errors.New("audit needs --log, --log-key and at least one --trusted-key"), "tracectl audit --log URL|DIR --log-key FILE --trusted-key PUB BUNDLE-DIR...")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	kb, err := readBounded(o.logKey, 4<<10)
	if err != nil {
		return usageErr(fmt.Errorf("--log-key: %w", err), "")
	}
	keys, err := anchor.ParseKeys(string(kb), nil, 0)
	if err != nil {
		return usageErr(fmt.Errorf("--log-key: %w", err), "")
	}
	var trusted []crypto.PublicKey
	for _, p := range o.trusted {
		k, err := sign.LoadPublicKeyFile(p)
		if err != nil {
			return usageErr(fmt.Errorf("--trusted-key: %w", err), "")
		}
		trusted = append(trusted, k)
	}
	var f audit.Fetcher
	if u, err := url.Parse(o.log); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		if f, err = client.NewHTTPFetcher(u, nil); err != nil {
			return usageErr(err, "")
		}
	} else {
		root := o.log
		if _, err := os.Stat(filepath.Join(root, tlog.StaticDir, "checkpoint")); err == nil {
			root = filepath.Join(root, tlog.StaticDir) // the log serve directory itself
		}
		f = client.FileFetcher{Root: root}
	}
	bundles, err := listBundles(o.bundles)
	if err != nil {
		return usageErr(err, "")
	}
	statePath := o.state
	if statePath == "" {
		dir := os.Getenv("XDG_STATE_HOME")
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return usageErr(errors.New("no --state and no home directory"), "")
			}
			dir = filepath.Join(home, ".local", "state")
		}
		statePath = filepath.Join(dir, "tracectl", "audit.json")
	}
	states, err := readAuditState(statePath)
	if err != nil {
		return usageErr(fmt.Errorf("--state %s: %w", statePath, err), "")
	}
	origin := keys.Log.Name()
	res, err := audit.Run(ctx, audit.Options{Log: f, Keys: keys, Trusted: trusted, Bundles: bundles, Last: states[origin]})
	if err != nil {
		return ioErr(fmt.Errorf("audit %s: %w", o.log, err), "")
	}
	if o.format == formatJSON {
		findings := res.Findings
		if findings == nil {
			findings = []audit.Finding{}
		}
		if err := writeJSON(s.out, auditResult{MediaType: auditMediaType, Log: origin, Size: res.Size, Trusted: res.Entries,
			Others: res.Foreign, Sessions: res.Sessions, Bundles: res.Bundles, Findings: findings}); err != nil {
			return err
		}
	} else {
		for _, fd := range res.Findings {
			fmt.Fprintf(s.out, "%s %s: %s\n", fd.Code, escapeTerminal(fd.Subject), escapeTerminal(fd.Detail))
		}
		fmt.Fprintf(s.out, "audit: log %s, %d entries (%d statements by trusted keys, %d others), %d sessions, %d bundles: %d findings\n",
			escapeTerminal(origin), res.Size, res.Entries, res.Foreign, res.Sessions, res.Bundles, len(res.Findings))
	}
	if res.State != nil {
		states[origin] = res.State
		if err := writeAuditState(statePath, states); err != nil {
			return ioErr(fmt.Errorf("--state %s: %w", statePath, err), "")
		}
	}
	if len(res.Findings) > 0 {
		codes := make([]string, 0, len(res.Findings))
		for _, fd := range res.Findings {
			codes = append(codes, fd.Code)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("audit found: %s", strings.Join(codes, ", "))}
	}
	return nil
}

// listBundles expands each argument: a bundle, or a directory of bundles.
func listBundles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if _, err := os.Stat(filepath.Join(a, "transcript.jsonl")); err == nil {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(a, e.Name())
			if _, err := os.Stat(filepath.Join(p, "transcript.jsonl")); e.IsDir() && err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

const maxAuditState = 1 << 20

func readAuditState(p string) (map[string]*audit.State, error) {
	m := map[string]*audit.State{}
	b, err := readBounded(p, maxAuditState)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// writeAuditState replaces the state file atomically (0600).
func writeAuditState(p string, m map[string]*audit.State) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".audit-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}
