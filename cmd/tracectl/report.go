package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/internal/snapdiff"
	"github.com/tracectl/tracectl/verify"
)

type reportOptions struct {
	evidenceOptions
	out         string
	includeArgs bool
	format      string // what is printed once the report is written: text (stderr) or json (stdout)
}

// reportMediaType names report's --format json result: the file written
// and the verification it shows.
const reportMediaType = "application/vnd.tracectl.report-result.v1+json"

type reportResult struct {
	MediaType string   `json:"media_type"`
	Out       string   `json:"out"`
	Bundle    string   `json:"bundle"`
	Verdict   string   `json:"verdict"` // "not verified" without --trusted-key
	Failures  []string `json:"failures"`
	Warnings  int64    `json:"warnings"`
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newReportCmd(s, runReport) })
}

func newReportCmd(s streams, runF func(context.Context, streams, *reportOptions) error) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report BUNDLE --out report.html [--trusted-key PUB]",
		Short: "Write a self-contained HTML report of a bundle for an auditor",
		Long: `report writes one self-contained HTML file: the verdict and every finding
(with --trusted-key; otherwise the report says "not verified"), the bundle's
header, the attempts table, a timeline of the attempts as an inline SVG (each
attempt a bar from its request to its outcome, retries linked, unknown
outcomes drawn as such), the snapshots with their completeness, and the
declaration drift of each snapshot against the previous one.

The file loads nothing: no scripts, fonts, images or styles from anywhere
(a Content-Security-Policy of default-src 'none' says so to the browser),
and every string from the evidence is escaped by html/template. It is
created exclusively with mode 0600.

The page opens with what needs attention: every failing, unavailable,
unsupported and warning finding, worst first, each linked to the attempt it
names. With --include-arguments each attempt also shows its arguments and
result from the retained payloads (redacted when recorded; they may still
hold secrets).`,
		Example: "  tracectl report --trusted-key key.pub --out report.html run.trace",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runF(c.Context(), s, o)
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&o.out, "out", "", "the HTML file to create (must not exist)")
	cmd.Flags().BoolVar(&o.includeArgs, "include-arguments", false, "also show each call's arguments and result, from the retained (redacted) payloads (may hold secrets)")
	formatFlag(cmd, &o.format, reportMediaType)
	return cmd
}

func runReport(ctx context.Context, s streams, o *reportOptions) error {
	if o.out == "" {
		return usageErr(errors.New("--out FILE is required"), "tracectl report --out report.html BUNDLE")
	}
	if err := checkFormat(o.format); err != nil {
		return err
	}
	o.prog = s.progress()
	b, err := o.load(ctx)
	if err != nil {
		return err
	}
	page, err := renderReport(o.bundle, b, verify.DirFS(o.bundle), o.includeArgs)
	if err != nil {
		return err
	}
	if err := writeNewFile(o.out, page); err != nil {
		return err
	}
	if o.format == formatJSON {
		res := reportResult{MediaType: reportMediaType, Out: o.out, Bundle: o.bundle, Verdict: "not verified", Failures: []string{}}
		if r := b.Report; r != nil {
			res.Verdict, res.Warnings = string(r.Verdict), r.Warnings
			for _, c := range r.Failures() {
				res.Failures = append(res.Failures, string(c))
			}
		}
		return writeJSON(s.out, res)
	}
	fmt.Fprintf(s.err, "tracectl: report written to %s (%s)\n", escapeTerminal(o.out), escapeTerminal(verificationOf(b)))
	return nil
}

// maxTimelineRows bounds the SVG: a report of more attempts draws the first.
const maxTimelineRows = 2000

type tlBar struct {
	ID, Class, Title, Label, Anchor string
	X, Y, W, TextX                  float64
	Unknown                         bool
}

type tlLink struct{ X1, Y1, X2, Y2 float64 }

type timeline struct {
	Width, Height float64
	Bars          []tlBar
	Links         []tlLink
	Omitted       int
	From, To      string
}

const (
	tlLeft  = 70.0
	tlRight = 40.0
	tlWidth = 1000.0
	tlRow   = 20.0
	tlTop   = 24.0
)

