package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

type sealOptions struct {
	bundle  string
	key     string
	recover bool
	record  recordIdentity
	keys    keyOptions
	anchor  anchorOptions    // anchor.go: the record is anchored as wrap's seal anchors it
	now     func() time.Time // the clock, an input like everything else
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newSealCmd(s, runSeal) })
}

func newSealCmd(s streams, runF func(context.Context, streams, *sealOptions) error) *cobra.Command {
	o := &sealOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "seal --bundle DIR [--key KEY] [--recover] [--anchor URL --anchor-key FILE]",
		Short: "Seal (and sign) a bundle whose recording stopped without sealing",
		Long: `seal finishes a bundle that was closed without sealing, or signs one that was
sealed without a key. Attempts still in flight get an unknown resolution
(sealed_in_flight), the seal line is appended, and with --key the signed Trust
Record (record.json) is written, committing to the transcript.

After a crash use --recover: a torn final line is kept byte for byte under
quarantine/ and named by a recovery event, attempts left in flight are resolved
unknown (producer_crashed), and the bundle is sealed. History is only appended
to, never rewritten; a journal corrupt before its last line is refused.

With --anchor (a session recorded with wrap or proxy --anchor whose recording
stopped before its seal), the signed record is anchored in the log as wrap's
seal anchors it: anchors/record.json, record.json naming its log entry, and
the entry's receipt, so verify --log-key finds every statement anchored.

Exit status: 0 sealed, 2 usage error or a bundle that cannot be sealed.`,
		Example: "  tracectl seal --bundle run.trace --key key.pem\n  tracectl seal --bundle run.trace --key key.pem --recover\n" +
			"  tracectl seal --bundle run.trace --key key.pem --recover --anchor http://127.0.0.1:7800 --anchor-key log/log.pub",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bundle, "bundle", "", "the bundle directory (required)")
	f.StringVar(&o.key, "key", "", "signing key: a PEM file or a KMS reference (<provider>://...); without it the bundle is sealed unsigned")
	f.BoolVar(&o.recover, "recover", false, "recover after a crash: quarantine a torn final line and resolve in-flight attempts as producer_crashed")
	o.record.flags(cmd)
	o.keys.flags(cmd)
	o.keys.signerFlag(cmd)
	o.anchor.flags(cmd)
	return cmd
}

func runSeal(ctx context.Context, s streams, o *sealOptions) error {
	if o.bundle == "" {
		return usageErr(errors.New("seal needs --bundle DIR"), "tracectl seal --bundle DIR [--key KEY] [--recover]")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	signs, err := o.keys.signs(o.key)
	if err != nil {
		return err
	}
	if err := o.anchor.validate(signs); err != nil {
		return err
	}
	// The key and the log's key first: nothing is appended to a bundle
	// that cannot be signed or anchored.
	var rs producer.RecordSigner
	var signer sign.Signer
	if signs {
		if signer, err = loadSigningKey(ctx, o.key, o.keys); err != nil {
			return err
		}
		rs = trustRecordSigner{signer: signer, identity: o.record, now: o.now}
	}
	var ac *submit.Client
	if o.anchor.set() {
		var err error
		if ac, err = o.anchor.client(); err != nil {
			return err
		}
	}
	open := producer.Reopen
	if o.recover {
		open = producer.Recover
	}
	rec, err := open(o.bundle, producer.Options{Clock: o.now, FS: producer.OS})
	if err != nil {
		return usageErr(err, sealHint(err, o))
	}
	if rep := rec.Recovery(); rep != nil {
		fmt.Fprintln(s.out, escapeTerminal(recoverySummary(rep)))
	}
	var sa *sessionAnchor
	if ac != nil {
		if sa, err = newSessionAnchor(rec, o.anchor, ac, signer, o.record, o.now, s.err); err != nil {
			rec.Close()
			return err
		}
		rs = sa
	}
	sealed, err := rec.Seal(ctx, rs)
	sa.close() // the record's receipt is written (or its failure reported) before anything is printed
	if err != nil {
		hint := ""
		if sealed != nil {
			hint = "the transcript is sealed; sign it with 'tracectl seal --bundle " + o.bundle + " --key KEY'"
		}
		return usageErr(err, hint)
	}
	c := sealed.Seal
	signed := "unsigned (sign it with 'tracectl seal --bundle " + o.bundle + " --key KEY')"
	if sealed.Signed {
		signed = "signed"
	}
	fmt.Fprintln(s.out, escapeTerminal(fmt.Sprintf("sealed %s: %d attempts: %d responses, %d transport failures, %d unknown%s; %d lines, root %s; %s",
		o.bundle, c.Attempts, c.Responses, c.TransportFailures, c.Unknown, deniedText(c.Denied), sealed.Lines, sealed.Root, signed)))
	return nil
}

func recoverySummary(r *producer.RecoveryReport) string {
	if r.AlreadySealed {
		return fmt.Sprintf("recovered: %d valid lines, already sealed: nothing appended", r.Lines)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "recovered: %d valid lines", r.Lines)
	for _, t := range r.Torn {
		fmt.Fprintf(&b, "; torn line quarantined: %s (%d bytes)", t.File, t.Length)
	}
	if r.PackTorn > 0 {
		fmt.Fprintf(&b, "; a torn final payload entry cut (%d bytes; its line was never written)", r.PackTorn)
	}
	if r.TempBlobs > 0 {
		fmt.Fprintf(&b, "; %d unreferenced temporary blobs removed", r.TempBlobs)
	}
	if r.Migrated > 0 {
		fmt.Fprintf(&b, "; %d spooled payloads moved into %s", r.Migrated, transcript.PackFile)
	}
	fmt.Fprintf(&b, "; %d attempts resolved unknown (producer_crashed)", len(r.Resolved))
	if len(r.Resolved) > 0 {
		b.WriteString(": " + strings.Join(r.Resolved, " "))
	}
	return b.String()
}

func sealHint(err error, o *sealOptions) string {
	switch {
	case errors.Is(err, producer.ErrNeedsRecovery):
		return "the recording crashed mid-write: run 'tracectl seal --recover --bundle " + o.bundle + "'"
	case errors.Is(err, producer.ErrSealed):
		return "verify it with 'tracectl verify " + o.bundle + "'"
	case errors.Is(err, producer.ErrLocked):
		return "another tracectl is still recording into this bundle"
	case errors.Is(err, producer.ErrCorrupt):
		return "the journal is invalid before its last line; recovery never guesses past corruption"
	case errors.Is(err, fs.ErrNotExist):
		return "--bundle takes a bundle directory written by tracectl wrap or the producer package"
	}
	return ""
}
