package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/transcript"
)

// OTLP export: a bundle is one trace. Its ids are derived from the bundle
// (the execution scope, and each attempt's id), never random: exporting a
// bundle twice sends the same trace and span ids, so a backend that keys
// spans by id holds each once.

// spanKey carries, in a span's start context, what its ids are derived
// from: the bundle's execution scope, and "" for the session or the
// attempt id.
type spanKey struct{ scope, name string }

func withSpanName(ctx context.Context, scope, name string) context.Context {
	return context.WithValue(ctx, spanKey{}, spanKey{scope, name})
}

// otlpIDs is the SDK's IDGenerator: every id from the span's spanKey.
type otlpIDs struct{}

// NewIDs is the id of a root span: the session's, in the bundle's trace.
func (otlpIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	k, _ := ctx.Value(spanKey{}).(spanKey)
	return traceIDOf(k.scope), spanIDOf(k.scope, k.name)
}

// NewSpanID is the id of a span under a parent (the session's, or the
// caller's traceparent): derived from the bundle and the attempt.
func (otlpIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	k, _ := ctx.Value(spanKey{}).(spanKey)
	return spanIDOf(k.scope, k.name)
}

func spanIDOf(scope, name string) trace.SpanID {
	sum := sha256.Sum256([]byte("tracectl/otlp/span\x00" + scope + "\x00" + name))
	var id trace.SpanID
	copy(id[:], sum[:])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

func traceIDOf(scope string) trace.TraceID {
	sum := sha256.Sum256([]byte("tracectl/otlp/trace\x00" + scope))
	var id trace.TraceID
	copy(id[:], sum[:])
	if !id.IsValid() {
		id[15] = 1
	}
	return id
}

// sessionContext is a context whose span is the session's of a bundle
// (its ids only): what an attempt's span is started under before the
// session's own span is sent, at the seal.
func sessionContext(scope string) context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceIDOf(scope), SpanID: spanIDOf(scope, ""), TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// sessionSpanName names the session's span for the server it recorded.
func sessionSpanName(b *inspect.Bundle) string {
	if n := b.Header.Server.Name; n != "" {
		return "mcp session " + escapeTerminal(n)
	}
	return "mcp session"
}

// sessionAttrs are the session span's attributes: the bundle's identity,
// its verification, the server and where it was reached.
func sessionAttrs(b *inspect.Bundle) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String(attrScope, b.Header.ExecutionScope),
		attribute.String(attrVerification, verificationOf(b)),
		attribute.Int("tracectl.attempts", len(b.Attempts)),
	}
	if p := b.Protocol(); p != nil && p.Version != "" {
		attrs = append(attrs, attribute.String(attrMCPProtocol, escapeTerminal(p.Version)))
	}
	if b.Report != nil && b.Report.Signer != "" {
		attrs = append(attrs, attribute.String("tracectl.signer", b.Report.Signer))
	}
	return append(attrs, serverAttrs(b.Header.Server)...)
}

// serverAttrs are server.address and server.port of a Streamable HTTP
// server, as recorded (credential-like path segments were redacted before
// recording; only the host and port are exported).
func serverAttrs(srv transcript.Server) []attribute.KeyValue {
	if srv.Transport != transcript.TransportHTTP || srv.URL == "" {
		return nil
	}
	u, err := url.Parse(srv.URL)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	attrs := []attribute.KeyValue{attribute.String("server.address", escapeTerminal(host))}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", n))
	}
	return attrs
}

// sessionEnd is when the session's span ends: the seal, else the last line.
func sessionEnd(b *inspect.Bundle) time.Time {
	if b.Seal != nil {
		return time.UnixMilli(b.Seal.AtMs)
	}
	return time.UnixMilli(max(b.LastMs, b.Header.StartedAtMs))
}

// otlpEnvEndpoint is the collector the standard OpenTelemetry variables
// name when --endpoint is not given: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// (the traces URL itself), else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL).
func otlpEnvEndpoint() string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// otlpEnvProtocol is the protocol the standard variables name, else
// http/protobuf.
func otlpEnvProtocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "http/protobuf"
}

// otlpEnvTimeout is the export timeout the standard variables name
// (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT: a
// whole number of milliseconds), else def.
func otlpEnvTimeout(def time.Duration) (time.Duration, error) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
		v := os.Getenv(k)
		if v == "" {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > 3_600_000 {
			return 0, fmt.Errorf("%s=%q: want milliseconds, 1 to 3600000", k, v)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	return def, nil
}

// otlpExporter is the span exporter for o's protocol and endpoint: OTLP
// over HTTP with protobuf, or over gRPC (an http:// endpoint is sent in
// clear, https:// over TLS). Retries are off: a failure is reported, and
// the export can be run again (the ids are the same).
func otlpExporter(ctx context.Context, o *exportOptions) (sdktrace.SpanExporter, error) {
	if o.protocol == "grpc" {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(o.endpoint),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithTimeout(o.timeout))
	}
	return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(signalURL(o.endpoint, "traces")),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}), otlptracehttp.WithTimeout(o.timeout))
}
