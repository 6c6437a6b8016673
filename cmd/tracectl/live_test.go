//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	responses := bufio.NewReader(outR)
	for id := 1; id <= 3; id++ {
		if _, err := io.WriteString(w.in, modernCall(id, "echo", fmt.Sprintf(`{"n":%d}`, id))); err != nil {
			t.Fatal(err)
		}
		if line, err := responses.ReadString('\n'); err != nil || !strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) {
			t.Fatalf("call %d: %q, %v", id, line, err)
		}
	}
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
