package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
	"golang.org/x/term"
)

// showMediaType is the versioned media type of `tracectl show --format json`.
const showMediaType = "application/vnd.tracectl.show.v1+json"

// maxShowBytes bounds the payload bytes show prints per request or
// response (--max-bytes); maxReadBytes bounds what it reads to print them.
const (
	defaultShowBytes = 2048
	maxReadBytes     = 1 << 20
)

// evidenceOptions are the flags show, export and report share: the bundle
// and, with --trusted-key, the same verification as tracectl verify.
type evidenceOptions struct {
	bundle     string
	trustedKey string
	at         string
	maxAge     string
	now        func() time.Time
	prog       *progress // the verification's progress line (streams.progress), set by the command
}

func (e *evidenceOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.trustedKey, "trusted-key", "", "verify the bundle as tracectl verify does, trusting this public key (PEM or JWK)")
	f.StringVar(&e.at, "at", "", "with --trusted-key: reference time for freshness (RFC 3339, Unix seconds, or issued)")
	f.StringVar(&e.maxAge, "max-age", "24h", "with --trusted-key: maximum age of the record (as tracectl verify)")
}

func (e *evidenceOptions) clock() func() time.Time {
	if e.now == nil {
		return time.Now
	}
	return e.now
}

// load reads the bundle's model, verified when a trusted key was given.
func (e *evidenceOptions) load(ctx context.Context) (*inspect.Bundle, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	fi, err := os.Stat(e.bundle)
	if err != nil {
		return nil, usageErr(err, "give a bundle directory")
	}
	if !fi.IsDir() {
		return nil, usageErr(fmt.Errorf("%s: not a bundle directory", e.bundle), "give a bundle directory (it holds record.json and transcript.jsonl)")
	}
	var lo inspect.Options
	if e.trustedKey != "" {
		vo := &verifyOptions{trustedKey: e.trustedKey, at: e.at, maxAge: e.maxAge, format: "text", now: e.clock(),
			maxTranscriptB: verify.DefaultMaxTranscriptBytes, maxTranscriptL: verify.DefaultMaxTranscriptLines, maxPayload: verify.DefaultMaxPayloadBytes}
		opts, err := vo.options()
		if err != nil {
			return nil, err
		}
		prog := e.prog
		opts.Progress = func(lines int64) { prog.show("verifying: %d transcript lines", lines) }
		defer prog.done() // the line is cleared before anything is written
		if lo.Verifier, err = verify.New(opts); err != nil {
			return nil, usageErr(err, "")
		}
	} else if e.at != "" {
		return nil, usageErr(errors.New("--at needs --trusted-key"), "")
	}
	b, err := inspect.Load(ctx, verify.DirFS(e.bundle), lo)
	if err != nil {
		return nil, usageErr(fmt.Errorf("bundle %s: %w", e.bundle, err), "")
	}
	return b, nil
}

type showOptions struct {
	evidenceOptions
	attempt  string
	format   string
	maxBytes int64
	width    func() int // the terminal's width, 0 when stdout is not a terminal
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newShowCmd(s, runShow) })
}

