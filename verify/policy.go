package verify

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// Policy decisions (spec/policy.md, "Verification"). When the header
// commits to a policy or lock, every attempt carries the decision the gate
// made, and the verifier makes it again, offline, from the retained policy
// and lock bytes, the request bytes and the declarations of the snapshot
// the attempt bound: a decision that does not follow, an outcome that
// contradicts it (a response to a call denied in enforce mode, a denial of
// an allowed call) is decision_mismatch; a decision whose inputs are
// withheld or missing is decision_unverifiable (incomplete), never a pass.

// policyState is what the decision check keeps.
type policyState struct {
	ref     *transcript.PolicyRef
	engine  *policy.Engine // nil when the bytes are unavailable or unusable
	missing string         // why the engine is nil: the policy cannot be re-evaluated
	decls   map[string]*policy.Snapshot
	denied  map[string]bool // attempts whose recorded decision is deny in enforce mode
	allowed map[string]bool // attempts whose recorded decision is allow
	approve approvals       // attempts whose recorded decision is approve (approve.go)

	verified, unverifiable, bad, denies int64
}

// onPolicyHeader loads the policy and lock the header commits to.
func (b *bundleCheck) onPolicyHeader(h *transcript.Header) {
	p := h.Policy
	if p == nil {
		return
	}
	st := &b.pol
	st.ref = p
	st.decls = map[string]*policy.Snapshot{}
	st.denied, st.allowed = map[string]bool{}, map[string]bool{}
	read := func(what, digest string, length, max int64) []byte {
		if digest == "" {
			return nil
		}
		data, where, err := b.readPayload(digest, max)
		switch {
		case b.refused(where, checkPolicy, "line 0 /policy", err):
			st.missing = "the " + what + " file was refused"
		case errors.Is(err, fs.ErrNotExist) && b.partial:
			st.missing = "the disclosure does not carry the " + what + " bytes " + digest
		case errors.Is(err, fs.ErrNotExist):
			st.missing = "the " + what + " bytes " + digest + " are not in the bundle"
		case err != nil:
			st.missing = "the " + what + " bytes cannot be read: " + err.Error()
		case canon.SHA256(data) != digest || int64(len(data)) != length:
			b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, "line 0 /policy",
				fmt.Sprintf("the retained %s bytes (%d, %s) are not the %d bytes %s the header commits to", what, len(data), canon.SHA256(data), length, digest))
			st.missing = "the retained " + what + " is not the committed one"
		default:
			return data
		}
		return nil
	}
	pb := read("policy", p.PolicyDigest, p.PolicyLength, policy.MaxPolicyBytes)
	lb := read("lock", p.LockDigest, p.LockLength, policy.MaxLockBytes)
	if st.missing != "" {
		return
	}
	var pol *policy.Policy
	var lock *policy.Lock
	var err error
	if pb != nil {
		if pol, err = policy.Parse(pb); err != nil {
			b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, "line 0 /policy", "the committed policy does not compile, so no producer could have decided under it: "+err.Error())
			st.missing = "the policy does not compile"
			return
		}
	}
	if lb != nil {
		if lock, err = policy.ParseLock(lb); err != nil {
			b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, "line 0 /policy", "the committed lock cannot be read, so no producer could have decided under it: "+err.Error())
			st.missing = "the lock cannot be read"
			return
		}
	}
	st.engine = policy.NewEngine(pol, lock)
}

