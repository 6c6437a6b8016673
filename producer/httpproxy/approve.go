package httpproxy

import (
	"context"
	"net/http"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/transcript"
)

// pendingApproval is a call an approve rule matched (spec/policy.md,
// "Approval"): recorded in the client frame order, and asked about once
// the order is released, so that other clients' calls are not held while
// a human answers.
type pendingApproval struct {
	ref      session.AttemptRef
	line     []byte
	decision *transcript.Decision
}

// approve asks the approver about the exchange's call, after its attempt
// is durable, and reports whether it is forwarded; a call the approver did
// not approve (in enforce mode) is denied and answered here.
func (x *exchange) approve() bool {
	pa, m := x.approving, x.msg
	// Not the request's context: a client that hangs up does not decide
	// for the approver.
	refusal, err := x.b.sink.Approve(context.Background(), nil, pa.ref, pa.line, pa.decision)
	if err == nil && refusal != nil {
		if err = x.b.sink.Denied(pa.ref); err == nil {
			writeDenied(x.w, m, refusal)
			return false
		}
	}
	if err != nil {
		x.auditFail(err)
		return false
	}
	if c := x.call; c != nil {
		c.mu.Lock()
		c.approving = false
		c.mu.Unlock()
	}
	return true
}

// writeDenied answers a denied call: the JSON-RPC error naming the rule
// (HTTP 200), or HTTP 202 for a call without an id.
func writeDenied(w http.ResponseWriter, m *mcpwire.Message, d *transcript.Decision) {
	if m.Kind != mcpwire.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Del("Content-Length")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(session.DeniedResponse(idOf(m), d))
}
