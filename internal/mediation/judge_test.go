package mediation

import (
	"slices"
	"testing"
)

// The harness's own logic, without processes: a failing cell must be the
// property failing, never the harness misreading a bundle.

func TestReadings(t *testing.T) {
	a := `{"content":[{"type":"text","text":"transferred 1"}]}`
	b := `{"content":[{"type":"text","text":"transferred 1000000"}]}`
	for _, tc := range []struct {
		name, resp string
		want       []string
	}{
		{"none recorded", ``, nil},
		{"one", `{"jsonrpc":"2.0","id":1,"result":` + a + `}`, []string{textA}},
		{"repeated member", `{"jsonrpc":"2.0","id":1,"result":` + a + `,"result":` + b + `}`, []string{textA, textB}},
		{"repeated, same value", `{"jsonrpc":"2.0","id":1,"result":` + a + `,"result":` + a + `}`, []string{textA}},
		{"letter case", `{"jsonrpc":"2.0","id":1,"result":` + a + `,"RESULT":` + b + `}`, []string{textA, textB}},
		{"batch", `[{"jsonrpc":"2.0","id":1,"result":` + a + `}]`, []string{textA}},
		{"bom", "\uFEFF" + `{"jsonrpc":"2.0","id":1,"result":` + b + `}`, []string{textB}},
		{"nested result is not the response's", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"transferred 1","result":1}]}}`, []string{textA}},
		{"error response", `{"jsonrpc":"2.0","id":1,"error":{"code":-32092,"message":"x"}}`, nil},
	} {
		if got := readings(tc.resp); !slices.Equal(got, tc.want) {
			t.Errorf("%s: readings = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestJudge(t *testing.T) {
	code := int64(-32092)
	result := func(text string, readings ...string) recorded {
		return recorded{Verdict: "verified", Attempts: 1, Kind: "result", Text: text, Readings: readings}
	}
	none := func(kind string) recorded { return recorded{Verdict: "verified", Attempts: 1, Kind: kind} }
	tracectlErr := received{Code: "-32092", Source: "tracectl", Message: "transport failure"}
	sdkErr := received{Code: "-32001", Message: "timed out"}
	for _, tc := range []struct {
		name string
		got  received
		rec  recorded
		want string
	}{
		{"same result", received{OK: true, Text: textA}, result(textA, textA), "ok"},
		{"other result", received{OK: true, Text: textB}, result(textA, textA), "VIOLATION"},
		{"ambiguous bytes", received{OK: true, Text: textB}, result(textB, textA, textB), "VIOLATION"},
		{"result, no response recorded", received{OK: true, Text: textA}, none("unknown"), "VIOLATION"},
		{"result, transport failure recorded", received{OK: true, Text: textA}, none("transport_failure"), "VIOLATION"},
		{"result, bundle fails", received{OK: true, Text: textA}, recorded{Verdict: "failed", Attempts: 1, Kind: "result", Text: textA}, "FAIL"},
		{"tracectl error, transport failure", tracectlErr, none("transport_failure"), "ok-refused"},
		{"tracectl error, its error recorded", tracectlErr, recorded{Verdict: "verified", Attempts: 1, Kind: "jsonrpc_error", Code: &code}, "ok-refused"},
		{"sdk error, cancelled", sdkErr, none("cancelled"), "SILENT"},
		{"tracectl error, unknown recorded", tracectlErr, none("unknown"), "SILENT"},
		{"error, result recorded", tracectlErr, result(textA, textA), "MISMATCH"},
		{"error, no attempt", sdkErr, recorded{Verdict: "verified", Kind: "no attempt"}, "FAIL"},
		{"error, bundle incomplete", sdkErr, recorded{Verdict: "incomplete", Attempts: 1, Kind: "unknown"}, "FAIL"},
	} {
		if got, why := judge(tc.got, tc.rec); got != tc.want {
			t.Errorf("%s: judge = %s (%s), want %s", tc.name, got, why, tc.want)
		}
	}
}