func buildTimeline(b *inspect.Bundle) timeline {
	atts := b.Attempts
	tl := timeline{Width: tlWidth}
	if len(atts) > maxTimelineRows {
		tl.Omitted = len(atts) - maxTimelineRows
		atts = atts[:maxTimelineRows]
	}
	if len(atts) == 0 {
		return tl
	}
	t0, t1 := atts[0].AtMs, atts[0].AtMs
	for _, a := range atts {
		t0 = min(t0, a.AtMs)
		t1 = max(t1, a.AtMs, a.EndMs)
	}
	t1 = max(t1, b.LastMs)
	span := float64(max(t1-t0, 1))
	x := func(ms int64) float64 { return tlLeft + float64(ms-t0)/span*(tlWidth-tlLeft-tlRight) }
	tl.From, tl.To = utc(t0), utc(t1)
	row := map[string]int{}
	for i, a := range atts {
		row[a.AttemptID] = i
		end := a.EndMs
		unknown := !a.Outcome.Known()
		if end == 0 {
			end = t1 // in flight to the end of the recording
		}
		x1, x2 := x(a.AtMs), x(end)
		bar := tlBar{ID: a.AttemptID, X: x1, Y: tlTop + float64(i)*tlRow, W: max(x2-x1, 3), Unknown: unknown,
			Class: "o-" + a.Outcome.Kind, Label: a.Outcome.Label(),
			Title: fmt.Sprintf("%s %s: %s, %s at %s", a.AttemptID, toolText(a), a.Outcome.Label(), duration(a), utc(a.AtMs))}
		bar.TextX, bar.Anchor = bar.X+bar.W+4, "start"
		if bar.TextX > tlWidth-200 {
			bar.TextX, bar.Anchor = bar.X-4, "end" // the label goes left of a bar near the right edge
		}
		tl.Bars = append(tl.Bars, bar)
	}
	for _, a := range atts {
		p, ok := row[a.RetryOf]
		if a.RetryOf == "" || !ok {
			continue
		}
		from, to := tl.Bars[p], tl.Bars[row[a.AttemptID]]
		tl.Links = append(tl.Links, tlLink{X1: from.X + from.W, Y1: from.Y + 7, X2: to.X, Y2: to.Y + 7})
	}
	tl.Height = tlTop + float64(len(atts))*tlRow + 10
	return tl
}

type reportSnapshot struct {
	*inspect.Snapshot
	Time string
}

type reportDrift struct {
	inspect.Drift
	Changed []snapdiff.ToolDiff
}

type reportData struct {
	Bundle, Verification, Verdict string
	Report                        *verify.Report
	Attention                     []verify.Finding // fail, unavailable, unsupported, warning: worst first
	Findings                      []verify.Finding // every finding, worst first
	Header                        [][2]string
	Attempts                      []*inspect.Attempt
	Content                       map[string]attemptContent // by attempt id, with --include-arguments
	Timeline                      timeline
	Snapshots                     []reportSnapshot
	Drifts                        []reportDrift
	Problem                       string
	Generated                     string
}

// attemptContent is a call's arguments and result as the report shows
// them: compact JSON, cut at maxReportContent bytes.
type attemptContent struct{ Arguments, Result string }

// maxReportContent bounds each argument or result shown.
const maxReportContent = 4 << 10

// findingRank orders findings for an auditor: what breaks the verdict first.
func findingRank(s verify.Status) int {
	switch s {
	case verify.StatusFail:
		return 0
	case verify.StatusUnavailable, verify.StatusUnsupported:
		return 1
	case verify.StatusWarning:
		return 2
	case verify.StatusPass:
		return 3
	}
	return 4
}

