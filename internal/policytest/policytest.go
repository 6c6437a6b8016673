// Package policytest holds what the policy benchmarks of several packages
// share. Test support only.
package policytest

import (
	"fmt"
	"strings"
)

// Bench20 is the benchmarks' 20-rule policy (internal/policy
// BenchmarkDecide, session BenchmarkPolicyHop, stdio
// BenchmarkPolicyRoundTrip): none of its rules denies their echo call.
// scoped: every rule names a tool (16 others, 4 echo with a condition);
// otherwise ten rules apply to any tool, so ten CEL conditions are
// evaluated on every call, and ten name other tools.
func Bench20(scoped bool) []byte {
	var b strings.Builder
	b.WriteString("version: 1\ndefault: allow\nrules:\n")
	conds := []string{
		`args.text == "forbidden"`, `size(args.text) > 4096`, `args.text.startsWith("rm -rf")`,
		`has(args.path) && args.path.startsWith("/etc")`, `tool == "shell" && size(args) > 0`,
		`has(args.amount) && args.amount > 100`, `args.text.contains("BEGIN PRIVATE KEY")`,
		`has(declaration.annotations) && declaration.annotations.destructiveHint == true`,
		`has(server.name) && server.name == "evil"`, `size(args) > 64`,
	}
	n := len(conds)
	if scoped {
		n = 4
	}
	for i, c := range conds[:n] {
		tool := ""
		if scoped {
			tool = "    tool: echo\n"
		}
		fmt.Fprintf(&b, "  - id: cond-%d\n%s    when: '%s'\n    action: deny\n", i, tool, c)
	}
	for i := range 20 - n {
		fmt.Fprintf(&b, "  - id: other-%d\n    tool: \"other_%d*\"\n    when: 'args.x == 1'\n    action: deny\n", i, i)
	}
	return []byte(b.String())
}
