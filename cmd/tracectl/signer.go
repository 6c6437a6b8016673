package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	signersvc "github.com/tracectl/tracectl/internal/signer"
)

// signerServeOptions are tracectl signer serve's (spec/signer.md).
type signerServeOptions struct {
	key, socket, journal, rate string
	allowUIDs                  []uint
	keys                       keyOptions
	// ready, when set, is called once the socket is listening (tests).
	ready func(path string)
}

// defaultSignerRate: a recorder signs a checkpoint now and then and its
// record once or twice; a hundred a second is far above any honest use.
const defaultSignerRate = "100/s"

func init() {
	commands = append(commands, func(s streams) *cobra.Command {
		cmd := &cobra.Command{Use: "signer", Short: "Hold the signing key in its own process (tracectl signer serve; linux)", Args: cobra.NoArgs}
		cmd.AddCommand(newSignerServeCmd(s, runSignerServe), newSignerJournalCmd(s, runSignerJournal))
		return cmd
	})
}

func newSignerServeCmd(s streams, runF func(context.Context, streams, *signerServeOptions) error) *cobra.Command {
	o := &signerServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve --key KEY --socket PATH [--allow-uid UID ...] [--rate N/s] [--journal FILE]",
		Short: "Sign checkpoints and records for recorders over a Unix socket (linux)",
		Long: `signer serve holds the signing key so the recorders do not: run it as another
user, and give wrap, proxy and seal --signer unix:PATH instead of --key.

It signs only what a recorder signs: the signature preimage of a TRACE v0.2
Trust Record (a checkpoint or the sealed record) naming its key in cnf.jwk.
Anything else is refused (not_a_statement). A peer is served only if its uid
(SO_PEERCRED) is the server's own or an --allow-uid (peer_refused otherwise).
Signatures are rate limited (--rate, a token bucket: rate_limited) and, with
--journal, each is appended to a hash-chained journal, fsynced, before it is
returned.

The socket is created with mode 0660 in a directory only its owner may
write (or a sticky one); a recorder of another uid needs the socket's group
(a directory of mode 0750, or setgid 2750, of a group both users share) and
--allow-uid.

Exit status: 0 after SIGINT or SIGTERM, 2 usage error, 5 the socket or the
journal cannot be used.`,
		Example: "  tracectl signer serve --key /etc/tracectl/key.pem --socket /run/tracectl/signer.sock --allow-uid 1001 --journal /var/lib/tracectl/signer.journal\n" +
			"  tracectl wrap --signer unix:/run/tracectl/signer.sock -- ./server",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.key, "key", "", "the signing key: a PEM file or a KMS reference (required)")
	f.StringVar(&o.socket, "socket", "", "the Unix socket to create and serve (required)")
	f.UintSliceVar(&o.allowUIDs, "allow-uid", nil, "serve peers of this uid too, besides the server's own (repeatable)")
	f.StringVar(&o.rate, "rate", defaultSignerRate, "at most N signatures per second (N/s), minute (N/m) or hour (N/h), in bursts of at most N")
	f.StringVar(&o.journal, "journal", "", "append a hash-chained line per signature to FILE (created 0600; an existing one is checked and continued)")
	o.keys.flags(cmd)
	return cmd
}

// signerJournalMediaType names signer journal's JSON output.
const signerJournalMediaType = "application/vnd.tracectl.signer-journal.v1+json"

type signerJournalOptions struct {
	file, format string
}

func newSignerJournalCmd(s streams, runF func(streams, *signerJournalOptions) error) *cobra.Command {
	o := &signerJournalOptions{}
	cmd := &cobra.Command{
		Use:   "journal FILE [--format text|json]",
		Short: "Check a signer journal's hash chain and print its length and last hash",
		Long: `signer journal reads the journal signer serve --journal keeps and checks every
line: its members, seq counting from 1, and prev the SHA-256 of the line
before. A line edited, removed, reordered or inserted without recomputing
the chain breaks it at or after it, and the first bad line is named.

The chain is unkeyed: it cannot show a rewrite that recomputes it, or lines
cut from the end. Keep the count and the last hash this prints somewhere the
signer's host cannot rewrite (or anchor them), and compare.

Exit status: 0 the chain holds, 1 it is broken, 2 usage error or a file that
cannot be read.`,
		Example: "  tracectl signer journal /var/lib/tracectl/signer.journal",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.file = args[0]
			return runF(s, o)
		},
	}
	formatFlag(cmd, &o.format, signerJournalMediaType)
	return cmd
}

func runSignerJournal(s streams, o *signerJournalOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	f, err := os.Open(o.file)
	if err != nil {
		return usageErr(fmt.Errorf("signer journal: %w", err), "")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return usageErr(fmt.Errorf("signer journal: %s is not a regular file", o.file), "")
	}
	st, cerr := signersvc.CheckJournal(f)
	var je *signersvc.JournalError
	if cerr != nil && !errors.As(cerr, &je) {
		return usageErr(fmt.Errorf("signer journal: %w", cerr), "")
	}
	if o.format == formatJSON {
		out := struct {
			MediaType string `json:"media_type"`
			File      string `json:"file"`
			Intact    bool   `json:"intact"`
			Lines     int64  `json:"lines"`
			Last      string `json:"last_sha256"`
			BadLine   int64  `json:"bad_line,omitempty"`
			Reason    string `json:"reason,omitempty"`
		}{MediaType: signerJournalMediaType, File: o.file, Intact: je == nil, Lines: st.Lines, Last: st.Last}
		if je != nil {
			out.BadLine, out.Reason = je.Line, je.Reason
		}
		if err := writeJSON(s.out, out); err != nil {
			return err
		}
	} else if je == nil {
		fmt.Fprintln(s.out, escapeTerminal(fmt.Sprintf("%s: %d signatures, chain intact; last line sha256 %s", o.file, st.Lines, st.Last)))
	}
	if je != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("signer journal %s: %w", escapeTerminal(o.file), cerr)}
	}
	return nil
}
