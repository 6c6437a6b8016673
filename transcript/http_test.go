package transcript

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestHTTPLineValidation: an http line round-trips, and the format refuses
// a credential header's value, a rule outside a refusal, a refusal without
// its frame, and unsorted credential names.
func TestHTTPLineValidation(t *testing.T) {
	zero := int64(0)
	good := HTTPEvent{Type: typeHTTP, Seq: 3, AtMs: 1, Event: HTTPRequest, Exchange: 1, Method: "POST", Path: "/mcp",
		Headers: map[string]string{"mcp-method": "tools/call"}, Credentials: []string{"authorization", "cookie"}, Frame: &zero}
	line, err := Encode(&good)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := DecodeLine(line)
	if err != nil {
		t.Fatalf("a valid http line refused: %v\n%s", err, line)
	}
	if err := good.Check(); err != nil {
		t.Fatalf("Check refuses a valid http line: %v", err)
	}
	if got := ev.(*HTTPEvent); got.Headers["mcp-method"] != "tools/call" || len(got.Credentials) != 2 {
		t.Fatalf("round trip: %+v", got)
	}
	for name, mod := range map[string]func(*HTTPEvent){
		"credential by value": func(e *HTTPEvent) { e.Headers = map[string]string{"authorization": "Bearer x"} },
		"credential by digest": func(e *HTTPEvent) {
			e.HeaderDigests = map[string]string{"x-api-key": "sha256:" + strings.Repeat("0", 64)}
		},
		"upper-case name":      func(e *HTTPEvent) { e.Headers = map[string]string{"Mcp-Method": "x"} },
		"rule on a request":    func(e *HTTPEvent) { e.Rule = RuleHeaderMismatch },
		"refusal, no frame":    func(e *HTTPEvent) { e.Event, e.Rule, e.Frame = HTTPRefused, RuleHeaderMismatch, nil },
		"refusal, no rule":     func(e *HTTPEvent) { e.Event = HTTPRefused },
		"unsorted credentials": func(e *HTTPEvent) { e.Credentials = []string{"cookie", "authorization"} },
		"tls on a request": func(e *HTTPEvent) {
			e.TLS = &HTTPTLS{Version: "TLS 1.3", SPKISHA256: "sha256:" + strings.Repeat("0", 64), Chain: ChainVerified}
		},
		"bad status":         func(e *HTTPEvent) { e.Status = 1000 },
		"empty credential":   func(e *HTTPEvent) { e.Credentials = []string{""} },
		"long detail":        func(e *HTTPEvent) { e.Detail = strings.Repeat("x", maxDetailBytes+1) },
		"bad session digest": func(e *HTTPEvent) { e.Session = "sha256:00" },
		"negative exchange":  func(e *HTTPEvent) { e.Exchange = -1 },
		"unknown event":      func(e *HTTPEvent) { e.Event = "teleport" },
		"seq 0":              func(e *HTTPEvent) { e.Seq = 0 },
	} {
		e := good
		e.Headers = map[string]string{"mcp-method": "tools/call"}
		mod(&e)
		line, err := Encode(&e)
		if err != nil {
			continue // not even encodable: refused
		}
		if _, err := DecodeLine(line); err == nil {
			t.Errorf("%s: accepted\n%s", name, line)
		}
		// Check (the recorder's check before an http line takes a seq)
		// refuses what DecodeLine refuses.
		if err := e.Check(); err == nil {
			t.Errorf("%s: Check accepts a line DecodeLine refuses\n%s", name, line)
		}
	}
}

// TestHTTPCheckAgreesWithDecode: for random http events (a valid one with
// random members changed), Check accepts exactly what DecodeLine accepts
// of Encode's bytes.
func TestHTTPCheckAgreesWithDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	zero := int64(0)
	accepted := 0
	for i := range 8000 {
		e := HTTPEvent{Seq: 3, AtMs: 1, Event: HTTPRequest, Exchange: 1, Method: "POST", Path: "/mcp",
			Headers: map[string]string{"mcp-method": "tools/call"}, Credentials: []string{"authorization"}, Frame: &zero}
		v := reflect.ValueOf(&e).Elem()
		for range 1 + i%3 {
			f := v.Field(rng.IntN(v.NumField()))
			if f.Type().Name() == "" || rng.IntN(2) == 0 {
				fill(rng, f)
			} else {
				f.SetZero()
			}
		}
		line, err := Encode(&e)
		if err != nil {
			continue
		}
		_, derr := DecodeLine(line)
		cerr := e.Check()
		if (derr == nil) != (cerr == nil) {
			t.Fatalf("DecodeLine: %v, Check: %v\n%s", derr, cerr, line)
		}
		if cerr == nil {
			accepted++
		}
	}
	if accepted < 400 {
		t.Fatalf("only %d of 8000 events valid: the test does not reach both answers", accepted)
	}
}

// TestHTTPFastPath: valid http lines are read by the fast decoder (no
// reflection), which the fuzz target holds to the strict path's answers.
func TestHTTPFastPath(t *testing.T) {
	n := 0
	for _, ev := range validEvents() {
		if _, ok := ev.(*HTTPEvent); !ok {
			continue
		}
		n++
		line := mustLine(t, ev)
		if fast := decodeFast(line); fast == nil || !reflect.DeepEqual(fast, ev) {
			t.Errorf("the fast decoder reads %s as %+v, want %+v", line, fast, ev)
		}
	}
	if n == 0 {
		t.Fatal("validEvents holds no http line")
	}
}

// BenchmarkDecodeHTTPLine: DecodeLine of an http request line, with its
// ratio to the anchor, encoding/json.Unmarshal of the same bytes into any.
func BenchmarkDecodeHTTPLine(b *testing.B) {
	var line []byte
	for _, ev := range validEvents() {
		if h, ok := ev.(*HTTPEvent); ok && h.Event == HTTPRequest {
			line = mustLine(b, ev)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := DecodeLine(line); err != nil {
			b.Fatal(err)
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ours)/float64(time.Since(start)), "x-json-unmarshal")
}