func newShowCmd(s streams, runF func(context.Context, streams, *showOptions) error) *cobra.Command {
	o := &showOptions{width: func() int { return terminalWidth(s.out) }}
	cmd := &cobra.Command{
		Use:   "show BUNDLE [--attempt ID] [--format text|json] [--trusted-key PUB]",
		Short: "Show what a bundle holds: server, protocol, and every tools/call attempt with its outcome",
		Long: `show prints what a bundle recorded: a header (the server as observed, the
protocol era and version, the producer, the execution scope, durability, the
time span and counts, and whether the bundle was verified), then one row per
tools/call attempt: its id, time (UTC) and duration, tool, outcome (result,
isError, a JSON-RPC error with its code, a transport failure, unknown after a
timeout or cancellation, a late response), retry link and basis, the snapshot
it was bound to and its correlation id.

Without --trusted-key nothing is verified and show says so; with it show runs
the same verification as tracectl verify and states the verdict (the exit
status stays 0: show shows, verify judges).

--attempt ID shows one attempt in full: its request and response bytes
(escaped, at most --max-bytes each), observations and linked notifications.
On a terminal the table fits its width; a pipe gets every value in full.
Evidence text is escaped in text and \u-escaped in JSON.`,
		Example: "  tracectl show run.trace\n  tracectl show --trusted-key key.pub run.trace\n  tracectl show --attempt a4 run.trace\n  tracectl show --format json run.trace",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runF(c.Context(), s, o)
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&o.attempt, "attempt", "", "show this attempt in full")
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: text or json ("+showMediaType+")")
	cmd.Flags().Int64Var(&o.maxBytes, "max-bytes", defaultShowBytes, "print at most this many bytes of each request and response")
	return cmd
}

func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	wd, _, err := term.GetSize(int(f.Fd()))
	if err != nil || wd <= 0 {
		return 80
	}
	return wd
}

func runShow(ctx context.Context, s streams, o *showOptions) error {
	if o.format != "text" && o.format != "json" {
		return usageErr(fmt.Errorf("unknown --format %q", o.format), "use --format text or --format json")
	}
	if o.maxBytes <= 0 || o.maxBytes > maxReadBytes {
		return usageErr(fmt.Errorf("--max-bytes must be between 1 and %d", maxReadBytes), "")
	}
	o.prog = s.progress()
	b, err := o.load(ctx)
	if err != nil {
		return err
	}
	var a *inspect.Attempt
	if o.attempt != "" {
		if a = b.Attempt(o.attempt); a == nil {
			return usageErr(fmt.Errorf("bundle %s has no attempt %q", o.bundle, o.attempt), "run tracectl show BUNDLE to list the attempt ids")
		}
	}
	fsys := verify.DirFS(o.bundle)
	if o.format == "json" {
		var v any = showJSON{MediaType: showMediaType, Bundle: o.bundle, Verification: verificationOf(b), Model: b}
		if a != nil {
			v = attemptJSON{MediaType: showMediaType, Bundle: o.bundle, Verification: verificationOf(b), Attempt: a,
				Request: payloadText(fsys, &a.Request, o.maxBytes), Response: payloadText(fsys, a.Response, o.maxBytes)}
		}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = s.out.Write(append(jsonSafe(out), '\n'))
		return err
	}
	var w strings.Builder
	if a != nil {
		writeAttempt(&w, fsys, b, a, o.maxBytes)
	} else {
		writeShow(&w, o.bundle, b, o.width())
	}
	_, err = io.WriteString(s.out, w.String())
	return err
}

type showJSON struct {
	MediaType    string          `json:"media_type"`
	Bundle       string          `json:"bundle"`
	Verification string          `json:"verification"`
	Model        *inspect.Bundle `json:"bundle_model"`
}

type attemptJSON struct {
	MediaType    string           `json:"media_type"`
	Bundle       string           `json:"bundle"`
	Verification string           `json:"verification"`
	Attempt      *inspect.Attempt `json:"attempt"`
	Request      *shownPayload    `json:"request_bytes,omitempty"`
	Response     *shownPayload    `json:"response_bytes,omitempty"`
}

// shownPayload is a payload's bytes as shown: the text (bounded), or why
// it is not shown.
type shownPayload struct {
	Text      string `json:"text,omitempty"`
	Truncated int64  `json:"truncated_bytes,omitempty"` // bytes left out after Text
	Missing   string `json:"unavailable,omitempty"`
}

