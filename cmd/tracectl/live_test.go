//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/tracectl/tracectl/internal/mcptest"
)

// TestWrapLiveSpans: wrap --otlp-endpoint sends each call's span while the
// session records and the session's at the seal, to a real OTLP/HTTP
// receiver; the ids are the ones tracectl export sends for the same
// bundle afterwards, so a backend holds each span once.
func TestWrapLiveSpans(t *testing.T) {
	k := newKit(t)
	srv := mcptest.Build(t, "sdkserver")
	rcv := &otlpReceiver{}
	col := httptest.NewServer(rcv)
	defer col.Close()
	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--otlp-endpoint", col.URL, srv)
	echoCalls(t, w.in, bufio.NewReader(outR), 3)
	w.in.Close()
	w.wait(t)
	outW.Close()
	live := spanIDs(rcv)
	if len(live) != 4 {
		t.Fatalf("live: %d spans %v, want the session's and 3 calls'", len(live), live)
	}
	// The same bundle exported afterwards: the same trace and span ids.
	rcv2 := &otlpReceiver{}
	col2 := httptest.NewServer(rcv2)
	defer col2.Close()
	if _, stderr, code := runCLI(t, "export", "--format", "otlp", "--endpoint", col2.URL, bundle); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	if exported := spanIDs(rcv2); !slices.Equal(live, exported) {
		t.Fatalf("live spans %v\nexported spans %v: the ids differ", live, exported)
	}
}

// spanIDs lists a receiver's spans as "trace/span/parent name", sorted.
func spanIDs(rcv *otlpReceiver) []string {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var out []string
	for _, s := range rcv.spans {
		out = append(out, fmt.Sprintf("%x/%x/%x %s", s.TraceId, s.SpanId, s.ParentSpanId, s.Name))
	}
	slices.Sort(out)
	return out
}

// TestWrapLiveMetrics: wrap --otlp-endpoint --otlp-signals traces,metrics
// records each call's duration into the meter and sends the histograms to
// a real OTLP/HTTP receiver (at the session's end and at shutdown), with
// the attribute sets tracectl export --signals metrics gives the bundle.
func TestWrapLiveMetrics(t *testing.T) {
	if _, _, code := runCLI(t, "wrap", "--otlp-signals", "metrics", "--", "true"); code != exitUsage {
		t.Errorf("--otlp-signals without --otlp-endpoint: exit %d, want 2", code)
	}
	k := newKit(t)
	srv := mcptest.Build(t, "sdkserver")
	rcv := &otlpReceiver{}
	col := httptest.NewServer(rcv)
	defer col.Close()
	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--otlp-endpoint", col.URL, "--otlp-signals", "traces,metrics", srv)
	echoCalls(t, w.in, bufio.NewReader(outR), 3)
	w.in.Close()
	w.wait(t)
	outW.Close()
	if n := len(spanIDs(rcv)); n != 4 {
		t.Errorf("live: %d spans, want 4", n)
	}
	// Cumulative points: the latest of each attribute set holds every
	// measurement so far.
	live := latestCounts(rcv.metrics)
	rcv2 := &otlpReceiver{}
	col2 := httptest.NewServer(rcv2)
	defer col2.Close()
	if _, stderr, code := runCLI(t, "export", "--format", "otlp", "--signals", "metrics", "--endpoint", col2.URL, bundle); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	exported := map[string]uint64{}
	for _, m := range rcv2.metrics {
		for _, p := range m.GetHistogram().GetDataPoints() {
			exported[m.Name+" "+fmt.Sprint(pointAttrs(p))] += p.Count
		}
	}
	if fmt.Sprint(live) != fmt.Sprint(exported) {
		t.Fatalf("live metrics %v\nexported metrics %v", live, exported)
	}
	var calls, sessions uint64
	for k, n := range live {
		switch {
		case strings.HasPrefix(k, "mcp.client.operation.duration map[gen_ai.operation.name:execute_tool gen_ai.tool.name:echo mcp.method.name:tools/call mcp.protocol.version:"):
			calls += n
		case strings.HasPrefix(k, "mcp.client.session.duration "):
			sessions += n
		}
	}
	if len(live) != 2 || calls != 3 || sessions != 1 {
		t.Errorf("live metrics %v, want 3 echo calls (one attribute set) and a session", live)
	}
}

// latestCounts is, per metric and attribute set, the count of its latest
// cumulative data point.
func latestCounts(ms []receivedMetric) map[string]uint64 {
	out, at := map[string]uint64{}, map[string]uint64{}
	for _, m := range ms {
		h := m.GetHistogram()
		if h == nil || h.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
			continue
		}
		for _, p := range h.DataPoints {
			k := m.Name + " " + fmt.Sprint(pointAttrs(p))
			if p.TimeUnixNano >= at[k] {
				out[k], at[k] = p.Count, p.TimeUnixNano
			}
		}
	}
	return out
}

