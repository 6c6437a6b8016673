package transcript

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
	Action      string `json:"action"`                // allow | deny
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
		oneOf("decision.action", d.Action, decisionAllow, decisionDeny),
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