// payloadText reads a payload's bytes for display: the first max of them,
// or why they cannot be shown.
func payloadText(fsys fs.FS, p *transcript.Payload, max int64) *shownPayload {
	if p == nil {
		return nil
	}
	if !p.Retained {
		why := "not retained (digest-only retention)"
		switch {
		case p.OverLimit:
			why = "not retained (longer than the frame limit)"
		case p.Withheld == transcript.WithheldUnredactable:
			why = "not retained (it may hold a secret and could not be redacted exactly)"
		}
		return &shownPayload{Missing: why}
	}
	if p.Length > maxReadBytes {
		return &shownPayload{Missing: fmt.Sprintf("%d bytes, more than show reads (%d)", p.Length, maxReadBytes)}
	}
	data, err := inspect.PayloadBytes(fsys, p.Digest, maxReadBytes)
	if err != nil {
		return &shownPayload{Missing: err.Error()}
	}
	sp := &shownPayload{}
	if int64(len(data)) > max {
		sp.Truncated = int64(len(data)) - max
		data = data[:max]
	}
	sp.Text = string(data)
	return sp
}

func writePayload(w *strings.Builder, label string, p *transcript.Payload, sp *shownPayload) {
	if p == nil {
		fmt.Fprintf(w, "  %-13s none\n", label+":")
		return
	}
	fmt.Fprintf(w, "  %-13s %s, %d bytes\n", label+":", p.Digest, p.Length)
	if len(p.Redactions) > 0 {
		var where []string
		for _, r := range p.Redactions {
			where = append(where, r.Class+" at "+r.Pointer)
		}
		fmt.Fprintf(w, "    (a redacted copy: %s)\n", escapeTerminal(strings.Join(where, ", ")))
	}
	switch {
	case sp.Missing != "":
		fmt.Fprintf(w, "    (%s)\n", escapeTerminal(sp.Missing))
	default:
		fmt.Fprintf(w, "    %s\n", escapeTerminal(sp.Text))
		if sp.Truncated > 0 {
			fmt.Fprintf(w, "    ... %d more bytes (--max-bytes)\n", sp.Truncated)
		}
	}
}