func renderReport(path string, b *inspect.Bundle, fsys fs.FS, includeArgs bool) ([]byte, error) {
	d := reportData{Bundle: path, Verification: verificationOf(b), Report: b.Report, Attempts: b.Attempts,
		Timeline: buildTimeline(b), Problem: b.Problem, Verdict: "unverified", Generated: version()}
	if b.Report != nil {
		d.Verdict = string(b.Report.Verdict)
		d.Findings = slices.Clone(b.Report.Findings)
		slices.SortStableFunc(d.Findings, func(x, y verify.Finding) int { return findingRank(x.Status) - findingRank(y.Status) })
		for _, f := range d.Findings {
			if findingRank(f.Status) <= 2 {
				d.Attention = append(d.Attention, f)
			}
		}
	}
	if includeArgs {
		d.Content = map[string]attemptContent{}
		recs := b.Records()
		for i := range recs {
			b.WithPayloads(fsys, &recs[i])
			c := attemptContent{}
			if recs[i].Arguments != nil {
				c.Arguments = cut(jsonText(recs[i].Arguments), maxReportContent)
			}
			if recs[i].Result != nil {
				c.Result = cut(jsonText(recs[i].Result), maxReportContent)
			}
			d.Content[recs[i].AttemptID] = c
		}
	}
	h := b.Header
	d.Header = [][2]string{
		{"Server (as observed)", serverText(b)}, {"Protocol", protocolText(b)},
		{"Producer", strings.TrimSpace(h.Producer.Name + " " + h.Producer.Version)}, {"Execution scope", h.ExecutionScope},
		{"Durability", h.Durability + " (retention " + h.Retention + ")"},
		{"Time span", utc(b.FirstMs) + " .. " + utc(b.LastMs) + " (" + (time.Duration(b.LastMs-b.FirstMs) * time.Millisecond).String() + ")"},
		{"Counts", countsText(b)},
	}
	if h.Policy != nil {
		d.Header = append(d.Header, [2]string{"Policy", policyText(b)})
	}
	for _, s := range b.Snapshots {
		d.Snapshots = append(d.Snapshots, reportSnapshot{Snapshot: s, Time: utc(s.AtMs)})
	}
	for _, dr := range b.Drifts(fsys) {
		rd := reportDrift{Drift: dr}
		if dr.Result != nil {
			for _, t := range dr.Result.Tools {
				if t.Change != snapdiff.ChangeUnchanged {
					rd.Changed = append(rd.Changed, t)
				}
			}
		}
		d.Drifts = append(d.Drifts, rd)
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("render report: %w", err)
	}
	return buf.Bytes(), nil
}

// cut shortens s to at most n bytes, at a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " ... (" + strconv.Itoa(len(s)) + " bytes)"
}

