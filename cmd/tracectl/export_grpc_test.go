package main

import (
	"context"
	"net"
	"sync"
	"testing"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// grpcReceiver is an OTLP/gRPC trace receiver: the collector's own service
// definition, served by grpc-go.
type grpcReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (g *grpcReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			g.spans = append(g.spans, ss.Spans...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// grpcMetricsReceiver is an OTLP/gRPC metrics receiver: the collector's
// MetricsService, served by grpc-go.
type grpcMetricsReceiver struct {
	collectormetrics.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	metrics []receivedMetric
}

func (g *grpcMetricsReceiver) Export(_ context.Context, req *collectormetrics.ExportMetricsServiceRequest) (*collectormetrics.ExportMetricsServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.metrics = append(g.metrics, receivedMetrics(req)...)
	return &collectormetrics.ExportMetricsServiceResponse{}, nil
}

// --protocol grpc (and OTEL_EXPORTER_OTLP_PROTOCOL=grpc) sends the same
// trace over OTLP/gRPC.
func TestExportOTLPGRPC(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	for _, viaEnv := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rcv := &grpcReceiver{}
		srv := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(srv, rcv)
		go srv.Serve(ln)
		args := []string{"export", "--format", "otlp", "--protocol", "grpc", "--endpoint", "http://" + ln.Addr().String(), bundle}
		if viaEnv {
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
			args = []string{"export", "--format", "otlp", "--endpoint", "http://" + ln.Addr().String(), bundle}
		}
		_, stderr, code := runCLI(t, args...)
		srv.Stop()
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		rcv.mu.Lock()
		n, names := len(rcv.spans), map[string]int{}
		for _, s := range rcv.spans {
			names[s.Name]++
		}
		rcv.mu.Unlock()
		if n != 7 || names["tools/call echo"] != 2 || names["tools/call slow"] != 2 {
			t.Fatalf("env %v: received %d spans %v, want the session's and 6 attempts", viaEnv, n, names)
		}
	}
	if _, stderr, code := runCLI(t, "export", "--format", "otlp", "--protocol", "carrier-pigeon", "--endpoint", "http://127.0.0.1:1", bundle); code != 2 {
		t.Fatalf("--protocol carrier-pigeon: exit %d, want 2: %s", code, stderr)
	}
}
