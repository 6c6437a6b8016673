package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// Live spans (wrap and proxy --otlp-endpoint): while a session records,
// each attempt's span is sent when its outcome is observed and the
// session's at the seal, with the ids `export --format otlp` gives the same
// bundle (otlp.go), so a later export of the bundle sends the same spans
// with the verification's attributes. The spans are telemetry: they are
// sent best effort (a full queue or a failing collector loses spans, never
// a recorded line), and the evidence is the bundle.

// liveOTLP is the process's span pipeline: one exporter and batcher for
// every bundle the process records.
type liveOTLP struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	warn   io.Writer
	once   sync.Once
}

// liveQueue is the lines a bundle's follower may lag behind the recorder
// before the tap drops them (Options.Lines).
const liveQueue = 4096

func newLiveOTLP(ctx context.Context, endpoint string, timeout time.Duration, warn io.Writer) (*liveOTLP, error) {
	exp, err := otlpExporter(ctx, &exportOptions{endpoint: endpoint, protocol: otlpEnvProtocol(), timeout: timeout})
	if err != nil {
		return nil, err
	}
	l := &liveOTLP{warn: warn}
	res := resource.NewSchemaless(attribute.String("service.name", "tracectl"))
	l.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(&warnExporter{SpanExporter: exp, l: l}), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithIDGenerator(otlpIDs{}))
	l.tracer = l.tp.Tracer("github.com/tracectl/tracectl/cmd/tracectl")
	return l, nil
}

// checkOTLPEndpoint refuses an --otlp-endpoint that is not an http or
// https URL.
func checkOTLPEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr(fmt.Errorf("--otlp-endpoint %q: want an http or https URL", endpoint), "")
	}
	return nil
}

// startLive starts the live span pipeline for --otlp-endpoint, or returns
// nil when it is not given.
func startLive(ctx context.Context, endpoint string, warn io.Writer) (*liveOTLP, error) {
	if endpoint == "" {
		return nil, nil
	}
	l, err := newLiveOTLP(ctx, endpoint, 10*time.Second, warn)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--otlp-endpoint: %w", err), "")
	}
	return l, nil
}

// shutdown sends what is queued, for 15 s at most.
func (l *liveOTLP) shutdown(ctx context.Context) error {
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return l.tp.Shutdown(ctx)
}

// taps holds the stops of the bundles a proxy records (its Open and Seal
// are separate calls).
type taps struct {
	mu    sync.Mutex
	stops map[*producer.Recorder]func()
}

func (t *taps) add(r *producer.Recorder, stop func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stops == nil {
		t.stops = map[*producer.Recorder]func(){}
	}
	t.stops[r] = stop
}

// stop ends r's follower, once r is sealed or closed.
func (t *taps) stop(r *producer.Recorder) {
	t.mu.Lock()
	stop := t.stops[r]
	delete(t.stops, r)
	t.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// warnExporter reports the first export failure once: live spans never
// stop the recording.
type warnExporter struct {
	sdktrace.SpanExporter
	l *liveOTLP
}

func (w *warnExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := w.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		w.l.once.Do(func() {
			fmt.Fprintf(w.l.warn, "tracectl: warning: live spans: %s (recording goes on; tracectl export sends a bundle's spans later)\n", escapeTerminal(err.Error()))
		})
	}
	return err
}

// tap wires a recorder's lines to a follower: set opts.Lines, then call
// the returned stop once the recorder is sealed or closed (it waits for
// the follower to finish the bundle). A nil l taps nothing.
func (l *liveOTLP) tap(opts *producer.Options) (stop func()) {
	if l == nil {
		return func() {}
	}
	ch := make(chan []byte, liveQueue)
	opts.Lines = ch
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.follow(ch)
	}()
	return func() {
		close(ch)
		<-done
	}
}

// liveAttempt is an attempt whose span is not sent yet.
type liveAttempt struct {
	a      *transcript.Attempt
	digest string
	parent context.Context
}

