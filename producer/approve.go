package producer

import (
	"encoding/json"
	"fmt"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/transcript"
)

// Approval states of an attempt (attemptState.approval).
const (
	approvalNone     uint8 = iota // its decision is not approve
	approvalPending               // approve: not asked yet
	approvalAsking                // the approver is being asked
	approvalGranted               // approved: it may be forwarded
	approvalWithheld              // refused, timed out or failed: in enforce mode, denied
)

// withApproval sets the approver of engine's approve decisions from the
// options, and refuses a policy with an approve rule and nobody to ask.
func (o Options) withApproval(engine *policy.Engine) error {
	if engine == nil {
		if len(o.ApproveCommand) > 0 || o.ApproveElicit {
			return fmt.Errorf("%w: an approver without a policy", ErrInvalidOptions)
		}
		return nil
	}
	if len(o.ApproveCommand) > 0 || o.ApproveElicit {
		if len(o.ApproveCommand) > 0 && o.ApproveCommand[0] == "" {
			return fmt.Errorf("%w: the approve command is empty", ErrInvalidOptions)
		}
		if o.ApproveTimeout < 0 {
			return fmt.Errorf("%w: a negative approve timeout", ErrInvalidOptions)
		}
		if o.ApproveElicit && o.Server.Transport == transcript.TransportHTTP {
			// The HTTP proxy cannot ask its clients yet (spec/policy.md,
			// "Not done"): refused here rather than every approval failing.
			return fmt.Errorf("%w: ApproveElicit: the HTTP proxy cannot ask its clients through elicitation yet; use ApproveCommand", ErrInvalidOptions)
		}
		var rules *redact.Rules
		if !o.NoRedaction {
			rules = o.Redact
			if rules == nil {
				rules = redact.Default()
			}
		}
		g := &approval.Gate{
			Elicit:    o.ApproveElicit,
			Timeout:   o.ApproveTimeout,
			Arguments: func(line []byte) (json.RawMessage, []string, string) { return approverArguments(line, rules) },
		}
		if len(o.ApproveCommand) > 0 {
			g.Asker = &approval.Command{Argv: append([]string(nil), o.ApproveCommand...), Timeout: o.ApproveTimeout}
		}
		engine.WithApproval(g)
	}
	if err := engine.CheckApproval(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

// approverArguments are a request's params.arguments as the bundle keeps
// them: redacted with rules (nil: exact). Arguments that cannot be
// redacted exactly are withheld from the approver too.
func approverArguments(line []byte, rules *redact.Rules) (json.RawMessage, []string, string) {
	body, _ := splitTerminator(line)
	var hidden []string
	if rules != nil {
		res, err := redact.Message(body, rules)
		if err != nil || !fitsLine(res.Redactions) {
			return nil, nil, transcript.WithheldUnredactable
		}
		body = res.Redacted
		for _, x := range res.Redactions {
			hidden = append(hidden, x.Pointer)
		}
	}
	var m struct {
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, nil, "unreadable"
	}
	return m.Params.Arguments, hidden, ""
}

// Approve asks about the call, whose attempt's decision is approve, and
// records the answer before the call is forwarded or denied: ask gets the
// tool and the digest the approval binds (approval.ArgsDigestOf of the
// attempt line) and gives the approver's evidence. It reports whether the
// approver approved; in strict durability the answer is durable when
// Approve returns. After an answer that is not approved, in enforce mode,
// Denied is the call's only observation.
func (h *Handle) Approve(ask func(tool, digest string) approval.Evidence) (bool, error) {
	r, st := h.r, h.st
	r.mu.Lock()
	switch {
	case st.approval == approvalNone:
		r.mu.Unlock()
		return false, fmt.Errorf("attempt %s: %w: only a call whose decision is approve is approved", st.id, ErrObservation)
	case st.approval != approvalPending || st.status != stInFlight || st.timedOut || st.canceled || st.resolved:
		r.mu.Unlock()
		return false, fmt.Errorf("attempt %s: %w: an approval comes once, before anything else is observed", st.id, ErrObservation)
	}
	st.approval = approvalAsking
	r.mu.Unlock()
	ev := ask(st.tool, st.approvalDigest)
	ev.ArgsDigest = st.approvalDigest
	if err := r.begin(false); err != nil {
		return false, err
	}
	defer r.ops.Done()
	granted := ev.Outcome == approval.Approved
	r.mu.Lock()
	if granted {
		st.approval = approvalGranted
	} else {
		st.approval = approvalWithheld
	}
	r.mu.Unlock()
	o := &transcript.Observation{AttemptID: st.id, Kind: approval.Kind, Basis: transcript.BasisProducer, Approval: &ev}
	seq, err := r.j.appendWritten(r.lineOf(func(s, at int64) { o.Seq, o.AtMs = s, at }, o))
	if err == nil {
		err = r.j.settle(seq)
	}
	return err == nil && granted, err
}
