package transcript

// Policy evidence (v4, optional; spec/policy.md, "Evidence"): the header
// commits to the policy file and the lockfile a producer decided calls
// under, whose exact bytes the pack retains, and each attempt carries the
// decision the gate made before forwarding it. A verifier re-derives every
// decision from those bytes, the request bytes and the snapshot the attempt
// bound.

// Policy modes (PolicyRef.Mode).
const (
	PolicyEnforce = "enforce" // a denied call was not forwarded: the client got CodePolicyDenied
	PolicyAudit   = "audit"   // shadow: every call was decided and recorded, and forwarded anyway
)

// Decision actions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// ObsDenied: the call was denied by the policy or the lock in enforce mode:
// recorded, never forwarded; the client got a JSON-RPC error naming the
// rule. It is the attempt's terminal observation.
const ObsDenied = "denied"

// PolicyRef is the header's commitment to what decided calls.
type PolicyRef struct {
	Mode   string       `json:"mode"`             // enforce | audit
	Policy *PolicyBytes `json:"policy,omitempty"` // the policy file, when one was in force
	Lock   *PolicyBytes `json:"lock,omitempty"`   // the lockfile, when one was in force
}

// PolicyBytes commits to a file's exact bytes: SHA-256 (unsalted: a policy
// is read by whoever verifies the decisions) and length. The pack retains
// the bytes under that digest.
type PolicyBytes struct {
	Digest string `json:"digest"`
	Length int64  `json:"length"`
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
	e := oneOf("policy.mode", p.Mode, PolicyEnforce, PolicyAudit)
	if e == nil && p.Policy == nil && p.Lock == nil {
		e = bad("policy: names neither a policy nor a lock")
	}
	for _, b := range []struct {
		name string
		v    *PolicyBytes
	}{{"policy.policy", p.Policy}, {"policy.lock", p.Lock}} {
		if e == nil && b.v != nil {
			e = first(digest(b.name+".digest", b.v.Digest), nonneg(b.name+".length", b.v.Length))
		}
	}
	return e
}

func (d *Decision) validate() *invalid {
	if d == nil {
		return nil
	}
	e := first(
		oneOf("decision.action", d.Action, DecisionAllow, DecisionDeny),
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
	if p.Lock != nil {
		e.key("lock")
		p.Lock.encode(e)
	}
	e.str("mode", p.Mode)
	if p.Policy != nil {
		e.key("policy")
		p.Policy.encode(e)
	}
	e.close()
}

func (b *PolicyBytes) encode(e *encoder) {
	e.open()
	e.str("digest", b.Digest)
	e.int("length", b.Length)
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
