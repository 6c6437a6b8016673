package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
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

// Live metrics (--otlp-signals metrics): each attempt's duration is
// recorded into the meter when its outcome is observed and the session's
// at the seal; the SDK's periodic reader sends them (every 60 s, or
// OTEL_METRIC_EXPORT_INTERVAL), a flush at each session's end, and the
// rest at shutdown. Recording is an in-memory aggregation bounded by
// metricCardinality: it never waits for the collector.

// liveOTLP is the process's telemetry pipeline: one exporter and batcher
// for every bundle the process records, per signal asked for.
type liveOTLP struct {
	tp     *sdktrace.TracerProvider // nil: no live spans
	texp   sdktrace.SpanExporter    // tp's exporter
	tracer trace.Tracer
	mp     *sdkmetric.MeterProvider // nil: no live metrics
	opDur  metric.Float64Histogram
	sesDur metric.Float64Histogram
	// flushing is set while a session end's flush runs: at most one at a
	// time (a flush it skips is sent by the next, periodic or final).
	flushing atomic.Bool
	warn     io.Writer
	once     sync.Once
	monce    sync.Once
	stats    liveStats
}

// liveStats counts what live export delivered and lost, for the warning
// at shutdown.
type liveStats struct {
	linesDropped atomic.Int64 // lines the tap's buffer could not hold
	spansEnded   atomic.Int64 // spans handed to the batcher
	traces       exportHealth // spans
	metrics      exportHealth // metric batches
}

// liveQueue is the lines a bundle's follower may lag behind the recorder
// before the tap drops them (Options.Lines), and liveEvery how long the
// follower sleeps between takes: 16,384 lines in 50 ms is 327,680 lines a
// second, over six times what one recorder writes with durability none
// (BenchmarkLiveExport: about 48,000).
const (
	liveQueue = 16384
	liveEvery = 50 * time.Millisecond
)

func newLiveOTLP(ctx context.Context, endpoint string, signals signalSet, timeout time.Duration, warn io.Writer) (*liveOTLP, error) {
	l := &liveOTLP{warn: warn}
	// The SDK reports export errors to a global handler that logs each,
	// unescaped; the exporters here warn once, escaped, and count.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	res := resource.NewSchemaless(attribute.String("service.name", "tracectl"))
	if signals.traces {
		exp, err := otlpExporter(ctx, &exportOptions{endpoint: endpoint, protocol: otlpEnvProtocol(), timeout: timeout})
		if err != nil {
			return nil, err
		}
		l.texp = exp
		l.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(&warnExporter{SpanExporter: exp, l: l}), sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithIDGenerator(otlpIDs{}))
		l.tracer = l.tp.Tracer("github.com/tracectl/tracectl/cmd/tracectl")
	}
	if signals.metrics {
		exp, err := otlpMetricExporter(ctx, otlpEnvMetricsProtocol(), endpoint, timeout)
		if err != nil {
			return nil, err
		}
		l.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&warnMetricExporter{Exporter: exp, l: l})),
			sdkmetric.WithResource(res), sdkmetric.WithCardinalityLimit(metricCardinality))
		meter := l.mp.Meter(metricScope)
		hist := func(name string) metric.Float64Histogram {
			// A valid name and options: the SDK returns no error.
			h, _ := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(metricDescriptions[name]),
				metric.WithExplicitBucketBoundaries(metricBounds...))
			return h
		}
		l.opDur, l.sesDur = hist(metricOperation), hist(metricSession)
	}
	return l, nil
}

// checkOTLPEndpoint refuses an --otlp-endpoint that is not an http or
// https URL, and --otlp-signals that are not traces, metrics or both (or
// that are given without an endpoint).
func checkOTLPEndpoint(endpoint, signals string) error {
	if signals == "" {
		signals = "traces"
	}
	if _, err := parseSignals(signals); err != nil {
		return usageErr(fmt.Errorf("--otlp-signals: %w", err), "")
	}
	if endpoint == "" {
		if signals != "traces" {
			return usageErr(errors.New("--otlp-signals is for --otlp-endpoint"), "")
		}
		return nil
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr(fmt.Errorf("--otlp-endpoint %q: want an http or https URL", endpoint), "")
	}
	return nil
}

