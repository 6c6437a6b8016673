package redact

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"
)

func TestPointerRules(t *testing.T) {
	r, err := NewRules(Config{NoDefault: true, Pointers: []string{
		"/arguments/db/password", "/arguments/list/1", "/result/structuredContent", "/_meta/acme~1user",
		"/arguments/a~0b", "/result/content/0/text", "/arguments/missing/deep",
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{`{"method":"tools/call","params":{"name":"q","arguments":{"db":{"host":"h","password":{"v":1}},"list":[0,1.5e3,2],"a~b":true}}}`,
			`{"method":"tools/call","params":{"name":"q","arguments":{"db":{"host":"h","password":"[REDACTED:operator_pointer]"},"list":[0,"[REDACTED:operator_pointer]",2],"a~b":"[REDACTED:operator_pointer]"}}}`},
		{`{"id":1,"result":{"content":[{"type":"text","text":"t"},{"type":"text","text":"u"}],"structuredContent":{"x":[1]}}}`,
			`{"id":1,"result":{"content":[{"type":"text","text":"[REDACTED:operator_pointer]"},{"type":"text","text":"u"}],"structuredContent":"[REDACTED:operator_pointer]"}}`},
		// _meta is both the request's and the response's.
		{`{"params":{"_meta":{"acme/user":"alice","other":"o"}}}`, `{"params":{"_meta":{"acme/user":"[REDACTED:operator_pointer]","other":"o"}}}`},
		{`{"result":{"_meta":{"acme/user":null}}}`, `{"result":{"_meta":{"acme/user":"[REDACTED:operator_pointer]"}}}`},
		// Pointers are relative to their base only: the same path elsewhere is kept.
		{`{"params":{"db":{"password":"p"}},"result":{"db":{"password":"p"}}}`, `{"params":{"db":{"password":"p"}},"result":{"db":{"password":"p"}}}`},
		// Nothing at the pointer: nothing happens; with NoDefault a secret name is kept.
		{`{"params":{"arguments":{"list":[0],"password":"p"}}}`, `{"params":{"arguments":{"list":[0],"password":"p"}}}`},
	}
	for _, tt := range tests {
		res, err := Message([]byte(tt.in), r)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Redacted) != tt.want {
			t.Errorf("%s\n got %s\nwant %s", tt.in, res.Redacted, tt.want)
		}
		for _, red := range res.Redactions {
			if red.Class != classOperatorPointer {
				t.Errorf("%s: class %s", red.Pointer, red.Class)
			}
		}
	}
	res, _ := Message([]byte(tests[2].in), r)
	if len(res.Redactions) != 1 || res.Redactions[0].Pointer != "/params/_meta/acme~1user" {
		t.Errorf("pointer of an escaped name: %v", res.Redactions)
	}
}

func TestPatternRules(t *testing.T) {
	r, err := NewRules(Config{NoDefault: true, Patterns: []string{`\bACCT-\d{6}\b`, `(?i)^internal only`}})
	if err != nil {
		t.Fatal(err)
	}
	in := `{"params":{"arguments":{"a":"pay ACCT-123456 now","b":"ACCT-12345","c":"INTERNAL ONLY: x","d":"` + "ghp_" + gen(alnum, 36) + `"}}}`
	res, err := Message([]byte(in), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Redactions) != 2 || res.Redactions[0] != (Redaction{"/params/arguments/a", classOperatorPattern}) ||
		res.Redactions[1] != (Redaction{"/params/arguments/c", classOperatorPattern}) {
		t.Fatalf("redactions %v (with NoDefault the GitHub token is kept)", res.Redactions)
	}
	args, idx := Argv([]string{"srv", "--acct", "ACCT-654321", "--password", "p"}, r)
	if len(idx) != 1 || idx[0] != 2 || args[2] != "[REDACTED:operator_pattern]" || args[4] != "p" {
		t.Fatalf("argv %q %v", args, idx)
	}
}

func TestNewRulesErrors(t *testing.T) {
	many := func(n int, s string) []string { return strings.Split(strings.Repeat(s+"\n", n-1)+s, "\n") }
	tests := []struct {
		name string
		c    Config
		code Code
		rule int
	}{
		{"no slash", Config{Pointers: []string{"arguments/x"}}, CodeBadPointer, 0},
		{"empty", Config{Pointers: []string{"/arguments/x", ""}}, CodeBadPointer, 1},
		{"no base", Config{Pointers: []string{"/params/arguments/x"}}, CodeBadPointer, 0},
		{"bad escape", Config{Pointers: []string{"/arguments/a~2"}}, CodeBadPointer, 0},
		{"trailing tilde", Config{Pointers: []string{"/result/a~"}}, CodeBadPointer, 0},
		{"long", Config{Pointers: []string{"/result/" + strings.Repeat("a", maxPointerLen)}}, CodeBadPointer, 0},
		{"deep", Config{Pointers: []string{"/result" + strings.Repeat("/a", maxPointerTokens)}}, CodeBadPointer, 0},
		{"regex", Config{Patterns: []string{"ok", "(unclosed"}}, CodeBadPattern, 1},
		{"backref", Config{Patterns: []string{`(a)\1`}}, CodeBadPattern, 0},
		{"long regex", Config{Patterns: []string{strings.Repeat("a", maxPatternLen+1)}}, CodeBadPattern, 0},
		{"empty match", Config{Patterns: []string{"x*"}}, CodeEmptyPattern, 0},
		{"too many pointers", Config{Pointers: many(maxPointers+1, "/result/a")}, CodeTooManyRules, -1},
		{"too many patterns", Config{Patterns: many(maxPatterns+1, "a")}, CodeTooManyRules, -1},
	}
	for _, tt := range tests {
		_, err := NewRules(tt.c)
		var e *Error
		if !errors.Is(err, tt.code) || !errors.As(err, &e) || e.Rule != tt.rule {
			t.Errorf("%s: %v, want %s at rule %d", tt.name, err, tt.code, tt.rule)
		}
	}
	// The regexp error is kept for the caller.
	_, err := NewRules(Config{Patterns: []string{"(unclosed"}})
	var se *syntax.Error
	if !errors.As(err, &se) {
		t.Errorf("%v does not wrap the *syntax.Error", err)
	}
	// Limits are inclusive.
	ok := []Config{
		{Pointers: many(maxPointers, "/result/a")},
		{Patterns: many(maxPatterns, "a")},
		{Pointers: []string{"/result/" + strings.Repeat("a", maxPointerLen-len("/result/"))}},
		{Pointers: []string{"/result" + strings.Repeat("/a", maxPointerTokens-1)}},
		{Patterns: []string{strings.Repeat("a", maxPatternLen)}},
		{Pointers: []string{"/arguments", "/result", "/_meta", "/arguments/", "/result/0/~0~1"}},
	}
	for i, c := range ok {
		if _, err := NewRules(c); err != nil {
			t.Errorf("config %d: %v", i, err)
		}
	}
	// Hostile rule text is escaped in the message.
	_, err = NewRules(Config{Pointers: []string{"/\x1b[31mred"}})
	if err == nil || strings.ContainsRune(err.Error(), 0x1b) {
		t.Errorf("error text carries a raw escape: %q", err)
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "PASSWORD": true, "user.password": true, "MYSQL_ROOT_PASSWORD": true, "GITHUB_TOKEN": true,
		"OPENAI_API_KEY": true, "api-key": true, "X-Api-Key": true, "Set-Cookie": true, "client_secret": true,
		"private-key": true, "Proxy-Authorization": true, "secrets": true,
		"progressToken": false, "next_page_token": false, "max_tokens": false, "tokens": false, "keyboard": false,
		"passwordless": false, "secretary_name": false, "author": false, "key": false, "": false,
		strings.Repeat("a", maxNameLen-8) + "password":   true,  // at the bound
		strings.Repeat("a", maxNameLen-8+1) + "password": false, // over it: never judged
	} {
		if got := secretName(name); got != want {
			t.Errorf("secretName(%q) = %v, want %v", name, got, want)
		}
	}
}
