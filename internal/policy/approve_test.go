package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/approval"
)

const approveExample = `version: 1
default: allow
rules:
  - id: free
    tool: transfer
    when: 'args.amount < 10'
    action: allow
  - id: big-needs-ok
    tool: transfer
    when: 'args.amount > 100'
    action: approve
  - id: broken-approve
    tool: broken
    when: 'args.missing == 1'
    action: approve
`

type noAsker struct{}

func (noAsker) Ask(context.Context, *approval.Request) approval.Evidence { return approval.Evidence{} }

// An approve rule decides approve, first match wins as for any action, and
// a condition that fails denies under it (never asks).
func TestDecideApprove(t *testing.T) {
	p, err := Parse([]byte(approveExample))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(p, nil)
	for _, tc := range []struct {
		tool, args string
		want       Decision
	}{
		{"transfer", `{"amount":500}`, Decision{Action: Approve, Rule: "big-needs-ok"}},
		{"transfer", `{"amount":5}`, Decision{Action: Allow, Rule: "free"}},
		{"transfer", `{"amount":50}`, Decision{Action: Allow, Rule: RuleDefault}},
		{"broken", `{}`, Decision{Action: Deny, Rule: "broken-approve", Reason: "condition failed: no such key: missing"}},
	} {
		if got := e.Decide(Input{Tool: tc.tool, Args: args(t, tc.args)}); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.tool, tc.args, got, tc.want)
		}
	}
	if !e.HasRule("big-needs-ok") || !e.NeedsApproval() {
		t.Error("the approve rule is not the engine's")
	}
}

// A policy with an approve rule needs an approver: CheckApproval names the
// first such rule until one is set; a policy without one needs none.
func TestCheckApproval(t *testing.T) {
	p, err := Parse([]byte(approveExample))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(p, nil)
	err = e.CheckApproval()
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrPolicy) || pe.Rule != 1 || pe.ID != "big-needs-ok" || !strings.Contains(err.Error(), `rule 1 ("big-needs-ok"): action "approve" needs an approver`) {
		t.Fatalf("CheckApproval: %v", err)
	}
	if e.WithApproval(&approval.Gate{Asker: noAsker{}}).CheckApproval() != nil || e.Approval() == nil {
		t.Fatal("an engine with an approver is refused")
	}
	q, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if eq := NewEngine(q, nil); eq.CheckApproval() != nil || eq.NeedsApproval() || eq.Approval() != nil {
		t.Fatal("a policy without an approve rule needs an approver")
	}
	var nilEngine *Engine
	if nilEngine.CheckApproval() != nil || nilEngine.Approval() != nil {
		t.Fatal("no engine needs no approver")
	}
}
