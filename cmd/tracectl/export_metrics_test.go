package main

import (
	"fmt"
	"math"
	"net"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receivedMetric is a metric as a receiver decoded it, with its resource.
type receivedMetric struct {
	resource map[string]string
	*metricspb.Metric
}

func receivedMetrics(req *collectormetrics.ExportMetricsServiceRequest) []receivedMetric {
	var out []receivedMetric
	for _, rm := range req.ResourceMetrics {
		res := map[string]string{}
		for _, kv := range rm.Resource.GetAttributes() {
			res[kv.Key] = kv.Value.GetStringValue()
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				out = append(out, receivedMetric{res, m})
			}
		}
	}
	return out
}

// points lists the histogram data points of the metrics named name, and
// checks each metric's unit and temporality on the way.
func points(t *testing.T, ms []receivedMetric, name string) []*metricspb.HistogramDataPoint {
	t.Helper()
	var out []*metricspb.HistogramDataPoint
	for _, m := range ms {
		if m.Name != name {
			continue
		}
		h := m.GetHistogram()
		if h == nil || m.Unit != "s" || h.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA {
			t.Errorf("%s: unit %q, data %T, temporality %v; want a delta histogram in s", name, m.Unit, m.Data, h.GetAggregationTemporality())
			continue
		}
		out = append(out, h.DataPoints...)
	}
	return out
}

// pointAttrs are a data point's attributes as text (server.port too).
func pointAttrs(p *metricspb.HistogramDataPoint) map[string]string {
	m := map[string]string{}
	for _, kv := range p.Attributes {
		m[kv.Key] = kv.Value.GetStringValue()
		if m[kv.Key] == "" {
			m[kv.Key] = fmt.Sprint(kv.Value.GetIntValue())
		}
	}
	return m
}

// checkBundleMetrics checks the basic fixture's metrics against its spans:
// one operation point per attempt, attributed as the convention lists
// (and nothing of higher cardinality), timed and valued as the attempt's
// span; one session point timed as the session's span.
func checkBundleMetrics(t *testing.T, ms []receivedMetric, spans []*tracepb.Span) {
	t.Helper()
	bySpan := map[string]*tracepb.Span{} // tool + error.type
	var session *tracepb.Span
	for _, s := range spans {
		a := attrs(s)
		if _, ok := a["tracectl.attempt_id"]; !ok {
			session = s
			continue
		}
		bySpan[a["gen_ai.tool.name"]+"|"+a["error.type"]] = s
	}
	op := points(t, ms, "mcp.client.operation.duration")
	if len(op) != 6 || len(bySpan) != 6 || session == nil {
		t.Fatalf("%d operation points and %d attempt spans, want 6 of each and the session's span", len(op), len(bySpan))
	}
	wantBounds := []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
	for _, p := range op {
		a := pointAttrs(p)
		s := bySpan[a["gen_ai.tool.name"]+"|"+a["error.type"]]
		if s == nil {
			t.Errorf("point %v matches no attempt's span", a)
			continue
		}
		sa := attrs(s)
		want := map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": sa["gen_ai.tool.name"],
			"mcp.protocol.version": "2025-11-25", "network.transport": "pipe"}
		if e := sa["error.type"]; e != "" {
			want["error.type"] = e
		}
		if c := sa["rpc.response.status_code"]; c != "" {
			want["rpc.response.status_code"] = c
		}
		if fmt.Sprint(a) != fmt.Sprint(want) {
			t.Errorf("%s: attributes %v, want %v", s.Name, a, want)
		}
		secs := float64(s.EndTimeUnixNano-s.StartTimeUnixNano) / 1e9
		if p.Count != 1 || math.Abs(p.GetSum()-secs) > 1e-9 || p.GetMin() != p.GetMax() || p.TimeUnixNano != s.EndTimeUnixNano ||
			p.StartTimeUnixNano < session.StartTimeUnixNano || p.StartTimeUnixNano > p.TimeUnixNano {
			t.Errorf("%s: count %d sum %v at %d..%d, want 1 of %v ending at %d", s.Name, p.Count, p.GetSum(), p.StartTimeUnixNano, p.TimeUnixNano, secs, s.EndTimeUnixNano)
		}
		if !slices.Equal(p.ExplicitBounds, wantBounds) || len(p.BucketCounts) != len(wantBounds)+1 {
			t.Fatalf("bounds %v (%d buckets), want the convention's %v", p.ExplicitBounds, len(p.BucketCounts), wantBounds)
		}
		if i := sort.SearchFloat64s(wantBounds, secs); p.BucketCounts[i] != 1 {
			t.Errorf("%s: buckets %v, want the one of %v s", s.Name, p.BucketCounts, secs)
		}
	}
	sess := points(t, ms, "mcp.client.session.duration")
	if len(sess) != 1 {
		t.Fatalf("%d session points, want 1", len(sess))
	}
	p := sess[0]
	if a := pointAttrs(p); fmt.Sprint(a) != fmt.Sprint(map[string]string{"mcp.protocol.version": "2025-11-25", "network.transport": "pipe"}) {
		t.Errorf("session attributes %v", a)
	}
	if p.Count != 1 || p.StartTimeUnixNano != session.StartTimeUnixNano || p.TimeUnixNano != session.EndTimeUnixNano ||
		math.Abs(p.GetSum()-float64(session.EndTimeUnixNano-session.StartTimeUnixNano)/1e9) > 1e-9 {
		t.Errorf("session point %v, want the session span's times", p)
	}
	for _, m := range ms {
		if m.resource["service.name"] != "tracectl" || m.resource["tracectl.execution_scope"] != attrs(session)["tracectl.execution_scope"] {
			t.Errorf("resource %v, want the bundle's execution scope", m.resource)
		}
	}
}

