package session

import (
	"github.com/tracectl/tracectl/mcpwire"
)

// Open is what a transport knows of the requests one server message could
// answer, and of those already answered. The stdio and in-process session
// keeps one table for the whole session (any response may answer any open
// request); the HTTP proxy keeps one per exchange (a POST's stream answers
// that POST's request) and one set of settled ids per bundle. Rule is the
// one order of decisions both apply to it.
type Open interface {
	// Exact reports whether an open, unanswered request has exactly this
	// id text: the response is its answer.
	Exact(idText string) bool
	// Matches reports whether a client could take a message with one of
	// keys (mcpwire.MatchKey) as an open request's answer.
	Matches(keys []string) bool
	// Settled reports whether one of keys names a request already
	// answered (delivered, or answered by the proxy).
	Settled(keys []string) bool
	// AnsweredByProxy reports whether the proxy itself answered the
	// request under exactly this id text (a timeout or a cancellation it
	// settled): the server's late answer is kept, never delivered.
	AnsweredByProxy(idText string) bool
}

// Ruling is what mediation decides for one server message.
type Ruling struct {
	// Refusal is nil for a message delivered as it is. Otherwise the
	// message is committed refused (or withheld: Withheld) and not
	// delivered.
	Refusal *mcpwire.Refusal
	// Withheld: committed as the proxy's own to keep (AnsweredByProxy),
	// neither delivered nor refused.
	Withheld bool
	// Answers: a client could have taken the refused message as an open
	// request's answer. The transport settles that request itself (a
	// transport failure for a call) and answers the client with the
	// proxy's error, so what the client acts on is what the bundle says.
	Answers bool
}

// Rule decides what becomes of one server message (spec/transcript.md,
// "Server to client"), in this order:
//
//  1. framing: a refusal of the container that carried it (an SSE event a
//     reader parses differently), whatever its bytes;
//  2. the gate: bytes the gate does not read (gate is its refusal; body is
//     the message without terminator), matched by the ids a lenient reader
//     takes from them;
//  3. client readability: a message the gate reads and a client reads
//     differently (mcpwire's ClientReadable, or stdio's padded: white
//     space after the object);
//  4. responses: delivered only as the first answer to an open request
//     under its exact id; otherwise withheld (the proxy answered that id),
//     an id twin (another spelling a client matches), a second answer to a
//     settled request, or unsolicited (stray: the rule the transport names
//     for an id it has no open request under).
//
// Requests and notifications that pass 1–3 are delivered.
func Rule(m *mcpwire.Message, gate, framing *mcpwire.Refusal, body []byte, padded bool, open Open, stray mcpwire.Rule) Ruling {
	answers := func() bool {
		if m == nil {
			return open.Matches(mcpwire.LenientIDs(body))
		}
		return m.Kind == mcpwire.KindResponse && open.Matches(mcpwire.ResponseKeys(m.ID))
	}
	if m == nil {
		return Ruling{Refusal: gate, Answers: answers()}
	}
	if framing != nil {
		return Ruling{Refusal: framing, Answers: answers()}
	}
	if r := m.ClientReadable(); r != nil {
		return Ruling{Refusal: r, Answers: answers()}
	}
	if padded {
		return Ruling{Refusal: &mcpwire.Refusal{Rule: mcpwire.RulePadded, Detail: "white space after the JSON object", ID: "null"}, Answers: answers()}
	}
	if m.Kind != mcpwire.KindResponse {
		return Ruling{}
	}
	id := m.IDText()
	if open.Exact(id) {
		return Ruling{}
	}
	if open.AnsweredByProxy(id) {
		return Ruling{Withheld: true}
	}
	keys := mcpwire.ResponseKeys(m.ID)
	if open.Matches(keys) {
		return Ruling{Refusal: &mcpwire.Refusal{Rule: mcpwire.RuleIDTwin, Detail: "id " + boundedID(id) + " is not the open request's id, but a client matches it to that request", ID: "null"}, Answers: true}
	}
	if open.Settled(keys) {
		return Ruling{Refusal: &mcpwire.Refusal{Rule: mcpwire.RuleSettledResponse, Detail: "id " + boundedID(id) + " names a request already answered", ID: "null"}}
	}
	detail := "id " + boundedID(id) + " names no open request"
	if stray == mcpwire.RuleForeignResponse {
		detail = "id " + boundedID(id) + " is not the id of this exchange's request"
	}
	return Ruling{Refusal: &mcpwire.Refusal{Rule: stray, Detail: detail, ID: "null"}}
}
