package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/transcript"
)

// OTLP metrics (spec/export.md, "Metrics"): the two client histograms of
// the OpenTelemetry MCP semantic conventions (semantic-conventions-genai,
// docs/gen-ai/mcp.md, Development status), from a bundle or live.

const (
	metricOperation = "mcp.client.operation.duration"
	metricSession   = "mcp.client.session.duration"
	metricScope     = "github.com/tracectl/tracectl/cmd/tracectl"
	// metricBatch bounds the data points of one export request, so a
	// bundle of inspect.MaxAttempts attempts is not one huge request.
	metricBatch = 4096
	// metricCardinality bounds the attribute sets the live meter holds: a
	// tool name is chosen by the evidence, so a hostile peer could
	// otherwise grow the meter without bound (beyond it, the SDK folds
	// measurements into one otel.metric.overflow set).
	metricCardinality = 2000
)

// metricBounds is the convention's ExplicitBucketBoundaries advice for
// both histograms, in seconds.
var metricBounds = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

var metricDescriptions = map[string]string{
	metricOperation: "The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.",
	metricSession:   "The duration of the MCP session as observed on the MCP client.",
}

// operationMetricKeys are the span attributes the convention lists for
// mcp.client.operation.duration: the low-cardinality ones (no request id,
// no attempt id, no digests).
var operationMetricKeys = []attribute.Key{attrMCPMethod, attrOperation, attrToolName, attrErrorType, attrRPCStatus,
	attrMCPProtocol, attrNetTransport, "server.address", "server.port"}

// metricAttrs keeps the attributes of keys, so a data point is attributed
// exactly as its span is (and escaped as it is).
func metricAttrs(attrs []attribute.KeyValue, keys []attribute.Key) attribute.Set {
	var out []attribute.KeyValue
	for _, kv := range attrs {
		if slices.Contains(keys, kv.Key) {
			out = append(out, kv)
		}
	}
	return attribute.NewSet(out...)
}

// signalSet is what --signals asks for.
type signalSet struct{ traces, metrics bool }

// parseSignals reads "traces", "metrics" or both, comma-separated.
func parseSignals(s string) (signalSet, error) {
	var set signalSet
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "traces":
			set.traces = true
		case "metrics":
			set.metrics = true
		default:
			return set, fmt.Errorf("signal %q: want traces, metrics or traces,metrics", p)
		}
	}
	return set, nil
}

// otlpEnvMetricsEndpoint is the metrics URL the standard variables name:
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (the metrics URL itself), else
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL).
func otlpEnvMetricsEndpoint() string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// otlpEnvMetricsProtocol is OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
func otlpEnvMetricsProtocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "http/protobuf"
}

// errSignalPath is an endpoint whose path names neither signal, given for
// both: one URL cannot be both the traces and the metrics URL.
var errSignalPath = errors.New("an endpoint with a path other than /v1/traces or /v1/metrics names one signal's URL")

// signalURL is endpoint for one signal ("traces" or "metrics"): a base URL
// gets /v1/SIGNAL, a URL ending in the other signal's /v1/ path gets this
// signal's, any other path is used as given.
func signalURL(endpoint, signal string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	if u.Path == "" || u.Path == "/" {
		return endpoint[:len(endpoint)-len(u.Path)] + "/v1/" + signal
	}
	for _, other := range []string{"/v1/traces", "/v1/metrics"} {
		if strings.HasSuffix(u.Path, other) {
			u.Path = strings.TrimSuffix(u.Path, other) + "/v1/" + signal
			return u.String()
		}
	}
	return endpoint
}

// otlpMetricExporter is the metric exporter for protocol and endpoint, as
// otlpExporter is for spans: retries off, a failure is reported.
func otlpMetricExporter(ctx context.Context, protocol, endpoint string, timeout time.Duration) (sdkmetric.Exporter, error) {
	if protocol == "grpc" {
		return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(endpoint),
			otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false}), otlpmetricgrpc.WithTimeout(timeout))
	}
	return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(signalURL(endpoint, "metrics")),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}), otlpmetrichttp.WithTimeout(timeout))
}

// histPoint is one measurement's data point: count 1 in its bucket.
func histPoint(set attribute.Set, start, end time.Time, v float64) metricdata.HistogramDataPoint[float64] {
	counts := make([]uint64, len(metricBounds)+1)
	// Buckets are upper-inclusive: the first bound >= v.
	counts[sort.SearchFloat64s(metricBounds, v)]++
	return metricdata.HistogramDataPoint[float64]{Attributes: set, StartTime: start, Time: end, Count: 1,
		Bounds: metricBounds, BucketCounts: counts, Min: metricdata.NewExtrema(v), Max: metricdata.NewExtrema(v), Sum: v}
}

// addTo adds a measurement to p (two attempts of one stream that ended in
// the same millisecond).
func addTo(p *metricdata.HistogramDataPoint[float64], v float64) {
	p.Count++
	p.BucketCounts[sort.SearchFloat64s(metricBounds, v)]++
	p.Sum += v
	if lo, _ := p.Min.Value(); v < lo {
		p.Min = metricdata.NewExtrema(v)
	}
	if hi, _ := p.Max.Value(); v > hi {
		p.Max = metricdata.NewExtrema(v)
	}
}

