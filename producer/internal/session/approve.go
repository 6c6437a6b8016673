package session

import (
	"bytes"
	"context"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// Approval (spec/policy.md, "Approval"). A call whose decision is approve
// (a policy rule with action approve matched it) is, once its attempt is
// durable, put to the recorder's approver (producer.Options.ApproveCommand,
// or the client itself with ApproveElicit: elicit.go), off the client
// reader (approveAsync):
// the answer (who, the digest of the arguments approved, the outcome) is
// recorded as the attempt's approval observation before anything else, and
// only an approved call is forwarded. In enforce mode a refusal, a timeout
// or a failed approver denies the call as a deny rule would (a denied
// observation, the client gets CodePolicyDenied naming the rule and why);
// in audit mode the answer is recorded and the call forwarded anyway.
// Calls whose decision is not approve never come here.

// Approving reports whether a call decided d waits for an approval.
func Approving(d *transcript.Decision) bool {
	return d != nil && d.Action == policy.Approve
}

// Approve asks the approver about the call ref (line, its exact bytes),
// decided d, and records the answer. It returns nil when the call goes on
// (approved, or audit mode), else the decision to deny it with (d, with
// the reason the client is told). An approver still deciding when ctx
// ends is given up: the approval failed ("the recording ended before the
// approver answered"). client asks the MCP client through elicitation
// (nil: it cannot be asked; approval.Gate.Ask).
func (s *RecordingSink) Approve(ctx context.Context, client approval.Asker, ref AttemptRef, line []byte, d *transcript.Decision) (*transcript.Decision, error) {
	gate := s.engine.Approval()
	var ev approval.Evidence
	ok, err := handleOf(ref).Approve(func(tool, digest string) approval.Evidence {
		ev = gate.Ask(ctx, client, ref.AttemptID(), tool, d.Rule, digest, line)
		return ev
	})
	if err != nil || ok || s.audit {
		return nil, err
	}
	denied := *d
	denied.Reason = refusalReason(ev)
	return &denied, nil
}

// refusalReason is what the client is told of an approval that is not one.
func refusalReason(ev approval.Evidence) string {
	why := "approval " + ev.Outcome
	switch ev.Outcome {
	case approval.Refused:
		why = "approval refused"
		if ev.Reason != "" {
			why += ": " + ev.Reason
		}
	case approval.Timeout:
		why = "approval timed out"
	case approval.Failed:
		why = "approval failed: " + ev.Reason
	}
	return why
}

// approveCall is Approve for the session core: the attempt made durable
// first (wait), so the approver is asked only about a recorded call; the
// client is asked when the recorder elicits and it declared elicitation.
func (s *session) approveCall(ref AttemptRef, wait func() error, line []byte, m *mcpwire.Message, d *transcript.Decision) (*transcript.Decision, error) {
	if wait != nil {
		if err := wait(); err != nil {
			return nil, err
		}
	}
	return s.cfg.policy.Approve(s.ending, s.clientAsker(s.cfg.policy.engine.Approval(), m), ref, line, d)
}

// approveAsync puts the call (its attempt written, wait its durable wait)
// to the approver off the client reader, which goes on: the client's
// answer to an elicitation comes on the stream it reads, and its other
// calls are not held. The call is counted busy (waitIdle) until it is
// forwarded or denied, and clientToServer waits for it before closing the
// server's queue. When the approval ends the call goes on exactly as a
// call read then would (forwardCall), or is denied (denyCall).
func (s *session) approveAsync(ref AttemptRef, wait func() error, line []byte, d *transcript.Decision) {
	line = bytes.Clone(line) // the reader's buffer is reused
	s.mu.Lock()
	s.busy++ // within the reader's own busy section: never after stop
	s.mu.Unlock()
	s.asking.Add(1)
	go func() {
		defer s.asking.Done()
		defer s.leaveBusy()
		m, _ := mcpwire.Read(line) // the bytes the gate read: the same message
		key := m.IDText()
		refusal, err := s.approveCall(ref, wait, line, m, d)
		if err == nil && refusal != nil {
			_ = s.denyCall(ref, nil, key, m.Kind, refusal)
			return
		}
		_ = s.forwardCall(ref, nil, err, line, m, key, d)
	}()
}
