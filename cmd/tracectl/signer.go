package main

import (
	"context"

	"github.com/spf13/cobra"
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
		cmd.AddCommand(newSignerServeCmd(s, runSignerServe))
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

The socket is created with mode 0660 in a directory that must not be
world-writable; a recorder of another uid needs the socket's group (make the
directory setgid to a group both users share) and --allow-uid.

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
