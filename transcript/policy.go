package transcript

import "github.com/tracectl/tracectl/internal/approval"

// Policy evidence (v4, optional; spec/policy.md, "Evidence"): the header
// commits to the policy file and the lockfile a producer decided calls
// under, whose exact bytes the pack retains, and each attempt carries the
// decision the gate made before forwarding it. A verifier re-derives every
// decision from those bytes, the request bytes and the snapshot the attempt
// bound.

// Policy modes (PolicyRef.Mode) and decision actions, as internal/policy
// names them.
const (
	policyEnforce = "enforce" // a denied call was not forwarded: the client got a JSON-RPC error naming the rule
	policyAudit   = "audit"   // shadow: every call was decided and recorded, and forwarded anyway
	decisionAllow = "allow"
	decisionDeny  = "deny"
	// decisionApprove: an approve rule matched; the call went on only with
	// an approval (an observation of kind approval.Kind).
	decisionApprove = "approve"
)

// ObsDenied: the call was denied by the policy or the lock in enforce mode:
// recorded, never forwarded; the client got a JSON-RPC error naming the
// rule. It is the attempt's terminal observation.
const ObsDenied = "denied"

// PolicyRef is the header's commitment to what decided calls: the exact
// bytes of the policy file and of the lockfile, each by SHA-256 (unsalted:
// a policy is read by whoever verifies the decisions) and length. The pack
// retains the bytes under those digests.
type PolicyRef struct {
	Mode         string `json:"mode"`                    // enforce | audit
	PolicyDigest string `json:"policy_digest,omitempty"` // the policy file, when one was in force
	PolicyLength int64  `json:"policy_length,omitempty"`
	LockDigest   string `json:"lock_digest,omitempty"` // the lockfile, when one was in force
	LockLength   int64  `json:"lock_length,omitempty"`
}

// Decision is what the gate decided for an attempt before forwarding it.
// Its inputs are the attempt's request bytes and the snapshot it bound
// (whose declaration of the tool has the digest Declaration).
type Decision struct {
	Action      string `json:"action"`                // allow | deny | approve
	Rule        string `json:"rule"`                  // the rule's id, "default", or "pin"
	Reason      string `json:"reason,omitempty"`      // drifted fields, an evaluation error
	Declaration string `json:"declaration,omitempty"` // digest of the tool's declaration in the bound snapshot, when it has exactly one
}

// Bounds of decision members.
const (
	maxRuleBytes   = 64
	maxReasonBytes = 512
)

func (p *PolicyRef) validate() *invalid {
	if p == nil {
		return nil
	}
	e := first(
		oneOf("policy.mode", p.Mode, policyEnforce, policyAudit),
		optDigest("policy.policy_digest", p.PolicyDigest),
		nonneg("policy.policy_length", p.PolicyLength),
		optDigest("policy.lock_digest", p.LockDigest),
		nonneg("policy.lock_length", p.LockLength),
	)
	switch {
	case e != nil:
	case p.PolicyDigest == "" && p.LockDigest == "":
		e = bad("policy: names neither a policy nor a lock")
	case p.PolicyDigest == "" && p.PolicyLength != 0, p.LockDigest == "" && p.LockLength != 0:
		e = bad("policy: a length without its digest")
	}
	return e
}

func (d *Decision) validate() *invalid {
	if d == nil {
		return nil
	}
	e := first(
		oneOf("decision.action", d.Action, decisionAllow, decisionDeny, decisionApprove),
		short("decision.rule", d.Rule, maxRuleBytes),
		short("decision.reason", d.Reason, maxReasonBytes),
		optDigest("decision.declaration", d.Declaration),
	)
	if e == nil && d.Rule == "" {
		e = bad("decision.rule is empty")
	}
	return e
}

func (p *PolicyRef) encode(e *encoder) {
	e.key("policy")
	e.open()
	e.optStr("lock_digest", p.LockDigest)
	e.optInt("lock_length", p.LockLength)
	e.str("mode", p.Mode)
	e.optStr("policy_digest", p.PolicyDigest)
	e.optInt("policy_length", p.PolicyLength)
	e.close()
}

func (d *Decision) encode(e *encoder) {
	e.key("decision")
	e.open()
	e.str("action", d.Action)
	e.optStr("declaration", d.Declaration)
	e.optStr("reason", d.Reason)
	e.str("rule", d.Rule)
	e.close()
}

// An approval observation (kind approval.Kind) carries its approval member
// and nothing a response or a failure carries; no other kind carries one.
func validateApproval(o *Observation) *invalid {
	isApproval := o.Kind == approval.Kind
	switch {
	case isApproval != (o.Approval != nil):
		return bad("kind %s: approval is present iff the kind is %s", o.Kind, approval.Kind)
	case !isApproval:
		return nil
	case o.Detail != "" || o.Response != nil || o.Frame != nil || o.Terminator != "" || o.ResultType != "" || o.IsError || o.ErrorCode != nil:
		return bad("kind %s: carries only its approval", o.Kind)
	}
	if why := o.Approval.Check(); why != "" {
		return bad("%s", why)
	}
	return nil
}

func encodeApproval(e *encoder, a *approval.Evidence) {
	e.key("approval")
	e.open()
	e.str("args_digest", a.ArgsDigest)
	e.optStr("by", a.By)
	e.str("outcome", a.Outcome)
	e.optStr("reason", a.Reason)
	e.str("via", a.Via)
	e.close()
}

func (d *lineDec) approval() *approval.Evidence {
	v := &approval.Evidence{}
	d.object(func(k string) {
		switch k {
		case "args_digest":
			v.ArgsDigest = d.str()
		case "by":
			v.By = d.str()
		case "outcome":
			v.Outcome = d.str()
		case "reason":
			v.Reason = d.str()
		case "via":
			v.Via = d.str()
		default:
			d.fail()
		}
	})
	return v
}
