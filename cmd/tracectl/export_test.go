package main

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP traces and metrics endpoint: it decodes
// each request with the OTLP protobuf definitions and keeps every span and
// every metric (with its resource).
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	ctype   []string
	metrics []receivedMetric
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.URL.Path != "/v1/traces" && r.URL.Path != "/v1/metrics") || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.URL.Path == "/v1/metrics" {
		var req collectormetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		o.ctype = append(o.ctype, r.Header.Get("Content-Type"))
		o.metrics = append(o.metrics, receivedMetrics(&req)...)
		o.mu.Unlock()
		out, _ := proto.Marshal(&collectormetrics.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.ctype = append(o.ctype, r.Header.Get("Content-Type"))
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

func fixtureDir(t *testing.T, kind string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), kind+".trace")
	if err := writeFixture(dir, kind); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportOTLP sends the basic fixture to an OTLP/HTTP receiver: one
// span per attempt, named and attributed as the MCP semantic conventions
// say, parented by the traceparent the call carried, timed by the
// recorded times, and without arguments unless asked.
func TestExportOTLP(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	for _, withArgs := range []bool{false, true} {
		rcv := &otlpReceiver{}
		srv := httptest.NewServer(rcv)
		args := []string{"export", "--format", "otlp", "--endpoint", srv.URL, bundle}
		if withArgs {
			args = append(args, "--include-arguments")
		}
		_, stderr, code := runCLI(t, args...)
		srv.Close()
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if len(rcv.spans) != 7 {
			t.Fatalf("got %d spans, want 7 (the session's and one per attempt)", len(rcv.spans))
		}
		if rcv.ctype[0] != "application/x-protobuf" {
			t.Errorf("content type %q, want protobuf", rcv.ctype[0])
		}
		byID := map[string]*tracepb.Span{}
		var session *tracepb.Span
		for _, s := range rcv.spans {
			if id, ok := attrs(s)["tracectl.attempt_id"]; ok {
				byID[id] = s
			} else {
				session = s
			}
		}
		// The session is the trace's root: its span spans the recording.
		if session == nil || len(session.ParentSpanId) != 0 || !strings.HasPrefix(session.Name, "mcp session") ||
			attrs(session)["tracectl.execution_scope"] == "" || session.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
			t.Fatalf("session span %v", session)
		}
		want := map[string]struct{ name, errType string }{
			"a1": {"tools/call echo", ""}, "a2": {"tools/call add", "tool_error"}, "a3": {"tools/call nosuch", "-32602"},
			"a4": {"tools/call slow", "timeout"}, "a5": {"tools/call slow", ""}, "a6": {"tools/call echo", "transport_failure"},
		}
		for id, w := range want {
			s := byID[id]
			if s == nil {
				t.Fatalf("no span for attempt %s", id)
			}
			a := attrs(s)
			if s.Name != w.name || a["mcp.method.name"] != "tools/call" || a["gen_ai.tool.name"] != w.name[len("tools/call "):] ||
				a["gen_ai.operation.name"] != "execute_tool" || a["error.type"] != w.errType || a["network.transport"] != "pipe" ||
				a["mcp.protocol.version"] != "2025-11-25" || a["jsonrpc.request.id"] == "" || len(a["tracectl.line_digest"]) != 71 {
				t.Errorf("%s: name %q attrs %v", id, s.Name, a)
			}
			if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("%s: kind %v", id, s.Kind)
			}
			_, hasArgs := a["gen_ai.tool.call.arguments"]
			if hasArgs != withArgs {
				t.Errorf("%s: arguments exported %v with --include-arguments %v", id, hasArgs, withArgs)
			}
			if (w.errType != "") != (s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR) {
				t.Errorf("%s: status %v", id, s.Status)
			}
		}
		if withArgs {
			if got := attrs(byID["a1"])["gen_ai.tool.call.arguments"]; got != `{"message":"hello"}` {
				t.Errorf("a1 arguments %q", got)
			}
		}
		// a1 and a4 carried traceparents: their parent is the caller's span.
		for id, tp := range map[string][2]string{
			"a1": {"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
			"a4": {"4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331"},
		} {
			s := byID[id]
			if hex.EncodeToString(s.TraceId) != tp[0] || hex.EncodeToString(s.ParentSpanId) != tp[1] {
				t.Errorf("%s: trace %x parent %x, want %s %s", id, s.TraceId, s.ParentSpanId, tp[0], tp[1])
			}
		}
		// a2 carried none: it is the session's child, in the session's trace.
		if a2 := byID["a2"]; !bytes.Equal(a2.ParentSpanId, session.SpanId) || !bytes.Equal(a2.TraceId, session.TraceId) {
			t.Errorf("a2: trace %x parent %x, want the session's %x %x", a2.TraceId, a2.ParentSpanId, session.TraceId, session.SpanId)
		}
		// a1 keeps its caller's parent and links to the session.
		if l := byID["a1"].Links; len(l) != 1 || !bytes.Equal(l[0].SpanId, session.SpanId) {
			t.Errorf("a1 links %v, want the session's span", l)
		}
		// The retry links to the span of the attempt it retries.
		if l := byID["a5"].Links; len(l) != 1 || !bytes.Equal(l[0].SpanId, byID["a4"].SpanId) {
			t.Errorf("a5 links %v, want a4's span", l)
		}
		// Recorded times: a1 at 11:58:00.035 for 7 ms.
		s := byID["a1"]
		if start := fixtureStart.Add(35e6).UnixNano(); s.StartTimeUnixNano != uint64(start) || s.EndTimeUnixNano != uint64(start+7e6) {
			t.Errorf("a1 times %d..%d", s.StartTimeUnixNano, s.EndTimeUnixNano)
		}
	}
}

