package verify

import (
	"fmt"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/transcript"
)

// Approvals (spec/policy.md, "Approval"). A call whose recorded decision
// is approve went on only with an approval: its approval observation comes
// before any other, binds the digest of the attempt's exact arguments, and
// in enforce mode a call is forwarded (a response, a transport failure, a
// timeout, a cancellation) only when approved, and denied only when not. In
// audit mode every call is forwarded, but only after it was asked about.
// Anything else is approval_mismatch. (Whether the decision is approve at
// all is re-derived by the decision check: a recorded approve that the
// policy does not give is decision_mismatch.)

// approvals is what the approval check keeps per attempt decided approve.
type approvals map[string]*approvalSeen

type approvalSeen struct {
	digest   string // the digest an approval must bind (approval.ArgsDigestOf)
	asked    bool   // an approval observation came
	outcome  string
	observed bool // another observation came (then no approval may)
}

// noteApprove notes an attempt whose recorded decision is approve.
func (b *bundleCheck) noteApprove(a *transcript.Attempt) {
	st := &b.pol
	if st.approve == nil {
		st.approve = approvals{}
	}
	st.approve[a.AttemptID] = &approvalSeen{digest: approval.ArgsDigestOf(a.ArgsDigest, a.Request.Digest, a.Request.Original)}
}

// approvalOutcome checks o against its attempt's approval; it reports
// whether the decision check has nothing more to say about o.
func (b *bundleCheck) approvalOutcome(o *transcript.Observation) bool {
	st := &b.pol
	seen := st.approve[o.AttemptID]
	if seen == nil && o.Kind != approval.Kind {
		return false
	}
	subject := "attempt " + o.AttemptID
	fail := func(format string, args ...any) bool {
		st.bad++
		b.r.add(CodeApprovalMismatch, checkPolicy, StatusFail, subject, fmt.Sprintf(format, args...))
		return true
	}
	enforce := st.ref != nil && st.ref.Mode == policy.ModeEnforce
	if o.Kind == approval.Kind {
		ev := o.Approval
		switch {
		case seen == nil:
			return fail("an approval (%s) at seq %d, but its decision is not approve: only a call an approve rule matched is asked about", ev.Outcome, o.Seq)
		case seen.asked:
			return fail("a second approval at seq %d: a call is asked about once", o.Seq)
		case seen.observed:
			return fail("an approval at seq %d after the call was forwarded or settled: it is asked before", o.Seq)
		case ev.ArgsDigest != seen.digest:
			return fail("the approval at seq %d (%s by %s) binds arguments %s, but the call's are %s: it approves another call", o.Seq, ev.Outcome, boundedQuote(ev.By), ev.ArgsDigest, seen.digest)
		}
		seen.asked, seen.outcome = true, ev.Outcome
		return true
	}
	seen.observed = true
	switch {
	case o.Kind == transcript.ObsDenied && !enforce:
		return false // the decision check: nothing is denied in audit mode
	case o.Kind == transcript.ObsDenied && !seen.asked:
		return fail("denied at seq %d without an approval: a call an approve rule matched is denied only when the approver does not approve it", o.Seq)
	case o.Kind == transcript.ObsDenied && seen.outcome == approval.Approved:
		return fail("denied at seq %d although its approval approved it", o.Seq)
	case o.Kind == transcript.ObsDenied:
		return true
	case !seen.asked:
		return fail("a %s observation at seq %d, but no approval before it: the call was forwarded without asking", o.Kind, o.Seq)
	case enforce && seen.outcome != approval.Approved:
		return fail("a %s observation at seq %d, but its approval says %s: in enforce mode the call was forwarded without an approval", o.Kind, o.Seq, seen.outcome)
	}
	return true
}
