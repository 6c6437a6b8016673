package main

import (
	"cmp"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

type verifyOptions struct {
	trustedKey       string
	at               string
	maxAge           string
	allowEmbeddedKey bool
	format           string
	proof            string
	acceptProfiles   []string
	acceptWithheld   bool
	maxTranscriptB   int64
	maxTranscriptL   int64
	maxPayload       int64
	maxPackEntries   int64
	input            string
	inputs           []string // more than one input, or --recursive: verify many (verifymany.go)
	recursive        []string
	failOnWarning    bool             // --fail-on warning
	now              func() time.Time // the clock, an input like everything else
	// --log-key, --witness-key, --witness-threshold: check anchors/
	// (spec/anchoring.md)
	logKey           string
	witnessKeys      []string
	witnessThreshold int
	// --rekor-root: check anchors/rekor/ against a sigstore trusted root
	rekorRoot string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newVerifyCmd(s, runVerify) })
}

func newVerifyCmd(s streams, runF func(context.Context, streams, *verifyOptions) error) *cobra.Command {
	o := &verifyOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "verify [--trusted-key PUB] [--at TIME] [--max-age DUR] [--allow-embedded-key] [--format text|json] [--proof PROOF] BUNDLE|RECORD.json...",
		Short: "Verify a bundle, a Trust Record, or an inclusion proof offline",
		Long: `verify checks evidence offline and prints a report: the verdict, then every
finding with its stable code (spec/verification.md), grouped by check.

Given a bundle directory it checks the Trust Record (profile, shape,
canonicalization, signature, trust, freshness), recomputes the transcript
commitment, and checks every line, attempt identity, retry link, outcome,
snapshot and payload. Given a record file it checks the record alone; with
--proof it checks one attempt's lines against the signed record without the
rest of the transcript.

Trust needs a key: --trusted-key names the signer's public key (PEM or JWK).
--allow-embedded-key checks the signature with the record's own key instead,
which proves internal consistency only (the verdict is at best incomplete).

Freshness: a record older than --max-age (default 24h; 7d, 86400 and 0 for
no limit are accepted) is record_stale, which means old, not tampered. To
check an archived record as of when it was issued, pass --at issued.

Only regular files inside the bundle are read: a symbolic link, FIFO or
device is refused (file_refused), and the transcript is read up to
--max-transcript-bytes and --max-transcript-lines (limit_exceeded beyond).
Evidence text is escaped in the text report and \u-escaped in JSON, so a
signed string cannot forge report lines.

Failed means the evidence is false or broken. What sound evidence shows
about the agent or the server (a call to an undeclared tool, a declaration
that changed mid-session, a server that answered a cancelled call) is a
warning: the verdict line says "verified (bundle, 1 warning)".

Exit status: 0 verified (warnings or not), 1 failed, 3 incomplete
(evidence unavailable or unsupported, or trust on the embedded key), 4
verified with warnings under --fail-on warning, 2 usage or unreadable input
(a missing record, one that is not a regular file or over 64 KiB).

Many at once: given several inputs, or --recursive DIR (every bundle under
DIR: a directory holding record.json or transcript.jsonl), verify checks
them in parallel (at most one per CPU) and prints one line per input, in the
order given, and a total; --format json prints one report per line, each
with its "input". The exit status is the worst: failed (1), then unreadable
(2), then incomplete (3).`,
		Example: "  tracectl verify --trusted-key key.pub run.trace\n" +
			"  tracectl verify --trusted-key key.pub --at issued archive/run.trace\n" +
			"  tracectl verify --trusted-key key.pub --at 2026-07-01T12:00:00Z --format json run.trace\n" +
			"  tracectl verify --trusted-key key.pub --proof a7.proof run.trace/record.json\n" +
			"  tracectl verify --trusted-key key.pub a.trace b.trace c.trace\n" +
			"  tracectl verify --trusted-key key.pub --recursive /var/log/agent/bundles",
		Args: func(c *cobra.Command, args []string) error {
			if len(o.recursive) == 0 {
				return cobra.MinimumNArgs(1)(c, args)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 && len(o.recursive) == 0 {
				o.input = args[0]
				return runF(c.Context(), s, o)
			}
			o.inputs = args
			return runVerifyMany(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trustedKey, "trusted-key", "", "the signer's public key you trust (PKIX PEM or JWK)")
	f.StringVar(&o.at, "at", "", "reference time for freshness: RFC 3339, Unix seconds, or issued (the record's own iat) (default: now)")
	f.StringVar(&o.maxAge, "max-age", "24h", "maximum age of the record at the reference time: days (7d), seconds, a duration (24h); 0 disables the limit")
	f.BoolVar(&o.allowEmbeddedKey, "allow-embedded-key", false, "without --trusted-key, check the signature with cnf.jwk (internal consistency only)")
	f.StringVar(&o.format, "format", "text", "report format: text or json ("+verify.MediaType+")")
	f.StringVar(&o.proof, "proof", "", "an inclusion proof (tracectl prove) to check against RECORD.json")
	f.BoolVar(&o.acceptWithheld, "accept-withheld", false, "accept payloads the producer's declared policy withheld (digest-only retention, over the frame limit): their digests are verified, not their bytes; the verdict can then be verified")
	f.StringArrayVar(&o.acceptProfiles, "accept-profile", nil, "an eat_profile to accept (repeatable; default "+sign.Profile+" alone; this verifier implements that shape only)")
	f.Int64Var(&o.maxTranscriptB, "max-transcript-bytes", verify.DefaultMaxTranscriptBytes, "read at most this many transcript bytes (beyond: limit_exceeded, incomplete)")
	f.Int64Var(&o.maxPayload, "max-payload-bytes", verify.DefaultMaxPayloadBytes, "read no payload committed as longer than this (beyond: limit_exceeded, incomplete)")
	f.Int64Var(&o.maxPackEntries, "max-pack-entries", 0, "index at most this many payload pack entries, 16 bytes of memory each (0: "+strconv.Itoa(verify.DefaultMaxPackEntries)+"; beyond: limit_exceeded, incomplete)")
	f.StringVar(&o.logKey, "log-key", "", "the transparency log's verifier key file (log.pub): check anchors/ and require a receipt for every signed statement")
	f.StringArrayVar(&o.witnessKeys, "witness-key", nil, "a witness's verifier key file (repeatable; needs --log-key)")
	f.IntVar(&o.witnessThreshold, "witness-threshold", 0, "how many --witness-key witnesses must have cosigned each receipt's checkpoint")
	f.StringVar(&o.rekorRoot, "rekor-root", "", "a sigstore trusted root (JSON) file: check the sealed record's Rekor v2 entry (anchors/rekor/) offline and require one")
	f.StringArrayVar(&o.recursive, "recursive", nil, "verify every bundle under this directory (repeatable)")
	f.Var(&failOnFlag{&o.failOnWarning}, "fail-on", "also fail the exit status on this: warning (a verified bundle with warnings exits 4)")
	f.Int64Var(&o.maxTranscriptL, "max-transcript-lines", verify.DefaultMaxTranscriptLines, "read at most this many transcript lines (beyond: limit_exceeded, incomplete)")
	return cmd
}

// options turns the flags into verify.Options.
func (o *verifyOptions) options() (verify.Options, error) {
	var vo verify.Options
	if o.format != "text" && o.format != "json" {
		return vo, usageErr(fmt.Errorf("unknown format %q", o.format), "use --format text or --format json")
	}
	if o.at == "issued" {
		vo.AtIssued = true
	} else {
		at, err := parseAt(o.at, o.now)
		if err != nil {
			return vo, usageErr(err, "give --at as RFC 3339 (2026-07-01T12:00:00Z), Unix seconds, or issued (the record's own iat)")
		}
		vo.At = at
	}
	d, err := parseMaxAge(o.maxAge)
	switch {
	case err != nil:
		return vo, usageErr(fmt.Errorf("--max-age: %w", err), "give days (7d), seconds (86400), a duration (24h, 90m), or 0 for no limit")
	case d < 0:
		return vo, usageErr(errors.New("--max-age must not be negative"), "")
	case d == 0:
		vo.AllowAnyAge = true
	default:
		vo.MaxAge = d
	}
	if vo.AtIssued && o.maxAge != "24h" {
		return vo, usageErr(errors.New("--at issued judges no age: --max-age does not apply"), "")
	}
	if o.maxTranscriptB <= 0 || o.maxTranscriptL <= 0 || o.maxPayload <= 0 || o.maxPackEntries < 0 || o.maxTranscriptL > 1<<32-1 {
		return vo, usageErr(errors.New("--max-transcript-bytes, --max-transcript-lines (at most 4294967295), --max-payload-bytes must be positive, --max-pack-entries not negative"), "")
	}
	if o.acceptProfiles != nil {
		vo.AcceptProfiles = o.acceptProfiles
	}
	vo.Limits = verify.Limits{MaxTranscriptBytes: o.maxTranscriptB, MaxTranscriptLines: o.maxTranscriptL, MaxPayloadBytes: o.maxPayload, MaxPackEntries: o.maxPackEntries}
	vo.AllowEmbeddedKey = o.allowEmbeddedKey
	vo.AcceptWithheld = o.acceptWithheld
	if o.trustedKey != "" {
		var pub crypto.PublicKey
		pub, err = sign.LoadPublicKeyFile(o.trustedKey)
		if err != nil {
			return vo, usageErr(err, "--trusted-key takes the .pub file tracectl keygen wrote, or a public JWK")
		}
		vo.TrustedKey = pub
	}
	if o.logKey != "" {
		b, err := readBounded(o.logKey, 4<<10)
		if err != nil {
			return vo, usageErr(fmt.Errorf("--log-key: %w", err), "")
		}
		vo.LogKey = string(b)
	}
	for _, w := range o.witnessKeys {
		b, err := readBounded(w, 4<<10)
		if err != nil {
			return vo, usageErr(fmt.Errorf("--witness-key: %w", err), "")
		}
		vo.WitnessKeys = append(vo.WitnessKeys, string(b))
	}
	vo.WitnessThreshold = o.witnessThreshold
	if o.rekorRoot != "" {
		b, err := readBounded(o.rekorRoot, rekor.MaxRootBytes)
		if err != nil {
			return vo, usageErr(fmt.Errorf("--rekor-root: %w", err), "")
		}
		vo.RekorRoot = b
	}
	return vo, nil
}

// parseMaxAge reads --max-age: whole days ("7d"), bare seconds ("86400"),
// a Go duration ("24h", "90m"), or "0" (no limit).
func parseMaxAge(s string) (time.Duration, error) {
	const maxDays = 1 << 20 // about 2,870 years: far beyond any record, far below overflow
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > maxDays {
			return 0, fmt.Errorf("%q: want whole days such as 7d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxDays*86400 {
			return 0, fmt.Errorf("%q: seconds out of range", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}

func parseAt(s string, now func() time.Time) (time.Time, error) {
	if s == "" {
		return now(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %q: not RFC 3339 or Unix seconds", s)
	}
	return t, nil
}

func runVerify(ctx context.Context, s streams, o *verifyOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	vo, err := o.options()
	if err != nil {
		return err
	}
	prog := s.progress()
	vo.Progress = func(lines int64) { prog.show("verifying: %d transcript lines", lines) }
	v, err := verify.New(vo)
	if err != nil {
		hint := ""
		if vo.TrustedKey == nil && !vo.AllowEmbeddedKey {
			hint = "pass --trusted-key PUB, or --allow-embedded-key to check internal consistency only"
		}
		return usageErr(err, hint)
	}
	rep, verr := verifyInput(ctx, v, o)
	prog.done() // the line is cleared before the report is written
	if rep == nil {
		return verr
	}
	if err := writeReport(s.out, rep, o.format); err != nil {
		return err
	}
	hint := ""
	if rep.Has(verify.CodeRecordStale) {
		hint = "record_stale means old, not tampered: verify an archived record with --at issued, or allow its age with --max-age (days, e.g. 30d)"
	}
	if rep.Has(verify.CodeLimitExceeded) {
		hint = "some evidence is beyond --max-transcript-bytes, --max-transcript-lines or --max-payload-bytes: raise them to read it all"
	}
	switch rep.Verdict {
	case verify.Verified:
		if o.failOnWarning && rep.Warnings > 0 {
			return &exitError{code: exitWarnings, err: fmt.Errorf("verified with %s (--fail-on warning)", warningCount(rep.Warnings))}
		}
		return nil
	case verify.Incomplete:
		return &exitError{code: exitIncomplete, err: verr, hint: hint}
	default:
		return &exitError{code: exitFailed, err: verr, hint: hint}
	}
}

// verifyInput dispatches on the input: a bundle directory, a record, or a
// record with a proof. It returns a nil report with a usage error when the
// input cannot be read.
func verifyInput(ctx context.Context, v *verify.Verifier, o *verifyOptions) (*verify.Report, error) {
	fi, err := os.Stat(o.input)
	if err != nil {
		return nil, usageErr(err, "give a bundle directory or a record.json file")
	}
	recordPath := o.input
	if fi.IsDir() {
		if o.proof == "" {
			rep, err := v.Bundle(ctx, verify.DirFS(o.input))
			if rep == nil {
				return nil, usageErr(fmt.Errorf("bundle %s: %w", o.input, err), "a bundle directory holds record.json, transcript.jsonl and blobs/")
			}
			return rep, err
		}
		recordPath = filepath.Join(o.input, transcript.RecordFile)
	}
	record, err := readRegular(recordPath, sign.MaxRecordBytes+1)
	if err != nil {
		return nil, usageErr(err, "")
	}
	if len(record) > sign.MaxRecordBytes {
		// Not a record of any shape: unreadable input (exit 2), as for a
		// bundle's record.json.
		return nil, usageErr(fmt.Errorf("%s: %w: more than %d bytes", recordPath, verify.ErrTooLarge, sign.MaxRecordBytes), "a Trust Record is a few hundred bytes; this is not one")
	}
	if o.proof == "" {
		return v.Record(ctx, record)
	}
	proof, err := readRegular(o.proof, transcript.MaxProofBytes+1)
	if err != nil {
		return nil, usageErr(err, "--proof takes a file written by tracectl prove")
	}
	return v.Proof(ctx, record, proof)
}

// readRegular is readLimited for evidence: the file must be a regular
// file, opened without following a link in its last component and without
// blocking on a FIFO (verify.DirFS), so a hostile path cannot hang verify.
func readRegular(path string, max int64) ([]byte, error) {
	f, err := verify.DirFS(filepath.Dir(path)).Open(filepath.Base(path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// readLimited reads at most max bytes of a file: one byte past a parser's
// limit is enough for the parser to refuse it with its own finding.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

func writeReport(w io.Writer, rep *verify.Report, format string) error {
	if format == "json" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(jsonSafe(b), '\n'))
		return err
	}
	_, err := io.WriteString(w, textReport(rep))
	return err
}

// textReport renders the report for a terminal: the verdict first, then
// the findings grouped by check, then the counts. Every string that comes
// from evidence goes through escapeTerminal.
func textReport(rep *verify.Report) string {
	var b strings.Builder
	if rep.Warnings > 0 {
		fmt.Fprintf(&b, "verdict: %s (%s, %s)\n", rep.Verdict, rep.Kind, warningCount(rep.Warnings))
	} else {
		fmt.Fprintf(&b, "verdict: %s (%s)\n", rep.Verdict, rep.Kind)
	}
	fmt.Fprintf(&b, "trust: %s", rep.TrustBasis)
	if rep.Signer != "" {
		fmt.Fprintf(&b, " (signer %s)", escapeTerminal(rep.Signer))
	}
	fmt.Fprintf(&b, "\nreference time: %s\n", rep.ReferenceTime.Format(time.RFC3339))
	if rep.Profile != "" || len(rep.AcceptedProfiles) > 0 {
		fmt.Fprintf(&b, "profile: %s (accepted: %s)\n", escapeTerminal(cmp.Or(rep.Profile, "none")), escapeTerminal(strings.Join(rep.AcceptedProfiles, ", ")))
	}
	if rep.Root != "" {
		fmt.Fprintf(&b, "transcript root: %s\n", rep.Root)
	}
	for _, check := range verify.Checks() {
		first := true
		for _, f := range rep.Findings {
			if f.Check != check {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n%s\n", check)
				first = false
			}
			fmt.Fprintf(&b, "  %-11s %s", f.Status, f.Code)
			if f.Subject != "" {
				fmt.Fprintf(&b, " [%s]", escapeTerminal(f.Subject))
			}
			if f.Detail != "" {
				fmt.Fprintf(&b, ": %s", escapeTerminal(f.Detail))
			}
			b.WriteByte('\n')
		}
	}
	if len(rep.Omitted) > 0 {
		b.WriteString("\nomitted\n")
		for _, c := range verify.AllCodes() {
			if n := rep.Omitted[c]; n > 0 {
				fmt.Fprintf(&b, "  %d more %s findings not listed\n", n, c)
			}
		}
	}
	c := rep.Counts
	denied := ""
	if c.Denied > 0 {
		denied = fmt.Sprintf(", %d denied", c.Denied)
	}
	fmt.Fprintf(&b, "\ncounts: %d attempts (%d responses, %d transport failures, %d unknown%s); %d lines, %d snapshots, %d payloads checked\n",
		c.Attempts, c.Responses, c.TransportFailures, c.Unknown, denied, c.Lines, c.Snapshots, c.Payloads)
	return b.String()
}

// warningCount is "1 warning" or "N warnings".
func warningCount(n int64) string {
	if n == 1 {
		return "1 warning"
	}
	return fmt.Sprintf("%d warnings", n)
}

// failOnFlag is --fail-on: "warning" makes warnings fail the exit status
// (exit 4); "failed", the default, leaves it to the verdict.
type failOnFlag struct{ warning *bool }

func (f *failOnFlag) String() string {
	if f.warning != nil && *f.warning {
		return "warning"
	}
	return "failed"
}

func (f *failOnFlag) Set(v string) error {
	switch v {
	case "warning":
		*f.warning = true
	case "failed":
		*f.warning = false
	default:
		return fmt.Errorf("%q: want warning or failed", v)
	}
	return nil
}

func (f *failOnFlag) Type() string { return "warning|failed" }