func writeAttempt(w *strings.Builder, fsys fs.FS, b *inspect.Bundle, a *inspect.Attempt, max int64) {
	kv := func(k, v string) { fmt.Fprintf(w, "  %-13s %s\n", k+":", v) }
	fmt.Fprintf(w, "attempt %s\n", escapeTerminal(a.AttemptID))
	kv("verification", escapeTerminal(verificationOf(b)))
	kv("time", utc(a.AtMs)+", "+duration(a)+" to its outcome")
	kv("tool", escapeTerminal(toolText(a)))
	kv("outcome", escapeTerminal(a.Outcome.Label()))
	if a.Outcome.Reason != "" && a.Outcome.Kind != inspect.OutcomeUnknown {
		kv("detail", escapeTerminal(a.Outcome.Reason))
	}
	kv("jsonrpc id", escapeTerminal(rpcIDText(a.RPCID)))
	kv("protocol", escapeTerminal(strings.TrimSpace(string(a.Protocol.Era)+" "+a.Protocol.State+" "+a.Protocol.Value)))
	snap := "none (" + a.Snapshot.NoneReason + ")"
	if a.Snapshot.SnapshotID != "" {
		snap = a.Snapshot.SnapshotID + " " + a.Snapshot.ManifestDigest
		if !a.Snapshot.Complete {
			snap += " (incomplete)"
		}
		if a.Snapshot.ListChangedSince {
			snap += " (list_changed since: possibly stale)"
		}
	}
	kv("snapshot", escapeTerminal(snap))
	kv("retry of", escapeTerminal(retryText(a)))
	if len(a.RetriedBy) > 0 {
		kv("retried by", escapeTerminal(strings.Join(a.RetriedBy, ", ")))
	}
	c := a.Correlation
	corr := func(v *transcript.CorrValue) string {
		switch {
		case v == nil:
			return "-"
		case v.Valid:
			return v.Value
		}
		return "(invalid: " + v.Reason + ")"
	}
	kv("traceparent", escapeTerminal(corr(c.Traceparent)))
	kv("correlation", escapeTerminal(corr(c.CorrelationID)))
	if c.ToolUseID != nil {
		kv("tool use id", escapeTerminal(corr(c.ToolUseID)))
	}
	if d := a.Decision; d != nil {
		dec := d.Action + " by rule " + d.Rule
		if d.Reason != "" {
			dec += ": " + d.Reason
		}
		if d.Declaration != "" {
			dec += " (declaration " + d.Declaration + ")"
		}
		kv("decision", escapeTerminal(dec))
	}
	kv("arguments", escapeTerminal(cmp.Or(a.ArgsDigest, "unsupported: "+a.ArgsUnsupport)))
	kv("line digest", a.LineDigest)
	writePayload(w, "request", &a.Request, payloadText(fsys, &a.Request, max))
	writePayload(w, "response", a.Response, payloadText(fsys, a.Response, max))
	w.WriteString("  observations:\n")
	if len(a.Observations) == 0 && a.Resolution == nil {
		w.WriteString("    none\n")
	}
	for _, o := range a.Observations {
		line := utc(o.AtMs)[11:] + "  " + o.Kind
		if o.ResultType != "" {
			line += " result_type=" + o.ResultType
		}
		if o.IsError {
			line += " isError"
		}
		if o.ErrorCode != nil {
			line += " code=" + strconv.FormatInt(*o.ErrorCode, 10)
		}
		if o.Detail != "" {
			line += ": " + o.Detail
		}
		if ap := o.Approval; ap != nil {
			line += approvalText(ap)
		}
		fmt.Fprintf(w, "    %s (line %d)\n", escapeTerminal(line), o.Seq)
	}
	if r := a.Resolution; r != nil {
		fmt.Fprintf(w, "    %s  resolution %s: %s (line %d)\n", utc(r.AtMs)[11:], escapeTerminal(r.Outcome), escapeTerminal(r.Reason), r.Seq)
	}
	w.WriteString("  notifications:\n")
	if len(a.Notifications) == 0 && len(a.Frames) == 0 {
		w.WriteString("    none\n")
	}
	for _, n := range a.Notifications {
		fmt.Fprintf(w, "    %s  %s %s (line %d)\n", utc(n.AtMs)[11:], escapeTerminal(n.Method), n.Direction, n.Seq)
	}
	for _, f := range a.Frames {
		fmt.Fprintf(w, "    %s  frame %s %s %s (line %d)\n", utc(f.AtMs)[11:], escapeTerminal(f.Method), f.Kind, f.Direction, f.Seq)
	}
	if a.LinkedOmitted > 0 {
		fmt.Fprintf(w, "    ... %d more linked lines not listed\n", a.LinkedOmitted)
	}
}

func rpcIDText(id transcript.JSONRPCID) string {
	switch {
	case !id.Present:
		return "absent"
	case id.Digest != "":
		return "(long id) " + id.Digest + " (" + id.Kind + ")"
	}
	return id.Text + " (" + id.Kind + ")"
}

// verificationOf is the header's verification line.
func verificationOf(b *inspect.Bundle) string {
	r := b.Report
	if r == nil {
		return "not verified"
	}
	s := string(r.Verdict) + " (" + r.TrustBasis
	if r.Signer != "" {
		s += ", signer " + r.Signer
	}
	if r.Warnings > 0 {
		s += ", " + warningCount(r.Warnings)
	}
	s += ")"
	if codes := r.Failures(); len(codes) > 0 {
		cs := make([]string, len(codes))
		for i, c := range codes {
			cs[i] = string(c)
		}
		s += ": " + strings.Join(cs, ", ")
	}
	return s
}

