package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
)

// Elicitation (spec/policy.md, "Approval"): with --approve-elicit the
// recorder asks the MCP client itself, with an elicitation/create request
// on the client's own stream, when the client declared the elicitation
// capability in its initialize request. The transport (the session core)
// sends the request and hands the client's response back; this file is
// the protocol's text: what is asked and how the answer is read.

// ElicitMethod is the MCP method of the request the client is asked with.
const ElicitMethod = "elicitation/create"

// ElicitIDPrefix begins the id of every elicitation request the recorder
// sends (a JSON string, then a per-session nonce and the attempt id): a
// namespace of its own, apart from the client's and the server's ids.
const ElicitIDPrefix = "tracectl-approval-"

// maxShownArguments bounds the arguments quoted in the message shown to
// the client's user (the digest binds them whole).
const maxShownArguments = 4096

// ClientBy is the approval's by for a client named name in its initialize
// request (clientInfo.name): "client:" and the name, bounded, or "client"
// when it gave none.
func ClientBy(name string) string {
	if name == "" {
		return "client"
	}
	return bound("client:"+name, MaxByBytes)
}

// ElicitParams is the params object of the elicitation/create request that
// asks the client about req: a printable-ASCII message naming the tool, the
// rule and the (redacted) arguments, and a flat form schema (a boolean
// approve, an optional reason). The form mode is the default of every MCP
// revision that has elicitation, so "mode" is not sent.
func ElicitParams(req *Request) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "tracectl: approve the call of tool %s (policy rule %s, attempt %s)?\n", quote(req.Tool), quote(req.Rule), quote(req.AttemptID))
	switch {
	case req.Arguments != nil:
		// Compact, as the approve command gets them (json.Marshal compacts
		// a RawMessage): white space between tokens (tabs the gate lets a
		// request carry) is neither shown nor counted against the bound.
		var c bytes.Buffer
		raw := []byte(req.Arguments)
		if json.Compact(&c, raw) == nil {
			raw = c.Bytes()
		}
		args := asciiJSON(raw)
		if len(args) > maxShownArguments {
			args = append(args[:maxShownArguments:maxShownArguments], fmt.Sprintf("... (%d bytes more)", len(args)-maxShownArguments)...)
		}
		b.WriteString("arguments: ")
		b.Write(args)
		if len(req.Redacted) > 0 {
			fmt.Fprintf(&b, "\n(%d values redacted)", len(req.Redacted))
		}
	case req.ArgumentsWithheld != "":
		b.WriteString("arguments withheld: " + quote(req.ArgumentsWithheld))
	default:
		b.WriteString("no arguments")
	}
	b.WriteString("\narguments digest: " + req.ArgsDigest)
	params := struct {
		Message string          `json:"message"`
		Schema  json.RawMessage `json:"requestedSchema"`
	}{b.String(), json.RawMessage(elicitSchema)}
	out, _ := json.Marshal(params)
	return asciiJSON(out)
}

// elicitSchema is the form asked for: flat primitives only, as MCP
// requires of a requestedSchema.
const elicitSchema = `{"type":"object","properties":{` +
	`"approve":{"type":"boolean","title":"Approve this call","description":"true lets the call go to the server; false denies it"},` +
	`"reason":{"type":"string","title":"Reason","description":"optional, recorded with the answer","maxLength":512}},` +
	`"required":["approve"]}`

// quote is s as a printable-ASCII Go string literal.
func quote(s string) string { return strconv.QuoteToASCII(s) }

// ElicitAnswer reads the client's answer to an elicitation request: the
// result of its response (result valid), or its error (errValue valid). A
// result is read strictly: an object with action accept, decline or
// cancel; with accept, content is an object with a boolean approve and at
// most a string reason, nothing else; no member repeated. by is the
// approval's by (ClientBy). Anything else is Failed.
func ElicitAnswer(result, errValue canon.Value, by string) Evidence {
	ev := Evidence{Via: ViaElicitation}
	fail := func(why string) Evidence {
		ev.Outcome, ev.Reason = Failed, bound(why, MaxReasonBytes)
		return ev
	}
	if errValue.Valid() {
		code, msg := "", ""
		if c, ok := errValue.Get("code"); ok {
			code = string(c.Raw())
		}
		if m, ok := errValue.Get("message"); ok {
			msg, _ = m.Str()
		}
		return fail("the client answered with error " + bound(code, 32) + ": " + quote(bound(msg, 256)))
	}
	if !result.Valid() || result.Kind() != canon.KindObject || result.HasDuplicates() {
		return fail("the client's answer is not an elicitation result (an object, each member once)")
	}
	var action string
	var content canon.Value
	for _, m := range result.Members() {
		switch m.Name {
		case "action":
			action, _ = m.Value.Str()
		case "content":
			content = m.Value
		case "_meta":
		default:
			return fail("the client's elicitation result has a member " + quote(bound(m.Name, 64)) + ": want action, content, _meta")
		}
	}
	switch action {
	case "decline":
		ev.Outcome, ev.Reason = Refused, "the client declined"
		return ev
	case "cancel":
		ev.Outcome, ev.Reason = Refused, "the client cancelled"
		return ev
	case "accept":
	default:
		return fail("the client's elicitation result has no action accept, decline or cancel")
	}
	if !content.Valid() || content.Kind() != canon.KindObject || content.HasDuplicates() {
		return fail("the client accepted without content (an object, each member once)")
	}
	var approve *bool
	for _, m := range content.Members() {
		switch m.Name {
		case "approve":
			if v, ok := m.Value.Bool(); ok {
				approve = &v
			}
		case "reason":
			r, ok := m.Value.Str()
			if !ok {
				return fail(`the client's content.reason is not a string`)
			}
			ev.Reason = bound(r, MaxReasonBytes)
		default:
			return fail("the client's content has a member " + quote(bound(m.Name, 64)) + ": want approve, reason")
		}
	}
	switch {
	case approve == nil:
		return fail(`the client accepted without a boolean content.approve`)
	case *approve:
		ev.Outcome, ev.By = Approved, by
	default:
		ev.Outcome = Refused
	}
	return ev
}
