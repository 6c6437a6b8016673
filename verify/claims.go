package verify

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// Claims against bytes (spec/verification.md, "Payloads"). An attempt,
// observation or notification line states facts about the message it
// commits to: the tool, the arguments' digest, the JSON-RPC id, the
// protocol revision, the correlation metadata, a response's result type and
// error. When the exact bytes are present and match their commitment, the
// verifier re-derives those facts with the producer's own derivation
// (transcript.Derive*) and compares: a signed line whose claim the bytes
// contradict is evidence_mismatch. When the bytes are unavailable the claim
// cannot be checked, and evidence_unavailable already says so.

// maxClaimQuote bounds each value quoted in a claim finding: values come
// from hostile bytes, so they are cut and escaped (strconv.Quote), never
// printed raw.
const maxClaimQuote = 64

// keepBodyBytes is the largest buffer kept between payloads; a larger one
// is released after use so one huge payload does not pin its memory.
const keepBodyBytes = 1 << 20

// diffs collects the members whose claim differs from the bytes.
type diffs []string

func (d *diffs) str(member, claim, derived string) {
	if claim != derived {
		*d = append(*d, member+": the line claims "+quote(claim)+", the bytes give "+quote(derived))
	}
}

func (d *diffs) text(member, claim, derived string) {
	if claim != derived {
		*d = append(*d, member+": the line claims "+claim+", the bytes give "+derived)
	}
}

// quote escapes s for a finding, cut to maxClaimQuote bytes first.
func quote(s string) string {
	if len(s) > maxClaimQuote {
		return strconv.Quote(s[:maxClaimQuote]) + "..."
	}
	return strconv.Quote(s)
}

func (b *bundleCheck) mismatchClaims(subject, what string, d diffs) {
	b.releaseBody()
	if len(b.red.reds) > 0 {
		d = b.uncovered(d, what)
	}
	if len(d) == 0 {
		return
	}
	b.pl.bad++
	b.r.add(CodeEvidenceMismatch, checkPayload, StatusFail, subject,
		what+" contradicts its retained bytes: "+strings.Join(d, "; "))
}

func (b *bundleCheck) releaseBody() {
	if cap(b.body) > keepBodyBytes {
		b.body = nil
	}
}

// errTooLongToDerive stands for the derivation of bytes longer than
// transcript.MaxDeriveBytes, which were streamed rather than read.
var errTooLongToDerive = errors.New("longer than the " + strconv.Itoa(transcript.MaxDeriveBytes) + " bytes a producer reads")

// attemptClaims checks an attempt line against its request bytes (body nil:
// longer than transcript.MaxDeriveBytes) and returns the facts the bytes
// give, or nil.
func (b *bundleCheck) attemptClaims(a *transcript.Attempt, body []byte, subject string) *transcript.RequestFacts {
	var f *transcript.RequestFacts
	err := errTooLongToDerive
	if pf := b.pk.cur; body != nil && pf != nil && pf.derived && sameBytes(body, pf.data) {
		f, err = pf.req, pf.reqErr // the line reader derived them (stream.go)
	} else if body != nil {
		f, err = transcript.DeriveRequest(body, b.toolUseMeta()...)
	}
	if err != nil {
		reason := err.Error()
		var nt *transcript.NotToolCallError
		if errors.As(err, &nt) {
			reason = nt.Reason
		}
		b.mismatchClaims(subject, "the attempt line", diffs{"request: the bytes are not a tools/call request a producer records (" + quote(reason) + ")"})
		return nil
	}
	args := f.ArgsDigest
	switch {
	case len(b.red.reds) > 0:
		// A redacted request: its arguments digest is over the exact
		// arguments, salted with the original's salt, which nobody keeps.
		args = a.ArgsDigest
	case b.pl.salt != nil:
		// v3: salted with the request payload's salt.
		args = transcript.SaltedArgsDigest(b.pl.salt, args)
	}
	var d diffs
	d.str("tool", a.Tool, f.Tool)
	d.str("tool_invalid", a.ToolInvalid, f.ToolInvalid)
	d.str("arguments_digest", a.ArgsDigest, args)
	d.str("arguments_unsupported", a.ArgsUnsupport, f.ArgsUnsupported)
	idClaims(&d, "jsonrpc_id", a.RPCID, f.RPCID)
	protoClaims(&d, a.Protocol, f)
	corrClaims(&d, "correlation.traceparent", a.Correlation.Traceparent, f.Correlation.Traceparent)
	corrClaims(&d, "correlation.tracestate", a.Correlation.Tracestate, f.Correlation.Tracestate)
	corrClaims(&d, "correlation.correlation_id", a.Correlation.CorrelationID, f.Correlation.CorrelationID)
	corrClaims(&d, "correlation.retry_of", a.Correlation.RetryOf, f.Correlation.RetryOf)
	if a.Correlation.ToolUseID != nil || (b.header != nil && b.header.Format == transcript.Format) {
		// Recorded since v4: a v4 line must claim the id its bytes carry
		// (and none they do not). Earlier producers did not record it, so
		// there only a recorded one is checked.
		corrClaims(&d, "correlation.tool_use_id", a.Correlation.ToolUseID, f.Correlation.ToolUseID)
	}
	b.mismatchClaims(subject, "the attempt line", d)
	return f
}

