package session

import (
	"encoding/json"
	"strconv"

	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// Policy decisions (spec/policy.md). After the gate read a tools/call and
// before it is forwarded, the call is decided under the recorder's policy
// and lock (producer.Recorder.Policy), with the snapshot its attempt binds:
// the decision is made where the attempt line takes its place in the
// journal, so the binding it reads is the line's, and it is committed on
// that line. In enforce mode a denied call is then settled at once: a
// denied observation, and the client gets CodePolicyDenied naming the
// rule; the server never sees it. The stdio and in-process adapters go
// through the session core (flow.go); the HTTP proxy calls the same
// RecordingSink methods.

// CodePolicyDenied is the JSON-RPC error code a denied call is answered
// with (spec/policy.md), beside mcpwire's -32091..-32093.
const CodePolicyDenied = -32094

// Decider returns the decision function of the tools/call m (for
// Call.Decide) and where its decision lands once the attempt is written;
// both nil when no policy is in force.
func (s *RecordingSink) Decider(m *mcpwire.Message) (func(*transcript.Attempt, *policy.Snapshot) *transcript.Decision, *transcript.Decision) {
	if s == nil || s.engine == nil {
		return nil, nil
	}
	out := &transcript.Decision{}
	return func(a *transcript.Attempt, decls *policy.Snapshot) *transcript.Decision {
		// The tool as the attempt line records it, which is what a
		// verifier reads.
		in := policy.Input{Tool: a.Tool, Snapshot: decls}
		in.Args, _ = m.Params.Get("arguments")
		d, decl := s.engine.DecideDeclared(in)
		*out = transcript.Decision{Action: d.Action, Rule: d.Rule, Reason: d.Reason, Declaration: decl}
		return out
	}, out
}

// Enforced reports whether a call decided d is not forwarded: a deny, in
// enforce mode.
func (s *RecordingSink) Enforced(d *transcript.Decision) bool {
	return s != nil && d != nil && d.Action == policy.Deny && !s.audit
}

// Denied records that a call Enforced denies was not forwarded.
func (s *RecordingSink) Denied(a AttemptRef) error { return handleOf(a).Denied() }

// decider is the session core's Decider.
func (s *session) decider(m *mcpwire.Message) (func(*transcript.Attempt, *policy.Snapshot) *transcript.Decision, *transcript.Decision) {
	return s.cfg.policy.Decider(m)
}

func (s *session) enforced(d *transcript.Decision) bool { return s.cfg.policy.Enforced(d) }

// denyCall settles a call its decision denied: its attempt durable, the
// denied observation, and the client's error (none for a call without an
// id). Nothing reaches the server.
func (s *session) denyCall(ref AttemptRef, wait func() error, key string, kind mcpwire.Kind, d *transcript.Decision) error {
	var err error
	if wait != nil {
		err = wait()
	}
	if err == nil {
		err = s.cfg.policy.Denied(ref)
	}
	if err != nil {
		s.noteSinkErr(err)
		if kind != mcpwire.KindRequest {
			return nil
		}
		return s.writeClient(errorLine(key, codeAuditUnavailable, "tracectl: not forwarded: "+ErrAuditUnavailable.Error()))
	}
	if kind != mcpwire.KindRequest {
		return nil
	}
	return s.writeClient(append(DeniedResponse(key, d), '\n'))
}

// DeniedResponse is the JSON-RPC error a denied call gets, under the exact
// id text, without a terminator: its message and data name the rule (and
// the reason, when there is one).
func DeniedResponse(idText string, d *transcript.Decision) []byte {
	msg := "tracectl: denied by policy rule " + d.Rule
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	data := struct {
		Source string `json:"source"`
		Reason string `json:"reason"`
		Rule   string `json:"rule"`
		Detail string `json:"detail,omitempty"`
	}{"tracectl", "policy_denied", d.Rule, d.Reason}
	m, _ := json.Marshal(msg)
	db, _ := json.Marshal(data)
	if idText == "" {
		idText = "null"
	}
	return []byte(`{"jsonrpc":"2.0","id":` + idText + `,"error":{"code":` + strconv.Itoa(CodePolicyDenied) + `,"message":` + string(m) + `,"data":` + string(db) + "}}")
}
