package transcript

import (
	"strings"
	"testing"
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
		"bad status": func(e *HTTPEvent) { e.Status = 1000 },
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
	}
}
