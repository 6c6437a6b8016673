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
	anchor  anchorOptions // anchor.go: the record is anchored as wrap's seal anchors it
	format  string
	now     func() time.Time // the clock, an input like everything else
}

// sealMediaType is the media type of `tracectl seal --format json`.
const sealMediaType = "application/vnd.tracectl.seal.v1+json"

// sealResult is what `tracectl seal --format json` prints. Counts and
// transcript_root are named as in verify's report, so the two compare.
type sealResult struct {
	MediaType      string        `json:"media_type"`
	Bundle         string        `json:"bundle"`
	TranscriptRoot string        `json:"transcript_root"`
	Counts         sealCounts    `json:"counts"`
	Signed         bool          `json:"signed"`
	Recovery       *sealRecovery `json:"recovery,omitempty"` // --recover only
}

type sealCounts struct {
	Lines             int64 `json:"lines"`
	Attempts          int64 `json:"attempts"`
	Responses         int64 `json:"responses"`
	TransportFailures int64 `json:"transport_failures"`
	Unknown           int64 `json:"unknown"`
	Denied            int64 `json:"denied"`
}

type sealRecovery struct {
	Lines            int64      `json:"lines"`
	AlreadySealed    bool       `json:"already_sealed"`
	Quarantined      []sealTorn `json:"quarantined"`
	PackTornBytes    int64      `json:"pack_torn_bytes"`
	TempBlobsRemoved int        `json:"temp_blobs_removed"`
	PayloadsMigrated int        `json:"payloads_migrated"`
	ResolvedUnknown  []string   `json:"resolved_unknown"`
}

type sealTorn struct {
	File   string `json:"file"`
	Digest string `json:"digest"`
	Length int64  `json:"length"`
}

func sealRecoveryOf(r *producer.RecoveryReport) *sealRecovery {
	out := &sealRecovery{Lines: r.Lines, AlreadySealed: r.AlreadySealed, Quarantined: []sealTorn{},
		PackTornBytes: r.PackTorn, TempBlobsRemoved: r.TempBlobs, PayloadsMigrated: r.Migrated, ResolvedUnknown: []string{}}
	for _, t := range r.Torn {
		out.Quarantined = append(out.Quarantined, sealTorn{File: t.File, Digest: t.Digest, Length: t.Length})
	}
	out.ResolvedUnknown = append(out.ResolvedUnknown, r.Resolved...)
	return out
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newSealCmd(s, runSeal) })
}

func newSealCmd(s streams, runF func(context.Context, streams, *sealOptions) error) *cobra.Command {
	o := &sealOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "seal --bundle DIR [--key KEY] [--recover] [--anchor URL --anchor-key FILE] [--format text|json]",
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

--format json prints one JSON object instead of the summary lines: the
bundle, transcript_root, the counts (named as in verify's report), whether
it was signed and, with --recover, what recovery did.

Exit status: 0 sealed, 2 usage error or a bundle that cannot be sealed.`,
		Example: "  tracectl seal --bundle run.trace --key key.pem\n  tracectl seal --bundle run.trace --key key.pem --recover\n  tracectl seal --bundle run.trace --key key.pem --format json\n" +
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
	formatFlag(cmd, &o.format, sealMediaType)
	o.record.flags(cmd)
	o.keys.flags(cmd)
	o.keys.signerFlag(cmd)
	o.anchor.flags(cmd)
	return cmd
}

func runSeal(ctx context.Context, s streams, o *sealOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
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
		if err := o.anchor.checkSigner(signer); err != nil {
			return err
		}
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
	rep := rec.Recovery()
	if rep != nil && o.format == formatText {
		fmt.Fprintln(s.out, escapeTerminal(recoverySummary(rep)))
	}
	var sa *sessionAnchor
	if o.anchor.set() {
		if sa, err = newSessionAnchor(rec, o.anchor, ac, signer, o.record, o.now, s.err); err != nil {
			rec.Close()
			return err
		}
		rs = sa
	}
	sealed, err := rec.Seal(ctx, rs)
	sa.close() // the record's receipt is written (or its failure reported) before anything is printed
	if err != nil {
		if rep != nil && o.format == formatJSON {
			// No JSON result to carry it: what recovery did still gets said.
			fmt.Fprintln(s.err, "tracectl: "+escapeTerminal(recoverySummary(rep)))
		}
		hint := ""
		if sealed != nil {
			hint = "the transcript is sealed; sign it with 'tracectl seal --bundle " + o.bundle + " --key KEY'"
		}
		return usageErr(err, hint)
	}
	c := sealed.Seal
	if o.format == formatJSON {
		res := sealResult{MediaType: sealMediaType, Bundle: o.bundle, TranscriptRoot: sealed.Root, Signed: sealed.Signed,
			Counts: sealCounts{Lines: sealed.Lines, Attempts: c.Attempts, Responses: c.Responses,
				TransportFailures: c.TransportFailures, Unknown: c.Unknown, Denied: c.Denied}}
		if rep != nil {
			res.Recovery = sealRecoveryOf(rep)
		}
		return writeJSON(s.out, res)
	}
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
