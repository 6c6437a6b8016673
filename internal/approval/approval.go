// Package approval asks a human before a call a policy's approve rule
// matched is forwarded (spec/policy.md, "Approval"), and is the evidence of
// the answer: an observation of kind "approval" bound to the attempt by its
// id and by the digest of the exact arguments approved.
//
// Two askers: a command (--approve-cmd), run as argv, no shell, with a
// minimal environment, a JSON request on stdin and a small JSON answer on
// stdout; and the MCP client itself (--approve-elicit), through an
// elicitation/create request its session sends (elicit.go holds the
// protocol's text). Whatever is not a clear approval within the timeout (a
// refusal, a non-zero exit, output that is not the answer or is too long,
// no answer in time) denies the call, and the evidence says why.
package approval

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Kind is the observation kind of an approval (transcript.Observation.Kind).
const Kind = "approval"

// Outcomes of an approval.
const (
	Approved = "approved" // the approver approved these arguments
	Refused  = "refused"  // the approver said no
	Timeout  = "timeout"  // no answer within the timeout: the approver was killed
	Failed   = "failed"   // the approver failed: a non-zero exit, an answer that is not one, too much output
)

// Vias: how the approver was asked.
const (
	ViaCommand     = "command"     // the approve command (--approve-cmd)
	ViaElicitation = "elicitation" // the MCP client, through elicitation/create (--approve-elicit)
)

// Bounds.
const (
	MaxByBytes      = 128  // Evidence.By
	MaxReasonBytes  = 512  // Evidence.Reason
	MaxAnswerBytes  = 4096 // an approver's whole stdout
	maxStderrBytes  = 1024 // what of an approver's stderr a failure's reason quotes
	DefaultTimeout  = 60 * time.Second
	maxArgvElements = 64
)

// Evidence is the approval of one attempt, recorded on its observation
// line before the call is forwarded or denied.
type Evidence struct {
	Outcome    string `json:"outcome"`          // Approved, Refused, Timeout or Failed
	By         string `json:"by,omitempty"`     // who, as the approver said (Approved: required)
	Reason     string `json:"reason,omitempty"` // the approver's reason, or why it failed
	ArgsDigest string `json:"args_digest"`      // the attempt's arguments digest (ArgsDigestOf) the approver was shown
	Via        string `json:"via"`              // ViaCommand or ViaElicitation
}

// Check says what is wrong with e ("" when nothing): the transcript's
// validation of an approval member.
func (e *Evidence) Check() string {
	switch {
	case e.Outcome != Approved && e.Outcome != Refused && e.Outcome != Timeout && e.Outcome != Failed:
		return "approval.outcome: want approved, refused, timeout or failed"
	case e.Via != ViaCommand && e.Via != ViaElicitation:
		return "approval.via: want command or elicitation"
	case !isDigest(e.ArgsDigest):
		return "approval.args_digest: want sha256:<64 hex>"
	case len(e.By) > MaxByBytes || !utf8.ValidString(e.By):
		return "approval.by: longer than 128 bytes or not UTF-8"
	case len(e.Reason) > MaxReasonBytes || !utf8.ValidString(e.Reason):
		return "approval.reason: longer than 512 bytes or not UTF-8"
	case e.Outcome == Approved && e.By == "":
		return "approval.by: an approval names who approved"
	}
	return ""
}

func isDigest(s string) bool {
	if len(s) != len("sha256:")+64 || s[:7] != "sha256:" {
		return false
	}
	for _, c := range s[7:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ArgsDigestOf is the digest an approval of an attempt binds: the
// attempt's salted arguments digest (args_digest), or, when the arguments
// have none (a number the canonical form does not support), the digest of
// the exact request bytes (request.original when the retained copy is
// redacted, else request.digest). verify compares the two.
func ArgsDigestOf(argsDigest, requestDigest, requestOriginal string) string {
	switch {
	case argsDigest != "":
		return argsDigest
	case requestOriginal != "":
		return requestOriginal
	}
	return requestDigest
}

// Request is what an approver is asked (on a command's stdin, one JSON
// object).
type Request struct {
	Version    int    `json:"version"` // 1
	AttemptID  string `json:"attempt_id"`
	Tool       string `json:"tool"`
	Rule       string `json:"rule"`
	ArgsDigest string `json:"args_digest"`
	// Arguments are params.arguments as the bundle keeps them: redacted
	// with the recorder's rules. Absent with ArgumentsWithheld saying why.
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ArgumentsWithheld string          `json:"arguments_withheld,omitempty"`
	Redacted          []string        `json:"redacted,omitempty"` // JSON pointers (into the request) of the values hidden
}

// Asker asks an approver about one call. It never fails: what is not an
// approval is a refusal, a timeout or a failure, with its reason. The
// evidence's ArgsDigest is the caller's.
type Asker interface {
	Ask(ctx context.Context, req *Request) Evidence
}

// Gate is the approval in force for a recording: who is asked and how the
// arguments they are shown are redacted.
type Gate struct {
	Asker Asker // the approve command, or nil
	// Elicit: ask the MCP client itself (elicitation/create) when it
	// declared the capability; else Asker, or, with none, the approval
	// fails.
	Elicit bool
	// Timeout bounds an elicitation (0: DefaultTimeout); After is its
	// timer (nil: time.After), tests inject their own.
	Timeout time.Duration
	After   func(time.Duration) <-chan time.Time
	// Arguments returns params.arguments of the exact request line as the
	// bundle would keep them (redacted), the pointers it hid, or why they
	// are withheld.
	Arguments func(line []byte) (args json.RawMessage, redacted []string, withheld string)
}

// Ask asks the approver about the call: its evidence, bound to digest.
// client asks the MCP client (nil when the client did not declare
// elicitation, or the transport cannot ask it): with Elicit, it is asked
// when there is one; else the approve command; with neither, the
// approval fails.
func (g *Gate) Ask(ctx context.Context, client Asker, attemptID, tool, rule, digest string, line []byte) Evidence {
	req := &Request{Version: 1, AttemptID: attemptID, Tool: tool, Rule: rule, ArgsDigest: digest}
	if g.Arguments != nil {
		req.Arguments, req.Redacted, req.ArgumentsWithheld = g.Arguments(line)
	}
	asker, via := g.Asker, ViaCommand
	if g.Elicit && (client != nil || asker == nil) {
		asker, via = client, ViaElicitation
	}
	var ev Evidence
	if asker == nil {
		ev = Evidence{Outcome: Failed, Reason: "the client did not declare elicitation", Via: ViaElicitation}
	} else {
		ev = asker.Ask(ctx, req)
	}
	ev.ArgsDigest = digest
	ev.By = bound(ev.By, MaxByBytes)
	ev.Reason = bound(ev.Reason, MaxReasonBytes)
	if ev.Outcome == Approved && ev.By == "" {
		ev = Evidence{Outcome: Failed, Reason: "the approver approved without saying who (by)", ArgsDigest: digest, Via: via}
	}
	if why := ev.Check(); why != "" {
		// An asker's answer that is not evidence is no approval.
		ev = Evidence{Outcome: Failed, Reason: bound("the approver's answer is not evidence: "+why, MaxReasonBytes), ArgsDigest: digest, Via: via}
	}
	return ev
}

// bound cuts s to at most n bytes of valid UTF-8.
func bound(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
