package redact

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// A verifier's two checks hold for everything Message produces: the list
// describes the redacted bytes, and applying it to the original gives them.
func TestCheckApplyRoundTrip(t *testing.T) {
	r, err := NewRules(Config{Pointers: []string{"/arguments/n"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples() {
		for _, loc := range locations {
			in := place(loc.msg, jsonString(s.value))
			in = in[:len(in)-1] + `,"extra":{"password":[1],"n":2}}`
			res, err := Message([]byte(in), r)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(res.Redacted, res.Redactions, canon.Limits{}); err != nil {
				t.Errorf("%s in %s: Check: %v", s.class, loc.name, err)
			}
			got, err := apply([]byte(in), res.Redactions, canon.Limits{})
			if err != nil || !bytes.Equal(got, res.Redacted) {
				t.Errorf("%s in %s: apply = %s, %v\nwant %s", s.class, loc.name, got, err, res.Redacted)
			}
		}
	}
	// The whole message can be the redacted value.
	tok := jsonString("ghp_" + gen(alnum, 36))
	res, err := Message([]byte(" "+tok+" "), nil)
	if err != nil || len(res.Redactions) != 1 || res.Redactions[0].Pointer != "" || string(res.Redacted) != ` "[REDACTED:github_token]" ` {
		t.Fatalf("root: %q %v %v", res.Redacted, res.Redactions, err)
	}
	if err := Check(res.Redacted, res.Redactions, canon.Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRejects(t *testing.T) {
	red := []byte(`{"a":"[REDACTED:jwt]","b":["x","[REDACTED:secret_name]"],"c":{"d":"[REDACTED:nonsense]"},"e":{"f":1,"f":2}}`)
	ok := []Redaction{{"/a", classJWT}, {"/b/1", classSecretName}}
	if err := Check(red, ok, canon.Limits{}); err != nil {
		t.Fatalf("valid list: %v", err)
	}
	for name, reds := range map[string][]Redaction{
		"unsorted":      {{"/b/1", classSecretName}, {"/a", classJWT}},
		"repeated":      {{"/a", classJWT}, {"/a", classJWT}},
		"wrong class":   {{"/a", classGitHubToken}},
		"unknown class": {{"/c/d", "nonsense"}},
		"not a marker":  {{"/b/0", classSecretName}},
		"missing":       {{"/z", classJWT}},
		"leading zero":  {{"/b/01", classSecretName}},
		"below scalar":  {{"/a/x", classJWT}},
		"repeated name": {{"/e/f", classJWT}},
		"bad pointer":   {{"a", classJWT}},
	} {
		err := Check(red, reds, canon.Limits{})
		if !errors.Is(err, CodeBadRedaction) {
			t.Errorf("%s: %v, want %s", name, err, CodeBadRedaction)
		}
	}
	if _, err := apply([]byte(`{"a":{"b":1}}`), []Redaction{{"/a", classJWT}, {"/a/b", classJWT}}, canon.Limits{}); !errors.Is(err, CodeBadRedaction) {
		t.Errorf("nested redactions: %v", err)
	}
	if _, err := apply([]byte(`{"a":`), nil, canon.Limits{}); !errors.Is(err, CodeInvalidMessage) {
		t.Errorf("invalid original: %v", err)
	}
}

func TestScan(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"params":{"token":NaN}}`,
		"\xef\xbb\xbf{\"a\":\"ghp_" + strings.Repeat("A", 36) + "\"}",
		`[{"password":"x"}]`,
		"Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789",
	} {
		if !Scan([]byte(raw), nil) {
			t.Errorf("Scan(%.40q) found nothing", raw)
		}
	}
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":NaN}}}`,
		"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
	} {
		if Scan([]byte(raw), nil) {
			t.Errorf("Scan(%.40q) found a secret", raw)
		}
	}
	off, _ := NewRules(Config{NoDefault: true})
	if Scan([]byte(`{"password":"x"}`), off) {
		t.Error("Scan with the defaults off found a secret-like name")
	}
	pat, _ := NewRules(Config{NoDefault: true, Patterns: []string{`acct-[0-9]{6}`}})
	if !Scan([]byte(`{"a":acct-123456}`), pat) {
		t.Error("Scan missed an operator pattern")
	}
	if d, ptrs, pats := pat.Policy(); d || ptrs != 0 || pats != 1 {
		t.Errorf("Policy() = %v %d %d", d, ptrs, pats)
	}
}

// TestMessageParsed: redacting a message already parsed gives exactly
// Message's result.
func TestMessageParsed(t *testing.T) {
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"token":"abcdefgh12345678","q":"ghp_` + strings.Repeat("a", 36) + `"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
	} {
		want, err := Message([]byte(msg), nil)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := canon.Parse([]byte(msg), canon.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := MessageParsed([]byte(msg), doc.Root(), nil)
		if err != nil || !bytes.Equal(got.Redacted, want.Redacted) || len(got.Redactions) != len(want.Redactions) {
			t.Errorf("MessageParsed = %s %v, %v; Message = %s %v", got.Redacted, got.Redactions, err, want.Redacted, want.Redactions)
		}
	}
}
