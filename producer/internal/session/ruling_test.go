package session

import (
	"slices"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
)

// table is an Open over plain sets, as either transport could hold them.
type table struct {
	open     []string // exact id texts of open requests
	settled  []string // match keys answered
	byProxy  []string // id texts the proxy answered itself
	openKeys []string // match keys of the open requests
}

func (t table) Exact(id string) bool           { return slices.Contains(t.open, id) }
func (t table) AnsweredByProxy(id string) bool { return slices.Contains(t.byProxy, id) }
func (t table) Matches(keys []string) bool     { return overlaps(keys, t.openKeys) }
func (t table) Settled(keys []string) bool     { return overlaps(keys, t.settled) }
func overlaps(a, b []string) bool {
	return slices.ContainsFunc(a, func(k string) bool { return slices.Contains(b, k) })
}
func openOn(ids ...string) table { return table{open: ids, openKeys: keysOf(ids...)} }
func keysOf(ids ...string) (out []string) {
	for _, id := range ids {
		out = append(out, mcpwire.MatchKey(read(id).ID))
	}
	return out
}
func read(id string) *mcpwire.Message {
	return mustRead(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
}
func mustRead(s string) *mcpwire.Message {
	m, r := mcpwire.Read([]byte(s + "\n"))
	if r != nil {
		panic(r)
	}
	return m
}

// Rule's order of decisions, each path once, for the session's table and
// the HTTP exchange's alike.
func TestRule(t *testing.T) {
	sseName := &mcpwire.Refusal{Rule: "sse_event_name", ID: "null"}
	tests := []struct {
		name     string
		m        *mcpwire.Message
		gate     *mcpwire.Refusal
		framing  *mcpwire.Refusal
		body     string
		padded   bool
		open     table
		stray    mcpwire.Rule
		rule     mcpwire.Rule // "" delivered
		withheld bool
		answers  bool
	}{
		{name: "the answer under its exact id", m: read("4"), open: openOn("4"), stray: mcpwire.RuleUnsolicited},
		{name: "a request passes", m: mustRead(`{"jsonrpc":"2.0","id":9,"method":"ping"}`), open: openOn("4"), stray: mcpwire.RuleUnsolicited},
		{name: "framing first, even for the exact answer", m: read("4"), framing: sseName, open: openOn("4"), stray: mcpwire.RuleForeignResponse, rule: "sse_event_name", answers: true},
		{name: "gate refusal matched by a lenient id", gate: &mcpwire.Refusal{Rule: "duplicate_member"}, body: `{"jsonrpc":"2.0","id":4,"result":{},"result":{}}`, open: openOn("4"), stray: mcpwire.RuleUnsolicited, rule: "duplicate_member", answers: true},
		{name: "gate refusal nobody waits on", gate: &mcpwire.Refusal{Rule: "invalid_json"}, body: `{"id":5,`, open: openOn("4"), stray: mcpwire.RuleUnsolicited, rule: "invalid_json"},
		{name: "client readability", m: mustRead(`{"jsonrpc":"2.0","id":4,"result":{},"extra":1}`), open: openOn("4"), stray: mcpwire.RuleUnsolicited, rule: mcpwire.RuleClientSchema, answers: true},
		{name: "padded", m: read("4"), padded: true, open: openOn("4"), stray: mcpwire.RuleUnsolicited, rule: mcpwire.RulePadded, answers: true},
		{name: "the proxy answered it", m: read("4"), open: table{byProxy: []string{"4"}}, stray: mcpwire.RuleUnsolicited, withheld: true},
		{name: "a string twin", m: read(`"4"`), open: openOn("4"), stray: mcpwire.RuleUnsolicited, rule: mcpwire.RuleIDTwin, answers: true},
		{name: "a second answer", m: read("4"), open: table{settled: keysOf("4")}, stray: mcpwire.RuleForeignResponse, rule: mcpwire.RuleSettledResponse},
		{name: "stray on stdio", m: read("7"), open: openOn("4"), stray: mcpwire.RuleUnsolicited, rule: mcpwire.RuleUnsolicited},
		{name: "stray on an HTTP exchange", m: read("7"), open: openOn("4"), stray: mcpwire.RuleForeignResponse, rule: mcpwire.RuleForeignResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Rule(tc.m, tc.gate, tc.framing, []byte(tc.body), tc.padded, tc.open, tc.stray)
			var rule mcpwire.Rule
			if got.Refusal != nil {
				rule = got.Refusal.Rule
			}
			if rule != tc.rule || got.Withheld != tc.withheld || got.Answers != tc.answers {
				t.Errorf("Rule = {rule %q withheld %v answers %v}, want {rule %q withheld %v answers %v}", rule, got.Withheld, got.Answers, tc.rule, tc.withheld, tc.answers)
			}
		})
	}
}
