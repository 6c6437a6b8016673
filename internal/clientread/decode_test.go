package clientread

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// jsonCases: one application/json body (the same bytes as one SSE event's
// data, less the BOM and batch cases). goID is the Go SDK's decoded id
// (fmt %v of ID.Raw()), the key its client matches a response by; tsID is
// String(Number(id)), the TS SDK Protocol's key. "-" means refused.
var jsonCases = []struct {
	name string
	body string
	goID string
	tsID string
}{
	{"int id", `{"jsonrpc":"2.0","id":1,"result":{}}`, "1", "1"},
	{"string twin id", `{"jsonrpc":"2.0","id":"1","result":{}}`, "1", "1"},
	{"padded string id", `{"jsonrpc":"2.0","id":" 1 ","result":{}}`, " 1 ", "1"},
	{"hex string id", `{"jsonrpc":"2.0","id":"0x1","result":{}}`, "0x1", "1"},
	{"empty string id", `{"jsonrpc":"2.0","id":"","result":{}}`, "", "0"},
	{"float id", `{"jsonrpc":"2.0","id":1.5,"result":{}}`, "1", "-"},
	{"exp id", `{"jsonrpc":"2.0","id":1e0,"result":{}}`, "1", "1"},
	{"big id", `{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`, "9007199254740992", "-"},
	{"negative zero id", `{"jsonrpc":"2.0","id":-0,"result":{}}`, "0", "-0"},
	{"null id", `{"jsonrpc":"2.0","id":null,"result":{}}`, "-", "-"},
	{"repeated id", `{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`, "2", "2"},
	{"repeated jsonrpc", `{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"result":{}}`, "1", "1"},
	{"unknown member", `{"jsonrpc":"2.0","id":1,"result":{},"x":1}`, "1", "-"},
	{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, "1", "-"},
	{"case variant member", `{"jsonrpc":"2.0","ID":1,"result":{}}`, "-", "-"},
	{"trailing garbage", `{"jsonrpc":"2.0","id":1,"result":{}} x`, "1", "-"},
	{"two values", `{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0","id":2,"result":{}}`, "1", "-"},
	{"leading nbsp", "\u00a0{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", "-", "-"},
	{"bom", "\uFEFF{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", "-", "1"},
	{"batch", `[{"jsonrpc":"2.0","id":1,"result":{}}]`, "-", "1"},
	{"no result", `{"jsonrpc":"2.0","id":1}`, "1", "-"},
}

func goIDOf(body string) string {
	msg, _, err := GoSDKDecode([]byte(body))
	if err != nil {
		return "-"
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		return fmt.Sprint(m.ID.Raw())
	case *jsonrpc.Request:
		return fmt.Sprint(m.ID.Raw())
	}
	return "?"
}

func TestDecodeGo(t *testing.T) {
	for _, tc := range jsonCases {
		if got := goIDOf(tc.body); got != tc.goID {
			t.Errorf("%s: Go SDK id %q, want %q", tc.name, got, tc.goID)
		}
	}
}

func TestDecodeTypeScript(t *testing.T) {
	n := testNode(t)
	for _, tc := range jsonCases {
		r, err := n.JSON([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		got := "-"
		if r.Err == "" && len(r.Messages) == 1 {
			got = r.Messages[0].NumID
		}
		if got != tc.tsID {
			t.Errorf("%s: TS SDK application/json id %q (err %q), want %q", tc.name, got, r.Err, tc.tsID)
		}
		// The same bytes as SSE data: no BOM stripping, no batch.
		s, err := n.SSE([]byte("data: " + tc.body + "\n\n"))
		if err != nil {
			t.Fatal(err)
		}
		sseGot := "-"
		if len(s.Messages) == 1 && s.Messages[0].OK {
			sseGot = s.Messages[0].NumID
		}
		wantSSE := tc.tsID
		if tc.name == "bom" || tc.name == "batch" {
			wantSSE = "-"
		}
		if sseGot != wantSSE {
			t.Errorf("%s: TS SDK SSE id %q (%+v), want %q", tc.name, sseGot, s.Messages, wantSSE)
		}
	}
}