// TestExportOTLPMetrics: --signals traces,metrics sends the spans and the
// convention's two histograms to a real OTLP/HTTP receiver; --signals
// traces (the default) sends no metrics and --signals metrics no spans;
// a second export sends the same data points.
func TestExportOTLPMetrics(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	export := func(signals ...string) *otlpReceiver {
		t.Helper()
		rcv := &otlpReceiver{}
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		args := []string{"export", "--format", "otlp", "--endpoint", srv.URL}
		for _, s := range signals {
			args = append(args, "--signals", s)
		}
		if _, stderr, code := runCLI(t, append(args, bundle)...); code != 0 {
			t.Fatalf("--signals %v: exit %d: %s", signals, code, stderr)
		}
		return rcv
	}
	both := export("traces,metrics")
	checkBundleMetrics(t, both.metrics, both.spans)
	if len(both.spans) != 7 {
		t.Errorf("%d spans, want 7", len(both.spans))
	}
	if def := export(); len(def.metrics) != 0 || len(def.spans) != 7 {
		t.Errorf("no --signals: %d metrics %d spans, want the spans only", len(def.metrics), len(def.spans))
	}
	if tr := export("traces"); len(tr.metrics) != 0 {
		t.Errorf("--signals traces sent %d metrics", len(tr.metrics))
	}
	m := export("metrics")
	if len(m.spans) != 0 {
		t.Errorf("--signals metrics sent %d spans", len(m.spans))
	}
	// The same bundle, the same data: every point's bytes are equal.
	if a, b := pointBytes(t, both.metrics), pointBytes(t, m.metrics); len(a) != 7 || !slices.Equal(a, b) {
		t.Errorf("two exports sent different points:\n%v\n%v", a, b)
	}
	for _, bad := range []string{"logs", "traces,", ""} {
		if _, _, code := runCLI(t, "export", "--format", "otlp", "--endpoint", "http://127.0.0.1:1", "--signals", bad, bundle); code != exitUsage {
			t.Errorf("--signals %q: exit %d, want 2", bad, code)
		}
	}
	if _, _, code := runCLI(t, "export", "--format", "otlp", "--endpoint", "http://127.0.0.1:1/collect", "--signals", "traces,metrics", bundle); code != exitUsage {
		t.Errorf("one custom URL for both signals: exit %d, want 2", code)
	}
}

func pointBytes(t *testing.T, ms []receivedMetric) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		for _, p := range m.GetHistogram().GetDataPoints() {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Name+" "+fmt.Sprintf("%x", b))
		}
	}
	slices.Sort(out)
	return out
}

// The standard variables name the metrics collector when --endpoint is
// not given: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (the metrics URL) over
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL), whose traces still go there.
func TestExportOTLPMetricsEnv(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	base, metrics := &otlpReceiver{}, &otlpReceiver{}
	baseSrv, metricsSrv := httptest.NewServer(base), httptest.NewServer(metrics)
	defer baseSrv.Close()
	defer metricsSrv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", baseSrv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", metricsSrv.URL+"/v1/metrics")
	if _, stderr, code := runCLI(t, "export", "--format", "otlp", "--signals", "traces,metrics", bundle); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(base.spans) != 7 || len(base.metrics) != 0 || len(metrics.spans) != 0 {
		t.Errorf("base collector: %d spans %d metrics; metrics collector %d spans", len(base.spans), len(base.metrics), len(metrics.spans))
	}
	checkBundleMetrics(t, metrics.metrics, base.spans)
}

// A collector that cannot be reached is a network failure (exit 5), for
// metrics as for spans.
func TestExportOTLPMetricsUnreachable(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		_, stderr, code := runCLI(t, "export", "--format", "otlp", "--protocol", protocol, "--timeout", "3s", "--signals", "metrics", "--endpoint", dead, bundle)
		if code != exitIO {
			t.Errorf("%s: exit %d, want %d: %s", protocol, code, exitIO, stderr)
		}
	}
}

// --protocol grpc sends the metrics to the collector's MetricsService, and
// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=grpc does for metrics alone.
func TestExportOTLPMetricsGRPC(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	for _, viaEnv := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		spans, metrics := &grpcReceiver{}, &grpcMetricsReceiver{}
		srv := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(srv, spans)
		collectormetrics.RegisterMetricsServiceServer(srv, metrics)
		go srv.Serve(ln)
		args := []string{"export", "--format", "otlp", "--protocol", "grpc", "--signals", "traces,metrics", "--endpoint", "http://" + ln.Addr().String(), bundle}
		if viaEnv {
			t.Setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")
			args = []string{"export", "--format", "otlp", "--signals", "metrics", "--endpoint", "http://" + ln.Addr().String(), bundle}
		}
		_, stderr, code := runCLI(t, args...)
		srv.Stop()
		if code != 0 {
			t.Fatalf("env %v: exit %d: %s", viaEnv, code, stderr)
		}
		if viaEnv {
			if len(spans.spans) != 0 || len(points(t, metrics.metrics, "mcp.client.operation.duration")) != 6 {
				t.Errorf("env: %d spans, metrics %v", len(spans.spans), metrics.metrics)
			}
			continue
		}
		checkBundleMetrics(t, metrics.metrics, spans.spans)
	}
}