// follow turns one bundle's lines into spans until lines is closed.
func (l *liveOTLP) follow(lines <-chan []byte) {
	var (
		h       *transcript.Header
		version string
		lastMs  int64
		open    = map[string]*liveAttempt{}
		order   []string
		sealed  *transcript.Seal
	)
	end := func(id string, atMs int64, errType string, code *int64) {
		la := open[id]
		if la == nil {
			return
		}
		delete(open, id)
		l.attemptSpan(h, version, la, atMs, errType, code)
	}
	for raw := range lines {
		ev, err := transcript.DecodeLine(raw)
		if err != nil {
			continue
		}
		switch e := ev.(type) {
		case *transcript.Header:
			h = e
			lastMs = e.StartedAtMs
		case *transcript.Protocol:
			version, lastMs = e.Version, e.AtMs
		case *transcript.Attempt:
			lastMs = e.AtMs
			if h == nil {
				continue
			}
			parent := sessionContext(h.ExecutionScope)
			if tp := e.Correlation.Traceparent; tp != nil && tp.Value != "" {
				carrier := propagation.MapCarrier{"traceparent": tp.Value}
				if ts := e.Correlation.Tracestate; ts != nil {
					carrier["tracestate"] = ts.Value
				}
				if p := (propagation.TraceContext{}).Extract(context.Background(), carrier); trace.SpanContextFromContext(p).IsValid() {
					parent = p
				}
			}
			open[e.AttemptID] = &liveAttempt{a: e, digest: canon.SHA256(raw), parent: parent}
			order = append(order, e.AttemptID)
		case *transcript.Observation:
			lastMs = e.AtMs
			switch e.Kind {
			case transcript.ObsResponse:
				switch {
				case e.ErrorCode != nil:
					end(e.AttemptID, e.AtMs, strconv.FormatInt(*e.ErrorCode, 10), e.ErrorCode)
				case e.IsError:
					end(e.AttemptID, e.AtMs, "tool_error", nil)
				default:
					end(e.AttemptID, e.AtMs, "", nil)
				}
			case transcript.ObsTimeout:
				end(e.AttemptID, e.AtMs, "timeout", nil)
			case transcript.ObsTransportFailure:
				end(e.AttemptID, e.AtMs, "transport_failure", nil)
			case transcript.ObsDenied:
				end(e.AttemptID, e.AtMs, "denied", nil)
			}
		case *transcript.Resolution:
			lastMs = e.AtMs
			end(e.AttemptID, e.AtMs, "unknown", nil)
		case *transcript.Seal:
			lastMs, sealed = e.AtMs, e
		}
	}
	if h == nil {
		return
	}
	for _, id := range order {
		end(id, lastMs, "in_flight", nil)
	}
	attrs := []attribute.KeyValue{attribute.String(attrScope, h.ExecutionScope), attribute.Int("tracectl.attempts", len(order))}
	if version != "" {
		attrs = append(attrs, attribute.String(attrMCPProtocol, escapeTerminal(version)))
	}
	name := "mcp session"
	if h.Server.Name != "" {
		name += " " + escapeTerminal(h.Server.Name)
	}
	endMs := lastMs
	if sealed != nil {
		endMs = sealed.AtMs
	}
	_, sess := l.tracer.Start(withSpanName(context.Background(), h.ExecutionScope, ""), name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(time.UnixMilli(h.StartedAtMs)), trace.WithAttributes(attrs...))
	sess.End(trace.WithTimestamp(time.UnixMilli(endMs)))
}

// attemptSpan sends one attempt's span, named and attributed as export's
// (spanOf) from what the lines say so far.
func (l *liveOTLP) attemptSpan(h *transcript.Header, version string, la *liveAttempt, endMs int64, errType string, code *int64) {
	a := la.a
	name := "tools/call"
	if a.Tool != "" {
		name += " " + escapeTerminal(a.Tool)
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrMCPMethod, "tools/call"),
		attribute.String(attrOperation, "execute_tool"),
		attribute.String(attrAttemptID, escapeTerminal(a.AttemptID)),
		attribute.String(attrLineDigest, la.digest),
		attribute.String(attrScope, h.ExecutionScope),
	}
	if a.Tool != "" {
		attrs = append(attrs, attribute.String(attrToolName, escapeTerminal(a.Tool)))
	}
	if v := a.Protocol.Value; v != "" {
		attrs = append(attrs, attribute.String(attrMCPProtocol, escapeTerminal(v)))
	} else if version != "" {
		attrs = append(attrs, attribute.String(attrMCPProtocol, escapeTerminal(version)))
	}
	switch h.Server.Transport {
	case transcript.TransportStdio:
		attrs = append(attrs, attribute.String(attrNetTransport, "pipe"))
	case transcript.TransportHTTP:
		attrs = append(attrs, attribute.String(attrNetTransport, "tcp"))
	}
	status, desc := codes.Unset, ""
	if errType != "" {
		attrs = append(attrs, attribute.String(attrErrorType, errType))
		status, desc = codes.Error, errType
	}
	if code != nil {
		attrs = append(attrs, attribute.String(attrRPCStatus, strconv.FormatInt(*code, 10)))
	}
	_, span := l.tracer.Start(withSpanName(la.parent, h.ExecutionScope, a.AttemptID), name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(time.UnixMilli(a.AtMs)), trace.WithAttributes(attrs...))
	span.SetStatus(status, desc)
	span.End(trace.WithTimestamp(time.UnixMilli(max(endMs, a.AtMs))))
}