// checkDecision checks an attempt's decision: present exactly when the
// header commits to a policy, and re-derived from body (the request bytes;
// nil when unavailable) and the bound snapshot.
func (b *bundleCheck) checkDecision(a *transcript.Attempt, body []byte, redacted bool) {
	st := &b.pol
	subject := "attempt " + a.AttemptID
	d := a.Decision
	switch {
	case st.ref == nil && d == nil:
		return
	case st.ref == nil:
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject, "carries a decision, but the header commits to no policy or lock")
		return
	case d == nil:
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject, "carries no decision, but the header commits to a policy: every call is decided before it is forwarded")
		return
	}
	if d.Action == policy.Deny {
		st.denies++
		if st.ref.Mode == policy.ModeEnforce {
			st.denied[a.AttemptID] = true
		}
	} else {
		st.allowed[a.AttemptID] = true
		if d.Action == policy.Approve {
			b.noteApprove(a)
		}
	}
	unverifiable := func(why string) {
		st.unverifiable++
		if st.unverifiable <= maxFindingsPerCode {
			b.r.add(CodeDecisionUnverifiable, checkPolicy, StatusUnavailable, subject, "the decision ("+d.Action+" by rule "+boundedQuote(d.Rule)+") cannot be re-derived: "+why)
		}
	}
	switch {
	case st.engine == nil && st.missing != "":
		unverifiable(st.missing)
		return
	case st.engine == nil:
		return
	case !st.engine.HasRule(d.Rule):
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject, "names rule "+boundedQuote(d.Rule)+", which the committed policy does not have")
		return
	case body == nil:
		unverifiable("the request bytes are not available")
		return
	case redacted:
		unverifiable("the retained request is a redacted copy: the arguments decided on are not all there")
		return
	}
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: mcpwire.MaxFrameBytes}})
	if err != nil {
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject, "the request bytes are not strict JSON, so the gate never decided on them: "+err.Error())
		return
	}
	params, _ := doc.Root().Get("params")
	in := policy.Input{Tool: a.Tool}
	in.Args, _ = params.Get("arguments")
	if ref := a.Snapshot.ManifestDigest; ref != "" {
		s, why := b.policySnapshot(ref)
		if s == nil {
			unverifiable(why)
			return
		}
		if s.Unavailable(a.Tool) {
			unverifiable("the page bytes of the bound snapshot's declaration of " + boundedQuote(a.Tool) + " are not available")
			return
		}
		in.Snapshot = s
	}
	got, decl := st.engine.DecideDeclared(in)
	want := transcript.Decision{Action: got.Action, Rule: got.Rule, Reason: got.Reason, Declaration: decl}
	if want != *d {
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject,
			fmt.Sprintf("records %s by rule %s (%s); the committed policy and the request and snapshot it bound give %s by rule %s (%s)",
				d.Action, boundedQuote(d.Rule), boundedQuote(d.Reason), want.Action, boundedQuote(want.Rule), boundedQuote(want.Reason)))
		return
	}
	st.verified++
}

// policySnapshot loads the declarations of a bound snapshot once.
func (b *bundleCheck) policySnapshot(digest string) (*policy.Snapshot, string) {
	if s, ok := b.pol.decls[digest]; ok {
		if s == nil {
			return nil, "the bound snapshot's manifest is not available"
		}
		return s, ""
	}
	data, _, err := b.readPayload(digest, snapshot.MaxManifestBytes)
	var m *snapshot.Manifest
	if err == nil && canon.SHA256(data) == digest {
		m, err = snapshot.ParseManifest(data)
	}
	if err != nil || m == nil {
		b.pol.decls[digest] = nil
		return nil, "the bound snapshot's manifest is not available"
	}
	s := policy.NewSnapshot(m, func(d string) ([]byte, error) {
		data, _, err := b.readPayload(d, snapshot.CeilingMaxPageBytes)
		return data, err
	})
	b.pol.decls[digest] = s
	return s, ""
}

// decisionOutcome checks an observation against its attempt's decision: a
// call denied in enforce mode is never answered by the server, and only a
// denied call gets a denied observation.
func (b *bundleCheck) decisionOutcome(o *transcript.Observation) {
	st := &b.pol
	subject := "attempt " + o.AttemptID
	if b.approvalOutcome(o) {
		return
	}
	switch {
	case o.Kind == transcript.ObsDenied && !st.denied[o.AttemptID]:
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject, fmt.Sprintf("denied at seq %d, but its decision does not deny it in enforce mode", o.Seq))
	case o.Kind != transcript.ObsDenied && st.denied[o.AttemptID]:
		// A denied call is settled at once and never in flight: a
		// response, a transport failure, a timeout or a cancellation
		// means it was forwarded.
		st.bad++
		b.r.add(CodeDecisionMismatch, checkPolicy, StatusFail, subject, fmt.Sprintf("its decision denies it in enforce mode, yet a %s observation is recorded at seq %d: the call was forwarded", o.Kind, o.Seq))
	}
}

// policySummary reports the decisions re-derived.
func (b *bundleCheck) policySummary() {
	st := &b.pol
	if st.ref == nil {
		return
	}
	b.r.omit(CodeDecisionUnverifiable, StatusUnavailable, max(0, st.unverifiable-maxFindingsPerCode))
	if st.bad == 0 && st.unverifiable == 0 && b.r.Counts.Attempts > 0 {
		b.r.add(CodeDecisionsVerified, checkPolicy, StatusPass, "",
			fmt.Sprintf("%d decisions (%d deny) re-derived from the committed policy and lock (mode %s), the request bytes and the bound snapshots", st.verified, st.denies, st.ref.Mode))
	}
}
