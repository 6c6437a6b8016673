package approval

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// TestElicitAnswerStrict: the client's answer to an elicitation is read
// strictly: only accept with a boolean content.approve true approves (by
// the client); accept with false, decline and cancel refuse; an error
// response, a repeated member, an unknown member, a non-boolean approve
// or a missing action fail.
func TestElicitAnswerStrict(t *testing.T) {
	for _, tc := range []struct {
		result, err string
		outcome     string
		reason      string
	}{
		{`{"action":"accept","content":{"approve":true,"reason":"ok"}}`, "", Approved, "ok"},
		{`{"action":"accept","content":{"approve":true},"_meta":{"x":1}}`, "", Approved, ""},
		{`{"action":"accept","content":{"approve":false}}`, "", Refused, ""},
		{`{"action":"decline"}`, "", Refused, "the client declined"},
		{`{"action":"cancel"}`, "", Refused, "the client cancelled"},
		{"", `{"code":-32601,"message":"no"}`, Failed, "the client answered with error -32601"},
		{`{"action":"accept","content":{"approve":"true"}}`, "", Failed, "without a boolean"},
		{`{"action":"accept","content":{"approve":true,"approve":false}}`, "", Failed, "each member once"},
		{`{"action":"accept","action":"decline","content":{"approve":true}}`, "", Failed, "each member once"},
		{`{"action":"accept","content":{"approve":true,"by":"root"}}`, "", Failed, `member "by"`},
		{`{"action":"accept","content":{"approve":true},"extra":1}`, "", Failed, `member "extra"`},
		{`{"action":"ACCEPT","content":{"approve":true}}`, "", Failed, "no action"},
		{`{"action":"accept"}`, "", Failed, "without content"},
		{`[]`, "", Failed, "not an elicitation result"},
	} {
		var res, ev canon.Value
		if tc.result != "" {
			d, err := canon.Parse([]byte(tc.result), canon.ParseOptions{AllowDuplicateKeys: true})
			if err != nil {
				t.Fatal(err)
			}
			res = d.Root()
		}
		if tc.err != "" {
			d, err := canon.Parse([]byte(tc.err), canon.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ev = d.Root()
		}
		got := ElicitAnswer(res, ev, ClientBy("agent"))
		if got.Outcome != tc.outcome || !strings.Contains(got.Reason, tc.reason) || got.Via != ViaElicitation {
			t.Errorf("%s%s: %+v, want %s (%q)", tc.result, tc.err, got, tc.outcome, tc.reason)
		}
		if (got.By == "client:agent") != (tc.outcome == Approved) {
			t.Errorf("%s: by %q", tc.result, got.By)
		}
	}
}

// TestElicitParams: the request shows the tool, the rule and the
// arguments as printable ASCII (a bidi override is shown escaped), bounds
// what it quotes, and asks for a flat form with a boolean approve.
func TestElicitParams(t *testing.T) {
	args := json.RawMessage(`{"to":"bob\u202e","note":"` + strings.Repeat("x", 10000) + `"}`)
	b := ElicitParams(&Request{AttemptID: "a1", Tool: "wr\u202ete", Rule: "r", ArgsDigest: "sha256:00", Arguments: args, Redacted: []string{"/params/arguments/k"}})
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			t.Fatalf("a byte %#x outside printable ASCII in %s", c, b)
		}
	}
	var p struct {
		Message string `json:"message"`
		Schema  struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		} `json:"requestedSchema"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Message, `tool "wr\u202ete"`) || !strings.Contains(p.Message, `"to":"bob\u202e"`) || !strings.Contains(p.Message, "bytes more") || !strings.Contains(p.Message, "1 values redacted") || strings.ContainsRune(p.Message, '\u202e') {
		t.Errorf("message %q", p.Message)
	}
	if len(p.Message) > 5000 {
		t.Errorf("message of %d bytes: the arguments shown are not bounded", len(p.Message))
	}
	if p.Schema.Type != "object" || p.Schema.Properties["approve"]["type"] != "boolean" || len(p.Schema.Required) != 1 || p.Schema.Required[0] != "approve" {
		t.Errorf("schema %+v", p.Schema)
	}
	if ClientBy("") != "client" || len(ClientBy(strings.Repeat("n", 500))) > MaxByBytes {
		t.Errorf("ClientBy")
	}
}

// TestElicitParamsCompactArguments: the arguments quoted in the message are
// the approve command's (compact JSON): white space between their tokens,
// tabs included, which the gate lets a request carry, is not shown, so the
// message holds no character but printable ASCII and its line breaks, and
// padding does not push the arguments past the quoted bound.
func TestElicitParamsCompactArguments(t *testing.T) {
	pad := strings.Repeat("\t", maxShownArguments)
	req := &Request{Tool: "t", Rule: "r", AttemptID: "a1", ArgsDigest: "sha256:00",
		Arguments: json.RawMessage("{\"note\":\"fine\"," + pad + "\"cmd\":\"rm -rf /\"}")}
	var p struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(ElicitParams(req), &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []byte(p.Message) {
		if c != '\n' && (c < 0x20 || c > 0x7e) {
			t.Fatalf("the message holds byte %#x: %q", c, p.Message)
		}
	}
	if !strings.Contains(p.Message, `arguments: {"note":"fine","cmd":"rm -rf /"}`) {
		t.Errorf("the message does not show the arguments as the command gets them: %q", p.Message)
	}
}