// attemptAnchor is the id of the attempt a finding's subject names
// ("attempt a3", "attempt a3 response"), or "".
func attemptAnchor(subject string) string {
	rest, ok := strings.CutPrefix(subject, "attempt ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	return id
}

var reportFuncs = template.FuncMap{
	"anchor":      attemptAnchor,
	"content":     func(m map[string]attemptContent, id string) attemptContent { return m[id] },
	"ev":          escapeTerminal, // controls, bidi and invisible characters shown as escapes, then HTML-escaped
	"utc":         utc,
	"clock":       func(ms int64) string { return utc(ms)[11:] },
	"duration":    duration,
	"tool":        func(a *inspect.Attempt) string { return escapeTerminal(toolText(a)) },
	"retry":       func(a *inspect.Attempt) string { return escapeTerminal(retryText(a)) },
	"correlation": func(a *inspect.Attempt) string { return escapeTerminal(correlationText(a)) },
	"join":        func(s []string, sep string) string { return escapeTerminal(strings.Join(s, sep)) },
	"add":         func(a, b float64) float64 { return a + b },
}

// reportTemplate is the whole page: inline CSS, inline SVG, no script and
// nothing loaded (the CSP forbids every fetch).
var reportTemplate = template.Must(template.New("report").Funcs(reportFuncs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="referrer" content="no-referrer">
<title>tracectl report: {{ev .Bundle}}</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
code{white-space:nowrap}.attention{border:2px solid #cf222e;border-radius:6px;padding:8px 12px;margin:12px 0;background:#fff5f5}
.attention.warn{border-color:#d4a72c;background:#fffbea}pre.content{margin:2px 0;max-height:16em;overflow:auto;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.verdict{display:inline-block;padding:4px 12px;border-radius:6px;font-weight:600;font-size:16px;margin:8px 0}
.v-verified{background:#dafbe1;color:#116329}.v-failed{background:#ffebe9;color:#a40e26}.v-incomplete{background:#fff8c5;color:#7d4e00}.v-unverified{background:#eaeef2;color:#424a53}
.s-fail{color:#a40e26;font-weight:600}.s-unavailable,.s-unsupported{color:#7d4e00;font-weight:600}.s-pass{color:#116329}.s-info{color:#424a53}.s-warning{color:#9a6700;font-weight:600}
.o-result{fill:#2da44e}.o-tool_error{fill:#d4a72c}.o-jsonrpc_error{fill:#cf222e}.o-transport_failure{fill:#8250df}
.o-timeout,.o-cancelled,.o-unknown,.o-in_flight{fill:url(#unknown);stroke:#57606a;stroke-dasharray:3 2}
td.o-result{color:#116329}td.o-tool_error{color:#7d4e00}td.o-jsonrpc_error,td.o-transport_failure{color:#a40e26}
td.o-timeout,td.o-cancelled,td.o-unknown,td.o-in_flight{color:#57606a;font-style:italic}
svg text{font:11px ui-monospace,Menlo,Consolas,monospace;fill:#1b1f24}.link{stroke:#0969da;stroke-width:1.5;fill:none}
.legend span{margin-right:14px}.sw{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:4px}
</style>
</head>
<body>
<h1>tracectl report</h1>
<div class="mono">{{ev .Bundle}}</div>
<div class="verdict v-{{.Verdict}}">{{ev .Verification}}</div>
{{if not .Report}}<p>Not verified: this report shows what the bundle records, not whether it is intact. Run <code>tracectl report --trusted-key KEY</code> to verify it.</p>{{end}}
{{if .Problem}}<p class="s-fail">The transcript could not be read to its end: {{ev .Problem}}</p>{{end}}

{{if .Attention}}<div class="attention{{if eq (index .Attention 0).Status "warning"}} warn{{end}}" id="attention"><strong>Needs attention ({{len .Attention}}):</strong>
<table><tr><th>status</th><th>code</th><th>subject</th><th>what it means</th></tr>
{{range .Attention}}<tr><td class="s-{{.Status}}">{{.Status}}</td><td><code>{{.Code}}</code></td><td class="mono">{{with anchor .Subject}}<a href="#attempt-{{ev .}}">{{end}}{{ev .Subject}}{{with anchor .Subject}}</a>{{end}}</td><td>{{ev .Detail}}</td></tr>
{{end}}</table></div>{{else if .Report}}<p class="s-pass">Nothing needs attention: every finding passes or is informational.</p>{{end}}

<h2>Verification findings</h2>
{{with .Report}}
<table><tr><th>status</th><th>code</th><th>check</th><th>subject</th><th>detail</th></tr>
{{range $.Findings}}<tr><td class="s-{{.Status}}">{{.Status}}</td><td><code>{{.Code}}</code></td><td>{{.Check}}</td><td class="mono">{{ev .Subject}}</td><td>{{ev .Detail}}</td></tr>
{{end}}</table>
<p>Trust: {{.TrustBasis}}{{if .Signer}} (signer <code>{{ev .Signer}}</code>){{end}}; reference time {{.ReferenceTime.UTC.Format "2006-01-02T15:04:05Z"}}; transcript root <code>{{ev .Root}}</code>.</p>
{{else}}<p>None: the bundle was not verified.</p>{{end}}

<h2>Bundle</h2>
<table>{{range .Header}}<tr><th>{{index . 0}}</th><td class="mono">{{ev (index . 1)}}</td></tr>{{end}}</table>

<h2>Timeline</h2>
{{with .Timeline}}{{if .Bars}}
<div class="legend"><span><i class="sw" style="background:#2da44e"></i>result</span><span><i class="sw" style="background:#d4a72c"></i>isError</span><span><i class="sw" style="background:#cf222e"></i>JSON-RPC error</span><span><i class="sw" style="background:#8250df"></i>transport failure</span><span><i class="sw" style="border:1px dashed #57606a"></i>unknown (hatched)</span><span style="color:#0969da">&#8594; retry</span></div>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="attempt timeline">
<defs><pattern id="unknown" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eaeef2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8c959f" stroke-width="2"/></pattern>
<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#0969da"/></marker></defs>
<text x="0" y="14">{{.From}}</text><text x="{{.Width}}" y="14" text-anchor="end">{{.To}}</text>
{{range .Bars}}<g id="bar-{{ev .ID}}"><title>{{ev .Title}}</title><text x="2" y="{{add .Y 11}}">{{ev .ID}}</text><rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="14" rx="2"/><text x="{{.TextX}}" y="{{add .Y 11}}" text-anchor="{{.Anchor}}">{{if .Unknown}}? {{end}}{{ev .Label}}</text></g>
{{end}}{{range .Links}}<path class="link" d="M{{.X1}},{{.Y1}} C{{add .X1 20}},{{.Y1}} {{add .X2 -20}},{{.Y2}} {{.X2}},{{.Y2}}" marker-end="url(#arrow)"/>
{{end}}</svg>
{{if .Omitted}}<p>{{.Omitted}} more attempts are not drawn.</p>{{end}}
{{else}}<p>No tools/call attempts recorded.</p>{{end}}{{end}}

<h2>Attempts</h2>
{{if not .Content}}<p style="color:#57606a">Arguments and results are not shown (<code>tracectl report --include-arguments</code> shows them from the retained payloads).</p>{{end}}
<table><tr><th>attempt</th><th>time (UTC)</th><th>duration</th><th>tool</th><th>outcome</th><th>retry of</th><th>snapshot</th><th>correlation</th><th>line digest</th></tr>
{{range .Attempts}}<tr id="attempt-{{ev .AttemptID}}"><td><code>{{ev .AttemptID}}</code></td><td>{{utc .AtMs}}</td><td>{{duration .}}</td><td class="mono">{{tool .}}</td><td class="o-{{.Outcome.Kind}}">{{ev .Outcome.Label}}</td><td>{{retry .}}</td><td>{{ev (or .Snapshot.SnapshotID "-")}}</td><td class="mono">{{correlation .}}</td><td class="mono">{{.LineDigest}}</td></tr>
{{if $.Content}}{{with content $.Content .AttemptID}}<tr><td></td><td colspan="8"><div>arguments{{if not .Arguments}}: not retained{{end}}</div>{{if .Arguments}}<pre class="content">{{.Arguments}}</pre>{{end}}<div>result{{if not .Result}}: none retained{{end}}</div>{{if .Result}}<pre class="content">{{.Result}}</pre>{{end}}</td></tr>{{end}}{{end}}
{{end}}</table>

<h2>Snapshots</h2>
{{if .Snapshots}}<table><tr><th>snapshot</th><th>time (UTC)</th><th>complete</th><th>tools</th><th>pages</th><th>attempts bound</th><th>manifest digest</th></tr>
{{range .Snapshots}}<tr><td><code>{{ev .SnapshotID}}</code></td><td>{{.Time}}</td><td>{{if .Complete}}complete{{else}}<span class="s-unavailable">incomplete: {{ev .IncompleteReason}}</span>{{end}}{{if .Reuse}} (reused capture){{end}}</td><td>{{.Tools}}</td><td>{{.Pages}}</td><td>{{.Attempts}}</td><td class="mono">{{.ManifestDigest}}</td></tr>
{{end}}</table>{{else}}<p>No tools/list snapshot recorded: no attempt is bound to a declared catalog.</p>{{end}}

<h2>Drift against the previous snapshot</h2>
{{range .Drifts}}<h3>{{ev .Old}} &#8594; {{ev .New}}{{with .Result}}: {{.Verdict}}{{end}}</h3>
{{if .Problem}}<p class="s-unavailable">Not compared: {{ev .Problem}}</p>{{else if .Changed}}<table><tr><th>tool</th><th>change</th><th>members</th></tr>
{{range .Changed}}<tr><td class="mono">{{ev .Name}}</td><td>{{.Change}}</td><td class="mono">{{join .Members " "}}{{if .Truncated}} ...{{end}}{{if .Reason}} {{ev .Reason}}{{end}}</td></tr>
{{end}}</table>{{else}}<p>No tool changed.</p>{{end}}
{{else}}<p>Fewer than two snapshots: nothing to compare.</p>{{end}}
<p style="color:#57606a;margin-top:32px">Written by tracectl {{.Generated}}. Server identity, responses and snapshots are the producer's observations, not authenticated by the server.</p>
</body>
</html>
`))
