package redact_test

import (
	"fmt"

	"github.com/tracectl/tracectl/redact"
)

func ExampleMessage() {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch",` +
		`"arguments":{"url":"https://api.example.com","headers":{"Authorization":"Bearer abc.def.123456"}}}}`)
	res, err := redact.Message(msg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Redacted))
	fmt.Println(res.Redactions)
	// Output:
	// {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch","arguments":{"url":"https://api.example.com","headers":{"Authorization":"[REDACTED:secret_name]"}}}}
	// [{/params/arguments/headers/Authorization secret_name}]
}

func ExampleNewRules() {
	rules, err := redact.NewRules(redact.Config{
		Pointers: []string{"/arguments/account", "/_meta/acme~1user"},
		Patterns: []string{`\bACCT-\d{6}\b`},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := redact.Message([]byte(`{"params":{"arguments":{"account":12345,"note":"see ACCT-000042"},"_meta":{"acme/user":"alice"}}}`), rules)
	fmt.Println(string(res.Redacted))
	fmt.Println(res.Redactions)

	_, err = redact.NewRules(redact.Config{Pointers: []string{"/params/arguments/x"}})
	fmt.Println(err)
	// Output:
	// {"params":{"arguments":{"account":"[REDACTED:operator_pointer]","note":"[REDACTED:operator_pattern]"},"_meta":{"acme/user":"[REDACTED:operator_pointer]"}}}
	// [{/params/_meta/acme~1user operator_pointer} {/params/arguments/account operator_pointer} {/params/arguments/note operator_pattern}]
	// redact_bad_pointer (rule 0): "/params/arguments/x": unknown base "params": the first token is arguments, result or _meta
}

func ExampleArgv() {
	argv, changed := redact.Argv([]string{"mcp-server", "--api-key", "hunter2", "--token=abc", "-p", "8080", "DB_PASSWORD=pw"}, nil)
	fmt.Println(argv, changed)
	// Output:
	// [mcp-server --api-key [REDACTED:secret_name] --token=[REDACTED:secret_name] -p 8080 DB_PASSWORD=[REDACTED:secret_name]] [2 3 6]
}