// TestWrapLiveDeadCollector: with a collector that refuses connections or
// accepts and never answers, wrap answers every call, seals a bundle that
// verifies, exits 0, and says once, escaped, how many spans did not reach
// the collector; the SDK's own per-failure log lines never reach stderr.
// The hung collector holds every request until the test ends, so wrap's
// exit shows it stopped waiting on its own (within liveHung: live.go).
func TestWrapLiveDeadCollector(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	srv := mcptest.Build(t, "sdkserver")
	for _, c := range []struct{ name, endpoint string }{{"refused", refused}, {"hung", hung.URL}} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t)
			bundle := filepath.Join(k.dir, "run.trace")
			outR, outW := io.Pipe()
			w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--otlp-endpoint", c.endpoint,
				"--otlp-signals", "traces,metrics", srv)
			echoCalls(t, w.in, bufio.NewReader(outR), 3)
			w.in.Close()
			if code := w.wait(t); code != 0 {
				t.Fatalf("wrap exit %d:\n%s", code, w.stderr)
			}
			outW.Close()
			k.verified(t, bundle)
			stderr := w.stderr.String()
			if !strings.Contains(stderr, "tracectl: warning: live spans: 4 of 4 not delivered") {
				t.Errorf("stderr does not count the spans lost:\n%s", stderr)
			}
			for _, line := range strings.Split(stderr, "\n") {
				if !strings.HasPrefix(line, "tracectl: ") {
					t.Errorf("a line that is not tracectl's reached stderr (the SDK's log?): %q", line)
				}
			}
		})
	}
}

// TestOTLPEnvTimeout: the standard variables set the export timeout (the
// traces-specific one first, in milliseconds); a value that is not a whole
// number of milliseconds in range is refused, never ignored.
func TestOTLPEnvTimeout(t *testing.T) {
	for _, c := range []struct {
		traces, all string
		want        time.Duration
		bad         bool
	}{
		{"", "", 7 * time.Second, false},
		{"", "250", 250 * time.Millisecond, false},
		{"1500", "250", 1500 * time.Millisecond, false},
		{"", "2s", 0, true},
		{"0", "", 0, true},
		{"-5", "", 0, true},
		{"", "3600001", 0, true},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", c.traces)
		t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", c.all)
		got, err := otlpEnvTimeout(7 * time.Second)
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("traces %q, all %q: %v, %v; want %v (refused: %v)", c.traces, c.all, got, err, c.want, c.bad)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")
	if _, stderr, code := runCLI(t, "export", "--format", "otlp", "--endpoint", "http://127.0.0.1:9", "nonexistent.trace"); code != 2 || !strings.Contains(string(stderr), "OTEL_EXPORTER_OTLP_TIMEOUT") {
		t.Errorf("export with a bad timeout variable: exit %d, %s; want a usage error naming it", code, stderr)
	}
}

// signalling forwards to an OTLP receiver and signals each traces export
// it received.
type signalling struct {
	rcv    *otlpReceiver
	traces chan struct{}
}

func (s *signalling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.rcv.ServeHTTP(w, r)
	if r.URL.Path == "/v1/traces" {
		select {
		case s.traces <- struct{}{}:
		default:
		}
	}
}

// TestWrapLiveSpansWhileRunning: a call's span reaches the collector while
// wrap still runs (its client has not closed), with the batcher's delay
// from the standard variable OTEL_BSP_SCHEDULE_DELAY.
func TestWrapLiveSpansWhileRunning(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	k := newKit(t)
	srv := mcptest.Build(t, "sdkserver")
	sig := &signalling{rcv: &otlpReceiver{}, traces: make(chan struct{}, 1)}
	col := httptest.NewServer(sig)
	defer col.Close()
	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--otlp-endpoint", col.URL, srv)
	echoCalls(t, w.in, bufio.NewReader(outR), 1)
	for found := false; !found; {
		select {
		case <-sig.traces:
		case <-w.done:
			t.Fatalf("wrap exited before its client closed:\n%s", w.stderr)
		case <-time.After(20 * time.Second):
			t.Fatalf("no span reached the collector while wrap ran; got %v", spanIDs(sig.rcv))
		}
		for _, s := range spanIDs(sig.rcv) {
			found = found || strings.HasSuffix(s, " tools/call echo")
		}
	}
	select {
	case <-w.done:
		t.Fatal("wrap exited before its client closed")
	default:
	}
	w.in.Close()
	if code := w.wait(t); code != 0 {
		t.Fatalf("wrap exit %d:\n%s", code, w.stderr)
	}
	outW.Close()
	k.verified(t, bundle)
}

// echoCalls makes n echo calls (ids 1..n) one at a time through a wrap's
// stdin, each answered before the next.
func echoCalls(t *testing.T, in io.Writer, responses *bufio.Reader, n int) {
	t.Helper()
	for id := 1; id <= n; id++ {
		if _, err := io.WriteString(in, modernCall(id, "echo", fmt.Sprintf(`{"n":%d}`, id))); err != nil {
			t.Fatal(err)
		}
		if line, err := responses.ReadString('\n'); err != nil || !strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) {
			t.Fatalf("call %d: %q, %v", id, line, err)
		}
	}
}