// utc formats a recorded time in UTC with milliseconds.
func utc(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func duration(a *inspect.Attempt) string {
	d := a.Duration()
	if d < 0 {
		return "-"
	}
	return d.String()
}

func writeShow(w *strings.Builder, path string, b *inspect.Bundle, width int) {
	h := b.Header
	kv := func(k, v string) { fmt.Fprintf(w, "%-13s %s\n", k+":", v) }
	kv("bundle", escapeTerminal(path))
	v := verificationOf(b)
	if b.Report == nil {
		v += " (pass --trusted-key KEY to verify)"
	}
	kv("verification", escapeTerminal(v))
	kv("server", escapeTerminal(serverText(b)))
	kv("protocol", escapeTerminal(protocolText(b)))
	kv("producer", escapeTerminal(strings.TrimSpace(h.Producer.Name+" "+h.Producer.Version)))
	kv("scope", escapeTerminal(h.ExecutionScope))
	kv("durability", escapeTerminal(h.Durability+" (retention "+h.Retention+")"))
	if b.LastMs > 0 {
		kv("time", fmt.Sprintf("%s .. %s (%s)", utc(b.FirstMs), utc(b.LastMs), time.Duration(b.LastMs-b.FirstMs)*time.Millisecond))
	}
	kv("counts", countsText(b))
	if h.Policy != nil {
		kv("policy", escapeTerminal(policyText(b)))
	}
	if b.Problem != "" {
		kv("problem", escapeTerminal(b.Problem))
	}
	if b.Truncated {
		kv("truncated", fmt.Sprintf("more than %d attempts: the first are shown", inspect.MaxAttempts))
	}
	w.WriteByte('\n')
	if len(b.Attempts) == 0 {
		w.WriteString("no tools/call attempts recorded\n")
		return
	}
	rows := [][]string{{"ATTEMPT", "TIME (UTC)", "DURATION", "TOOL", "OUTCOME", "RETRY OF", "SNAPSHOT", "CORRELATION"}}
	for _, a := range b.Attempts {
		rows = append(rows, []string{
			escapeTerminal(a.AttemptID), utc(a.AtMs)[11:], duration(a), escapeTerminal(toolText(a)),
			escapeTerminal(a.Outcome.Label()), escapeTerminal(retryText(a)), escapeTerminal(cmp.Or(a.Snapshot.SnapshotID, "-")),
			escapeTerminal(correlationText(a)),
		})
	}
	w.WriteString(renderTable(rows, width, []int{3, 7, 4, 5}, []int{7, 6, 5, 2}))
}

func serverText(b *inspect.Bundle) string {
	srv := b.Header.Server
	var parts []string
	if srv.Name != "" {
		parts = append(parts, strconv.Quote(srv.Name))
	}
	parts = append(parts, srv.Transport)
	if srv.Executable != "" {
		parts = append(parts, srv.Executable)
	}
	if l := srv.Launch; l != nil {
		parts = append(parts, "via "+l.Launcher+" "+cmp.Or(l.Package, l.Script, l.Image)+" "+l.Version)
	}
	s := strings.Join(parts, " ")
	if p := b.Protocol(); p != nil && (p.ServerName != "" || p.ServerVer != "") {
		s += "; reports " + strings.TrimSpace(p.ServerName+" "+p.ServerVer)
	}
	return s + " (as observed, not authenticated)"
}

func protocolText(b *inspect.Bundle) string {
	p := b.Protocol()
	if p == nil {
		return "not observed"
	}
	return strings.TrimSpace(string(p.Era)+" "+p.Version) + " (" + p.Source + ")"
}

// countsText counts attempts by the one count model (inspect's outcome
// classes, as the seal line and verify count them), with what the
// responses were.
func countsText(b *inspect.Bundle) string {
	n := map[string]int{}
	class := map[string]int{}
	late := 0
	for _, a := range b.Attempts {
		n[a.Outcome.Kind]++
		class[a.Outcome.Class()]++
		if a.Outcome.Late != "" {
			late++
		}
	}
	lateText := ""
	if late > 0 {
		lateText = fmt.Sprintf(", %d late", late)
	}
	s := fmt.Sprintf("%d attempts (%d responses: %d result, %d isError, %d JSON-RPC error%s; %d transport failures; %d unknown); %d snapshots, %d notifications, %d lines",
		len(b.Attempts), class[inspect.ClassResponse], n[inspect.OutcomeResult], n[inspect.OutcomeToolError], n[inspect.OutcomeJSONRPCError], lateText,
		class[inspect.ClassTransportFailure], class[inspect.ClassUnknown], len(b.Snapshots), len(b.Notifications), b.Lines)
	if d := class[inspect.ClassDenied]; d > 0 {
		s = strings.Replace(s, " unknown); ", fmt.Sprintf(" unknown; %d denied by policy); ", d), 1)
	}
	if b.Seal == nil {
		return s + ", not sealed"
	}
	return s + ", sealed"
}

func toolText(a *inspect.Attempt) string {
	if a.ToolInvalid != "" {
		return "(" + a.ToolInvalid + ")"
	}
	return a.Tool
}

func retryText(a *inspect.Attempt) string {
	if a.RetryOf == "" {
		return "-"
	}
	return a.RetryOf + " (" + a.RetryBasis + ")"
}

func correlationText(a *inspect.Attempt) string {
	if c := a.Correlation.CorrelationID; c != nil {
		if c.Valid {
			return c.Value
		}
		return "(invalid: " + c.Reason + ")"
	}
	if c := a.Correlation.ToolUseID; c != nil && c.Valid {
		return "tool-use " + c.Value
	}
	return "-"
}

// policyText summarizes the policy in force and its decisions: the mode,
// what the header commits to, and the decisions by action and rule.
func policyText(b *inspect.Bundle) string {
	p := b.Header.Policy
	var parts []string
	if p.PolicyDigest != "" {
		parts = append(parts, fmt.Sprintf("policy %s (%d bytes)", p.PolicyDigest, p.PolicyLength))
	}
	if p.LockDigest != "" {
		parts = append(parts, fmt.Sprintf("lock %s (%d bytes)", p.LockDigest, p.LockLength))
	}
	allow, deny := 0, map[string]int{}
	for _, a := range b.Attempts {
		switch d := a.Decision; {
		case d == nil:
		case d.Action == "deny":
			deny[d.Rule]++
		default:
			allow++
		}
	}
	dec := fmt.Sprintf("decisions: %d allow", allow)
	rules := make([]string, 0, len(deny))
	for r := range deny {
		rules = append(rules, r)
	}
	slices.Sort(rules)
	for _, r := range rules {
		dec += fmt.Sprintf(", %d deny (rule %s)", deny[r], r)
	}
	return p.Mode + "; " + strings.Join(append(parts, dec), "; ")
}

// renderTable aligns rows in columns two spaces apart. With width > 0 (a
// terminal) and a table wider than it, the shrinkable columns (widest
// first) are cut with "…" until it fits or each is down to 8 characters,
// then the droppable columns are left out in their order until it fits
// (the attempt id, time, tool and outcome stay). Cells are already
// escaped, so one rune is one terminal cell (near enough: wide CJK
// characters may overrun).
func renderTable(rows [][]string, width int, shrinkable, droppable []int) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	total := func() int {
		t := 2 * (len(widths) - 1)
		for _, w := range widths {
			t += w
		}
		return t
	}
	for width > 0 && total() > width {
		best := -1
		for _, i := range shrinkable {
			if widths[i] > 8 && (best < 0 || widths[i] > widths[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		widths[best] -= min(total()-width, widths[best]-8)
	}
	dropped := map[int]bool{}
	for _, i := range droppable {
		if width <= 0 || total() <= width {
			break
		}
		dropped[i] = true
		widths[i] = -2 // its two spaces of separation go too
	}
	var b strings.Builder
	for _, r := range rows {
		last := len(r) - 1
		for last > 0 && dropped[last] {
			last--
		}
		for i, c := range r {
			if dropped[i] {
				continue
			}
			if n := utf8.RuneCountInString(c); n > widths[i] {
				rs := []rune(c)
				c = string(rs[:widths[i]-1]) + "…"
			}
			b.WriteString(c)
			if i < last {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