// startLive starts the live pipeline for --otlp-endpoint and the signals
// asked for, or returns nil when no endpoint is given.
func startLive(ctx context.Context, endpoint, signals string, warn io.Writer) (*liveOTLP, error) {
	if endpoint == "" {
		return nil, nil
	}
	if signals == "" {
		signals = "traces"
	}
	set, err := parseSignals(signals)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--otlp-signals: %w", err), "")
	}
	timeout, err := otlpEnvTimeout(10 * time.Second)
	if err != nil {
		return nil, usageErr(err, "")
	}
	l, err := newLiveOTLP(ctx, endpoint, set, timeout, warn)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--otlp-endpoint: %w", err), "")
	}
	return l, nil
}

// How long shutdown waits for a signal's collector: liveGrace for one
// whose last export succeeded; liveHung for one never heard from (and for
// an export under way, counted from when it began); liveGiveUp for one
// whose last export failed or whose export under way began more than
// liveHung ago. The span exporter is stopped after the wait, which
// interrupts an export still under way; what is still queued is dropped
// and counted. A dead collector so costs a session's end at most liveHung.
const (
	liveGrace  = 5 * time.Second
	liveHung   = time.Second
	liveGiveUp = 100 * time.Millisecond
)

// shutdown sends what is queued to a collector that answers, within the
// waits above, and warns about what live export did not deliver.
func (l *liveOTLP) shutdown(ctx context.Context) error {
	if l == nil {
		return nil
	}
	var errs []error
	if l.tp != nil {
		c, cancel := context.WithTimeout(ctx, l.stats.traces.grace(time.Now()))
		errs = append(errs, l.tp.Shutdown(c))
		cancel()
		_ = l.texp.Shutdown(ctx) // interrupts an export still under way
	}
	if l.mp != nil {
		c, cancel := context.WithTimeout(ctx, l.stats.metrics.grace(time.Now()))
		errs = append(errs, l.mp.Shutdown(c))
		cancel()
	}
	st := &l.stats
	if n := st.linesDropped.Load(); n > 0 {
		fmt.Fprintf(l.warn, "tracectl: warning: live export: %d transcript lines were not followed (the queue was full); the bundle holds them all\n", n)
	}
	if l.tp != nil {
		ended, sent := st.spansEnded.Load(), st.traces.sent.Load()
		if ended > sent {
			fmt.Fprintf(l.warn, "tracectl: warning: live spans: %d of %d not delivered; tracectl export --format otlp sends a bundle's spans, with the same ids\n", ended-sent, ended)
		}
	}
	return errors.Join(errs...)
}

// exportHealth is what one signal's exports did: the state shutdown reads
// to decide whether to wait.
type exportHealth struct {
	sent      atomic.Int64 // items a collector accepted
	failed    atomic.Int64 // items in a failed export
	exporting atomic.Int64 // when the export under way began (unix ns), 0: none
	down      atomic.Bool  // the last export failed
}

// export runs one export and records how it went.
func (h *exportHealth) export(n int, f func() error) error {
	h.exporting.Store(time.Now().UnixNano())
	err := f()
	h.exporting.Store(0)
	if err != nil {
		h.failed.Add(int64(n))
		h.down.Store(true)
		return err
	}
	h.sent.Add(int64(n))
	h.down.Store(false)
	return nil
}

// grace is how long a shutdown at now waits for this signal's collector.
func (h *exportHealth) grace(now time.Time) time.Duration {
	if h.down.Load() {
		return liveGiveUp
	}
	if t := h.exporting.Load(); t != 0 {
		if left := liveHung - now.Sub(time.Unix(0, t)); left > liveGiveUp {
			return left
		}
		return liveGiveUp
	}
	if h.sent.Load() == 0 {
		return liveHung
	}
	return liveGrace
}

// flush sends the meter's data in the background, once a session ended:
// the follower goes on, and a second session's end while it runs is left
// to the next export.
func (l *liveOTLP) flush() {
	if l.mp == nil || !l.flushing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer l.flushing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		l.mp.ForceFlush(ctx)
	}()
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
	err := w.l.stats.traces.export(len(spans), func() error { return w.SpanExporter.ExportSpans(ctx, spans) })
	if err != nil {
		w.l.once.Do(func() {
			fmt.Fprintf(w.l.warn, "tracectl: warning: live spans: %s (recording goes on; tracectl export sends a bundle's spans later)\n", escapeTerminal(err.Error()))
		})
	}
	return err
}