// Exporting a bundle twice sends the same trace and span ids: they are
// derived from the bundle, so a backend that keys spans by id holds each
// once. The standard OTEL_EXPORTER_OTLP_ENDPOINT names the collector when
// --endpoint is not given.
func TestExportOTLPIdempotent(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	var sets [2][]string
	for i := range sets {
		rcv := &otlpReceiver{}
		srv := httptest.NewServer(rcv)
		args := []string{"export", "--format", "otlp", "--endpoint", srv.URL, bundle}
		if i == 1 {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			args = []string{"export", "--format", "otlp", bundle}
		}
		_, stderr, code := runCLI(t, args...)
		srv.Close()
		if code != 0 {
			t.Fatalf("export %d: exit %d: %s", i, code, stderr)
		}
		for _, s := range rcv.spans {
			sets[i] = append(sets[i], fmt.Sprintf("%x/%x/%x %s", s.TraceId, s.SpanId, s.ParentSpanId, s.Name))
		}
		slices.Sort(sets[i])
	}
	if len(sets[0]) != 7 || !slices.Equal(sets[0], sets[1]) {
		t.Fatalf("two exports of one bundle sent different ids:\n%v\n%v", sets[0], sets[1])
	}
}

// TestExportOTLPUnreachable: a collector that refuses is an error, not a
// silent success.
func TestExportOTLPUnreachable(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	_, stderr, code := runCLI(t, "export", "--format", "otlp", "--endpoint", srv.URL, bundle)
	if code == 0 || !bytes.Contains(stderr, []byte("otlp export")) {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}

// TestExportCSVRoundTrip: tool names with commas, quotes, CR LF, newlines
// and escapes come back through encoding/csv as the text output shows
// them: the same characters, with controls as Go escapes.
func TestExportCSVRoundTrip(t *testing.T) {
	bundle := fixtureDir(t, "hostile")
	out := filepath.Join(t.TempDir(), "calls.csv")
	if _, stderr, code := runCLI(t, "export", "--format", "csv", "--include-arguments", "--out", out, bundle); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data := readFileT(t, out)
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(hostileNames) {
		t.Fatalf("%d rows", len(recs))
	}
	col := slices.Index(recs[0], "tool")
	argCol := slices.Index(recs[0], "arguments")
	for i, name := range hostileNames {
		if got, want := recs[i+1][col], escapeTerminal(name); got != want {
			t.Errorf("row %d tool %q, want %q", i+1, got, want)
		}
		var args map[string]string
		if err := json.Unmarshal([]byte(recs[i+1][argCol]), &args); err != nil || args["q"] != name || !strings.Contains(args["html"], "onerror") {
			t.Errorf("row %d arguments %q (%v), want JSON whose q is %q", i+1, recs[i+1][argCol], err, name)
		}
	}
	// --out never overwrites.
	if _, _, code := runCLI(t, "export", "--format", "csv", "--out", out, bundle); code != exitUsage {
		t.Errorf("second export to the same file: exit %d, want 2", code)
	}
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
