package policy

import (
	"fmt"

	"github.com/tracectl/tracectl/internal/approval"
)

// Approve is the action of a rule whose calls a human approves before they
// are forwarded (spec/policy.md, "Approval"): the decision is approve, and
// the call goes on only with an approval of its exact arguments.
const Approve = "approve"

// approveRule returns the index and id of p's first rule whose action is
// approve, or -1.
func (p *Policy) approveRule() (int, string) {
	if p == nil {
		return -1, ""
	}
	for i := range p.rules {
		if p.rules[i].action == Approve {
			return i, p.rules[i].id
		}
	}
	return -1, ""
}

// NeedsApproval reports whether a call e decides could need an approval:
// its policy has a rule whose action is approve.
func (e *Engine) NeedsApproval() bool {
	i, _ := e.policy.approveRule()
	return i >= 0
}

// WithApproval sets who approves the calls an approve rule matched, and
// returns e. Without one, an engine whose policy has an approve rule is
// refused at start (CheckApproval).
func (e *Engine) WithApproval(g *approval.Gate) *Engine {
	e.approval = g
	return e
}

// Approval is who approves e's approve decisions (nil: nobody).
func (e *Engine) Approval() *approval.Gate {
	if e == nil {
		return nil
	}
	return e.approval
}

// CheckApproval fails, naming the first approve rule, when e's policy has
// one and nobody is set to approve (WithApproval): such a recording would
// deny every call the rule matched, which is not what its author asked.
func (e *Engine) CheckApproval() error {
	if e == nil || e.approval != nil {
		return nil
	}
	i, id := e.policy.approveRule()
	if i < 0 {
		return nil
	}
	return &Error{Rule: i, ID: id, Detail: fmt.Sprintf("action %q needs an approver: start with --approve-cmd or --approve-elicit (producer.Options.ApproveCommand, ApproveElicit)", Approve)}
}