func idClaims(d *diffs, name string, claim, derived transcript.JSONRPCID) {
	d.text(name+".present", strconv.FormatBool(claim.Present), strconv.FormatBool(derived.Present))
	d.str(name+".kind", claim.Kind, derived.Kind)
	d.str(name+".text", claim.Text, derived.Text)
	d.str(name+".digest", claim.Digest, derived.Digest)
}

// protoClaims checks the request's own protocol facts. A request whose
// _meta carries no revision may be recorded absent or negotiated: the
// negotiated revision comes from the initialize exchange, not from these
// bytes, and era of an absent or malformed state is the session's.
func protoClaims(d *diffs, claim transcript.AttemptProto, f *transcript.RequestFacts) {
	switch f.ProtoState {
	case transcript.ProtoPresent:
		d.str("protocol.state", claim.State, f.ProtoState)
		d.str("protocol.era", string(claim.Era), string(mcpwire.EraModern))
		d.str("protocol.version", claim.Value, f.ProtoVersion)
	case transcript.ProtoAbsent:
		if claim.State != transcript.ProtoNegotiated {
			d.str("protocol.state", claim.State, f.ProtoState)
		}
		if claim.State == transcript.ProtoNegotiated {
			d.str("protocol.era", string(claim.Era), string(mcpwire.EraLegacy))
		}
	default:
		d.str("protocol.state", claim.State, f.ProtoState)
	}
}

func corrClaims(d *diffs, name string, claim, derived *transcript.CorrValue) {
	if show(claim) != show(derived) {
		d.text(name, show(claim), show(derived))
	}
}

func show(v *transcript.CorrValue) string {
	switch {
	case v == nil:
		return "absent"
	case v.Valid:
		return "valid " + quote(v.Value)
	}
	return "invalid (" + quote(v.Reason) + ")"
}

// observationClaims checks a response observation against its response
// bytes (body nil: longer than transcript.MaxDeriveBytes, which derive no
// facts).
func (b *bundleCheck) observationClaims(o *transcript.Observation, body []byte, rd *respDerived, subject string) {
	var f transcript.ResponseFacts
	if body != nil {
		f = rd.facts
	}
	var d diffs
	d.str("result_type", o.ResultType, f.ResultType)
	d.text("is_error", strconv.FormatBool(o.IsError), strconv.FormatBool(f.IsError))
	d.text("error_code", showCode(o.ErrorCode), showCode(f.ErrorCode))
	b.mismatchClaims(subject, "the "+o.Kind+" observation line", d)
}

func showCode(c *int64) string {
	if c == nil {
		return "absent"
	}
	return strconv.FormatInt(*c, 10)
}

// notificationClaims checks a notification line's method and request_id
// against its bytes.
func (b *bundleCheck) notificationClaims(n *transcript.Notification, body []byte, subject string) {
	err := errTooLongToDerive
	var f transcript.NotificationFacts
	if body != nil {
		f, err = transcript.DeriveNotification(body)
	}
	if err != nil {
		b.mismatchClaims(subject, "the notification line", diffs{"payload: the bytes are not a notification a producer records (" + quote(err.Error()) + ")"})
		return
	}
	var d diffs
	d.str("method", n.Method, f.Method)
	if f.HasID {
		d.text("payload", "a notification", "a request (it has an id)")
	}
	switch {
	case n.RequestID == nil && f.RequestID == nil:
	case n.RequestID == nil:
		d.text("request_id", "absent", "present")
	case f.RequestID == nil:
		d.text("request_id", "present", "absent")
	default:
		idClaims(&d, "request_id", *n.RequestID, *f.RequestID)
	}
	b.mismatchClaims(subject, "the notification line", d)
}

// responseID checks that a response's JSON-RPC id is its attempt's id,
// exact text against exact text (the proxy matches responses to requests
// that way): a signed line binding one attempt to another request's
// response is response_id_mismatch. Bytes that are not JSON are left to
// the claims check; bytes longer than a producer reads (body nil) are not
// derived.
func (b *bundleCheck) responseID(o *transcript.Observation, body []byte, rd *respDerived, subject string) {
	kind, want := b.attempts.rpc(o.AttemptID)
	if body == nil || kind == rpcNone || !rd.parsed {
		return
	}
	got, n := rd.id, rd.ids
	what := ""
	switch {
	case n == 0:
		what = "the response bytes carry no id"
	case n > 1:
		what = "the response bytes carry the id member more than once"
	default:
		if kind == rpcText && string(got) == string(want) {
			return
		}
		if sum := sha256.Sum256(got); kind == rpcDigest && len(got) > transcript.MaxRPCIDTextBytes && string(sum[:]) == string(want) {
			return
		}
		what = "the response bytes answer id " + quote(string(got)) + ", not the attempt's request id"
	}
	b.pl.bad++
	b.r.add(CodeResponseIDMismatch, checkPayload, StatusFail, subject,
		fmt.Sprintf("the %s observation at seq %d commits to a response for another request: %s", o.Kind, o.Seq, what))
}