// warnMetricExporter reports the first metric export failure once.
type warnMetricExporter struct {
	sdkmetric.Exporter
	l *liveOTLP
}

func (w *warnMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := w.l.stats.metrics.export(1, func() error { return w.Exporter.Export(ctx, rm) })
	if err != nil {
		w.l.monce.Do(func() {
			fmt.Fprintf(w.l.warn, "tracectl: warning: live metrics: %s (recording goes on; tracectl export --signals metrics sends a bundle's metrics later)\n", escapeTerminal(err.Error()))
		})
	}
	return err
}

// tap wires a recorder's lines to a follower: set opts.Lines, then call
// the returned stop once the recorder is sealed or closed (it waits for
// the follower to finish the bundle). A nil l taps nothing.
//
// The follower is not woken per line: it sleeps for liveEvery, then takes
// every queued line at once. A send to the tap's buffer that finds no
// receiver waiting is a copy, where waking a parked receiver is a futex
// call on the recording goroutine for every line (BenchmarkLiveExport
// measured 1.39x the untapped recording before this). Lines the buffer
// cannot hold are dropped by the recorder and counted here from the gaps
// in seq.
func (l *liveOTLP) tap(opts *producer.Options) (stop func()) {
	if l == nil {
		return func() {}
	}
	ch := make(chan []byte, liveQueue)
	opts.Lines = ch
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.follow(ch, quit)
	}()
	return func() {
		close(ch)
		close(quit)
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
func (l *liveOTLP) follow(lines <-chan []byte, quit <-chan struct{}) {
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
	tick := time.NewTicker(liveEvery)
	defer tick.Stop()
	next := int64(-1) // the seq expected next; a gap is lines dropped
	take := func(raw []byte) {
		ev, err := transcript.DecodeLine(raw)
		if err != nil {
			return
		}
		seq := transcript.SeqOf(ev)
		if next >= 0 && seq > next {
			l.stats.linesDropped.Add(seq - next)
		}
		next = seq + 1
		switch e := ev.(type) {
		case *transcript.Header:
			h = e
			lastMs = e.StartedAtMs
		case *transcript.Protocol:
			version, lastMs = e.Version, e.AtMs
		case *transcript.Attempt:
			lastMs = e.AtMs
			if h == nil {
				return
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
	for open := true; open; {
		select {
		case <-tick.C:
		case <-quit:
		}
	drain:
		for {
			select {
			case raw, ok := <-lines:
				if !ok {
					open = false
					break drain
				}
				take(raw)
			default:
				break drain
			}
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
	if l.tracer != nil {
		_, sess := l.tracer.Start(withSpanName(context.Background(), h.ExecutionScope, ""), name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(time.UnixMilli(h.StartedAtMs)), trace.WithAttributes(attrs...))
		sess.End(trace.WithTimestamp(time.UnixMilli(endMs)))
		l.stats.spansEnded.Add(1)
	}
	if l.sesDur != nil {
		secs := float64(max(endMs-h.StartedAtMs, 0)) / 1000
		l.sesDur.Record(context.Background(), secs, metric.WithAttributeSet(sessionMetricAttrs(h, version, sealed != nil)))
		l.flush()
	}
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
	// An attempt still in flight at the end has no duration (export
	// records none for it either).
	if l.opDur != nil && errType != "in_flight" {
		secs := float64(max(endMs-a.AtMs, 0)) / 1000
		set := metricAttrs(append(attrs, serverAttrs(h.Server)...), operationMetricKeys)
		l.opDur.Record(context.Background(), secs, metric.WithAttributeSet(set))
	}
	if l.tracer == nil {
		return
	}
	_, span := l.tracer.Start(withSpanName(la.parent, h.ExecutionScope, a.AttemptID), name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(time.UnixMilli(a.AtMs)), trace.WithAttributes(attrs...))
	span.SetStatus(status, desc)
	span.End(trace.WithTimestamp(time.UnixMilli(max(endMs, a.AtMs))))
	l.stats.spansEnded.Add(1)
}