// sessionMetricAttrs are mcp.client.session.duration's attributes: the
// protocol version, the transport and the server, and error.type
// "unsealed" when the recording ended without its seal.
func sessionMetricAttrs(h *transcript.Header, version string, sealed bool) attribute.Set {
	var attrs []attribute.KeyValue
	if version != "" {
		attrs = append(attrs, attribute.String(attrMCPProtocol, escapeTerminal(version)))
	}
	switch h.Server.Transport {
	case transcript.TransportStdio:
		attrs = append(attrs, attribute.String(attrNetTransport, "pipe"))
	case transcript.TransportHTTP:
		attrs = append(attrs, attribute.String(attrNetTransport, "tcp"))
		attrs = append(attrs, serverAttrs(h.Server)...)
	}
	if !sealed {
		attrs = append(attrs, attribute.String(attrErrorType, "unsealed"))
	}
	return attribute.NewSet(attrs...)
}

// bundleMetrics are a bundle's data points, delta temporality, every time
// from the bundle: per attempt with a known duration, a point of its
// attribute set whose window runs from the previous point of that set (the
// session's start for the first) to the attempt's end, so the points of a
// stream never overlap; and the session's point, from its start to its end.
func bundleMetrics(b *inspect.Bundle, recs []inspect.Record) (op, sess []metricdata.HistogramDataPoint[float64]) {
	type done struct {
		set      attribute.Set
		end      time.Time
		seq      int64
		duration float64
	}
	var ends []done
	for _, r := range recs {
		if r.DurationMs == nil {
			continue
		}
		_, attrs, _, _ := spanOf(b, r)
		start := time.UnixMilli(b.Attempt(r.AttemptID).AtMs)
		d := time.Duration(*r.DurationMs) * time.Millisecond
		ends = append(ends, done{metricAttrs(attrs, operationMetricKeys), start.Add(d), r.Seq, d.Seconds()})
	}
	sort.SliceStable(ends, func(i, j int) bool {
		if !ends[i].end.Equal(ends[j].end) {
			return ends[i].end.Before(ends[j].end)
		}
		return ends[i].seq < ends[j].seq
	})
	sessStart := time.UnixMilli(b.Header.StartedAtMs)
	last := map[attribute.Distinct]int{} // a stream's latest point in op
	for _, e := range ends {
		k := e.set.Equivalent()
		if i, ok := last[k]; ok && op[i].Time.Equal(e.end) {
			addTo(&op[i], e.duration)
			continue
		}
		from := sessStart
		if i, ok := last[k]; ok {
			from = op[i].Time
		}
		if from.After(e.end) {
			from = e.end
		}
		last[k] = len(op)
		op = append(op, histPoint(e.set, from, e.end, e.duration))
	}
	version := ""
	if p := b.Protocol(); p != nil {
		version = p.Version
	}
	end := sessionEnd(b)
	sess = append(sess, histPoint(sessionMetricAttrs(b.Header, version, b.Seal != nil), sessStart, end, max(end.Sub(sessStart), 0).Seconds()))
	return op, sess
}

// metricsOf wraps data points as the two histograms, in at most
// metricBatch points per ResourceMetrics.
func metricsOf(res *resource.Resource, op, sess []metricdata.HistogramDataPoint[float64]) []*metricdata.ResourceMetrics {
	var out []*metricdata.ResourceMetrics
	for len(op) > 0 || len(sess) > 0 {
		n := min(len(op), metricBatch)
		var ms []metricdata.Metrics
		if n > 0 {
			ms = append(ms, histogram(metricOperation, op[:n]))
			op = op[n:]
		}
		if len(op) == 0 && len(sess) > 0 {
			ms = append(ms, histogram(metricSession, sess))
			sess = nil
		}
		out = append(out, &metricdata.ResourceMetrics{Resource: res,
			ScopeMetrics: []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: metricScope}, Metrics: ms}}})
	}
	return out
}

func histogram(name string, points []metricdata.HistogramDataPoint[float64]) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Description: metricDescriptions[name], Unit: "s",
		Data: metricdata.Histogram[float64]{Temporality: metricdata.DeltaTemporality, DataPoints: points}}
}

// exportMetrics sends a bundle's data points and returns how many.
func exportMetrics(ctx context.Context, b *inspect.Bundle, recs []inspect.Record, o *exportOptions) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	exp, err := otlpMetricExporter(ctx, o.metricsProtocol, o.metricsEndpoint, o.timeout)
	if err != nil {
		return 0, err
	}
	defer exp.Shutdown(context.WithoutCancel(ctx))
	// The bundle is the writer of its streams: its execution scope in the
	// resource keeps two sessions' points of one tool apart.
	res := resource.NewSchemaless(attribute.String("service.name", "tracectl"),
		attribute.String("tracectl.producer", escapeTerminal(b.Header.Producer.Name+" "+b.Header.Producer.Version)),
		attribute.String("tracectl.server", escapeTerminal(b.Header.Server.Name)),
		attribute.String(attrScope, escapeTerminal(b.Header.ExecutionScope)))
	op, sess := bundleMetrics(b, recs)
	n := len(op) + len(sess)
	for _, rm := range metricsOf(res, op, sess) {
		if err := exp.Export(ctx, rm); err != nil {
			return 0, err
		}
	}
	return n, nil
}