// claimSources maps the members a line's claims name (the part of a diff
// before ':', by prefix) to the JSON Pointer in the message they are read
// from; "" is the whole message's reading.
var claimSources = map[string]map[string]string{
	"attempt": {"tool": "/params/name", "tool_invalid": "/params/name", "arguments": "/params/arguments", "jsonrpc_id": "/id",
		// Each _meta claim is read from its own member (a redaction of
		// another _meta member hides nothing it is read from), the
		// protocol's state from the revision member or _meta's shape.
		"protocol":                   metaPointer(mcpwire.MetaProtocolVersion),
		"correlation.traceparent":    metaPointer(mcpwire.MetaTraceparent),
		"correlation.tracestate":     metaPointer(mcpwire.MetaTracestate),
		"correlation.correlation_id": metaPointer(mcpwire.MetaCorrelationID),
		"correlation.retry_of":       metaPointer(mcpwire.MetaRetryOf),
		"correlation.tool_use_id":    toolUseSource,
		"request":                    ""},
	"observation":  {"result_type": "/result/resultType", "is_error": "/result/isError", "error_code": "/error/code"},
	"notification": {"method": "/method", "request_id": "/params/requestId", "payload": ""},
	"frame":        {"kind": "", "rule": "", "method": "/method", "jsonrpc_id": "/id"},
}

// metaPointer is the JSON Pointer (RFC 6901) of a request's _meta member.
func metaPointer(key string) string {
	return "/params/_meta/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// toolUseSource stands for the _meta members a tool-use id is read from:
// claudecode/toolUseId, then the header's tool_use_meta keys, the first
// present wins (transcript.DeriveRequest), so a redaction of any of them
// may hide it.
const toolUseSource = "\x00tool_use_id"

// toolUseKeys are the _meta keys a tool-use id is read from, in order.
func (b *bundleCheck) toolUseKeys() []string {
	return append([]string{"claudecode/toolUseId"}, b.toolUseMeta()...)
}

// uncovered drops the diffs whose source a redaction of the payload covers
// (the copy does not hold what the claim was read from), counting them;
// the others are contradictions as in any payload.
func (b *bundleCheck) uncovered(d diffs, what string) diffs {
	kind := "frame"
	for k := range claimSources {
		if strings.Contains(what, k) {
			kind = k
		}
	}
	var out diffs
	for _, x := range d {
		member, _, _ := strings.Cut(x, ":")
		src, known, best := "", false, -1
		for prefix, s := range claimSources[kind] {
			if strings.HasPrefix(member, prefix) && len(prefix) > best {
				src, known, best = s, true, len(prefix)
			}
		}
		covered := known && covers(b.red.reds, src)
		if known && src == toolUseSource {
			covered = false
			for _, k := range b.toolUseKeys() {
				covered = covered || covers(b.red.reds, metaPointer(k))
			}
		}
		if covered {
			b.red.claimsCovered++
			continue
		}
		out = append(out, x)
	}
	return out
}

// covers says whether a redaction hides src or a value inside it or
// around it; "" (the whole message) is covered by any redaction.
func covers(reds []transcript.Redaction, src string) bool {
	for _, r := range reds {
		if src == "" || r.Pointer == src || strings.HasPrefix(r.Pointer, src+"/") || strings.HasPrefix(src, r.Pointer+"/") {
			return true
		}
	}
	return false
}

// respDerived is what one parse of a response's bytes gives: the facts an
// observation line claims (transcript.DeriveResponseFrom) and its
// top-level id members (the last one's exact text, and how many).
type respDerived struct {
	parsed bool // the bytes parse (with duplicate members allowed)
	facts  transcript.ResponseFacts
	id     []byte
	ids    int
}

// deriveResponse reads body as transcript.DeriveResponse does; nil body
// derives nothing.
func deriveResponse(body []byte) (rd respDerived) {
	if body == nil {
		return rd
	}
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: transcript.MaxDeriveBytes}, AllowDuplicateKeys: true})
	if err != nil {
		return rd // DeriveResponse's zero facts
	}
	root := doc.Root()
	rd.parsed = true
	rd.facts = transcript.DeriveResponseFrom(root)
	if root.Kind() == canon.KindObject {
		for _, m := range root.Members() {
			if m.Name == "id" {
				rd.ids++
				rd.id = m.Value.Raw()
			}
		}
	}
	return rd
}

// responseDerived is deriveResponse(body), or what the line reader
// derived from the same bytes.
func (b *bundleCheck) responseDerived(body []byte) respDerived {
	if pf := b.pk.cur; body != nil && pf != nil && pf.derived && sameBytes(body, pf.data) {
		return pf.resp
	}
	return deriveResponse(body)
}

// sameBytes says whether a and b are the same slice of memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// toolUseMeta are the header's extra tool-use id keys (none without a
// header).
func (b *bundleCheck) toolUseMeta() []string {
	if b.header == nil {
		return nil
	}
	return b.header.ToolUseMeta
}
