package httpproxy

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// The deprecated HTTP+SSE transport (MCP 2024-11-05; spec/http.md, "The
// deprecated HTTP+SSE transport"). A client GETs an event stream whose
// first event, named "endpoint", is the URL it then POSTs its messages
// to; the server answers each POST 202 and sends every message of its own
// (responses included) on the stream. Many hosted servers still serve
// only it.
//
// The proxy records it through the same gate and rules as Streamable
// HTTP, in a bundle of its own per stream (one client, like a session):
//   - The upstream's endpoint event is never delivered (it names the
//     upstream's URL and session, which a client would POST to around the
//     recorder): it is recorded withheld (sse_endpoint), and the client
//     gets an endpoint of the proxy's own, "?tracectl_sse=TOKEN", a fresh
//     random token that is the session's only name at the proxy.
//   - A POST to it is a client frame like any other: committed before it
//     is forwarded to the upstream's endpoint. The upstream's 2xx is
//     relayed as a bare status (legacy clients read no POST body); any
//     other status ends the request there (the call is a transport
//     failure: the client's send fails). A request stays open until its
//     answer comes on the stream.
//   - On the stream, session.Rule decides over the session's table of open
//     requests, as on stdio: a response is delivered only under the exact
//     id of an open request; a frame a client could take as the answer to
//     one is refused and that request answered by the proxy.
//   - The proxy's own answers to a POST (a refused frame, a denied call,
//     an audit failure) go on the stream, where the client reads them; the
//     POST itself is answered 202.
//   - The session ends with the stream: the bundle is sealed. When the
//     upstream ends it, each request still open is a transport failure
//     and the client gets an error for it; when the client goes away, a
//     call still open is unknown.

const (
	kindSSE = "sse" // one deprecated HTTP+SSE session

	legacyParam = "tracectl_sse" // the query parameter of the proxy's endpoint

	ruleSSEEndpoint       = "sse_endpoint"        // withheld: the upstream's endpoint event
	ruleSSESessionUnknown = "sse_session_unknown" // refused: a POST to an endpoint no open stream gave

	maxLegacyOpen = 4096 // requests open at once in one session; past it a POST is refused
)

// legacy is one HTTP+SSE session: the client's stream and its open
// requests.
type legacy struct {
	token    string   // the proxy's name for the session (its endpoint's query)
	endpoint *url.URL // the upstream's message endpoint

	mu      sync.Mutex
	w       http.ResponseWriter // the client's event stream
	gone    bool                // the stream to the client is over
	open    map[string]*exchange
	byProxy map[string]bool // ids the proxy answered itself (bounded by maxLegacyOpen)
}

// endpointEvent matches the endpoint event as both SDKs write it and
// every reader reads it alike: one event line, one data line of visible
// ASCII, LF or CRLF line ends.
var endpointEvent = regexp.MustCompile("^event: ?endpoint\r?\ndata: ?([\x21-\x7e]+)\r?\n\r?\n$")

// legacyKey is a session's key in Proxy.sessions: a NUL cannot be in an
// Mcp-Session-Id header, so no client reaches it by one.
func legacyKey(token string) string { return "\x00sse " + token }

// legacyToken is the token a request names in the proxy's endpoint query,
// if it names exactly one.
func legacyToken(r *http.Request) (string, bool) {
	v, ok := r.URL.Query()[legacyParam]
	if !ok {
		return "", false
	}
	if len(v) != 1 {
		return "", true
	}
	return v[0], true
}

// endpointNamed says whether an SSE event's raw bytes name it "endpoint"
// as any reader might read its event field: after a BOM, with any line
// ends (LF, CRLF, lone CR), the value's spaces trimmed, in any case.
func endpointNamed(raw []byte) bool {
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	for len(raw) > 0 {
		i := bytes.IndexAny(raw, "\r\n")
		line := raw
		if i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok && bytes.EqualFold(bytes.TrimSpace(v), []byte("endpoint")) {
			return true
		}
	}
	return false
}

// refuseUnknownLegacy answers a POST to an endpoint no open stream gave
// (its stream ended, or it was never given): 404, as the transport's
// servers answer an unknown session, recorded in the stateless bundle
// before its body is read.
func (p *Proxy) refuseUnknownLegacy(w http.ResponseWriter, r *http.Request) {
	if b, err := p.bundleFor("", ""); err == nil {
		x := &exchange{p: p, b: b, id: p.exch.Add(1), w: w, r: r}
		err := x.upstreamLine(nil)
		if err == nil {
			err = b.http(x.requestLine(nil))
		}
		if err == nil {
			_ = b.http(transcript.HTTPEvent{Event: transcript.HTTPRefused, Exchange: x.id, Rule: ruleSSESessionUnknown, Detail: "a POST to an HTTP+SSE endpoint whose stream is not open at this proxy"})
		}
		b.release()
	}
	writeRPCError(w, http.StatusNotFound, "null", codeRefused, "tracectl: refused: no open HTTP+SSE session at this endpoint ("+ruleSSESessionUnknown+")")
}

// startLegacy is called with the first event of a sessionless GET's
// event stream. When it is the endpoint event of the deprecated
// transport, the stream moves to a bundle of its own: the upstream's
// endpoint is recorded withheld and the client is given the proxy's.
// ok false: not the deprecated transport (the stream is relayed as any
// other); err: a recording failure.
func (x *exchange) startLegacy(first mcpwire.Event) (ok bool, err error) {
	m := endpointEvent.FindSubmatch(first.Raw)
	if m == nil {
		return false, nil
	}
	up, resp := x.upURL, x.upResp
	ep, perr := up.Parse(string(m[1]))
	if perr != nil || ep.Scheme != up.Scheme || ep.Host != up.Host || ep.User != nil {
		// An endpoint elsewhere would take the client's messages, and
		// its credentials, to another server: withheld, and the stream
		// relayed no further.
		detail := "the upstream's HTTP+SSE endpoint event names another origin (or no URL): not followed, not delivered"
		if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: ruleSSEEndpoint, Detail: detail}); err != nil {
			return true, err
		}
		return true, x.b.http(transcript.HTTPEvent{Event: transcript.HTTPFailure, Exchange: x.id, Detail: detail})
	}
	var tok [16]byte
	if _, err := io.ReadFull(x.p.cfg.Entropy, tok[:]); err != nil {
		return true, err
	}
	l := &legacy{token: hex.EncodeToString(tok[:]), endpoint: ep, open: map[string]*exchange{}, byProxy: map[string]bool{}}
	// The stateless bundle keeps the stream's beginning and says where it
	// went on; the session's bundle records it whole.
	if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: ruleSSEEndpoint, Detail: "the stream is the deprecated HTTP+SSE transport's: recorded in a bundle of its own"}); err != nil {
		return true, err
	}
	nb, err := x.p.bundleFor("", kindSSE)
	if err != nil {
		if x.p.cfg.Failed != nil && !errors.Is(err, errClosed) {
			x.p.cfg.Failed(err)
		}
		return true, nil // the stream ends: the client may try again
	}
	nb.legacy = l
	x.p.adopt(nb, legacyKey(l.token))
	x.b, x.legacy, x.stream = nb, l, true
	x.id = x.p.exch.Add(1)
	if err := x.upstreamLine(nil); err != nil {
		return true, err
	}
	if err := nb.http(x.requestLine(nil)); err != nil {
		return true, err
	}
	if err := x.upstreamLine(resp); err != nil {
		return true, err
	}
	if err := nb.http(transcript.HTTPEvent{Event: transcript.HTTPResponse, Exchange: x.id, Status: int64(resp.StatusCode), ContentType: boundedText(resp.Header.Get("Content-Type"))}); err != nil {
		return true, err
	}
	if err := nb.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: ruleSSEEndpoint, Detail: "the upstream's HTTP+SSE endpoint (its URL and session), replaced by the proxy's own"}); err != nil {
		return true, err
	}
	l.mu.Lock()
	l.w = x.w
	l.mu.Unlock()
	if !l.write([]byte("event: endpoint\ndata: ?" + legacyParam + "=" + l.token + "\n\n")) {
		x.gone = true
	}
	return true, nil
}

// write delivers one event on the client's stream; false once it is gone.
func (l *legacy) write(ev []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || l.w == nil {
		return false
	}
	if _, err := l.w.Write(ev); err != nil {
		l.gone = true
		return false
	}
	flush(l.w)
	return true
}

// messageEvent is one JSON-RPC message of the proxy's own as an event of
// the stream: one data line, whatever whitespace the message held (a line
// end inside it would end the data line there and start another field).
func messageEvent(msg []byte) []byte {
	var c bytes.Buffer
	if err := json.Compact(&c, msg); err != nil || bytes.ContainsAny(c.Bytes(), "\r\n") {
		// Never: rpcError and finish give only JSON. Fail closed to an
		// error under no id rather than frame the bytes.
		c.Reset()
		c.WriteString(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"tracectl: internal error"}}`)
	}
	return append(append([]byte("event: message\ndata: "), c.Bytes()...), "\n\n"...)
}

// register opens a request forwarded on a POST; false when the session's
// table is full or the id is open already (the POST is then answered by
// the proxy and not forwarded).
func (l *legacy) register(x *exchange) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := x.msg.IDText()
	if l.open[id] != nil || len(l.open) >= maxLegacyOpen {
		return false
	}
	l.open[id] = x
	return true
}

// take closes the open request with exactly this id, and returns it.
func (l *legacy) take(id string) *exchange {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := l.open[id]
	delete(l.open, id)
	x.closeOpen()
	return x
}

// drop closes x's request if it is still open under its id, and reports
// whether it was (false: the stream took its answer, or it never opened).
func (l *legacy) drop(x *exchange) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id := x.msg.IDText(); l.open[id] == x {
		delete(l.open, id)
		x.closeOpen()
		return true
	}
	return false
}

// hold keeps x's body charge while its request is open (legacyDone):
// memory held by open requests stays within the in-flight budget.
func (l *legacy) hold(x *exchange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[x.msg.IDText()] == x && x.charge != nil {
		x.charge.mu.Lock()
		x.charge.moved = true
		x.charge.mu.Unlock()
	}
}

// closeOpen gives back the charge of a request leaving the table of open
// requests, if its POST handed it over. Called with l.mu held.
func (x *exchange) closeOpen() {
	if x == nil || x.charge == nil {
		return
	}
	x.charge.mu.Lock()
	defer x.charge.mu.Unlock()
	if x.charge.moved {
		x.charge.moved = false
		x.charge.release()
	}
}

// takeMatching closes and returns the open requests a client could match
// a frame with these ids (mcpwire.MatchKey) to; nil keys: every one.
func (l *legacy) takeMatching(keys []string) []*exchange {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*exchange
	for id, x := range l.open {
		if keys == nil || slices.Contains(keys, mcpwire.MatchKey(x.msg.ID)) {
			out = append(out, x)
			delete(l.open, id)
			x.closeOpen()
		}
	}
	slices.SortFunc(out, func(a, b *exchange) int { return int(a.id - b.id) })
	return out
}

// answered notes an id the proxy answered itself.
func (l *legacy) answered(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byProxy) < maxLegacyOpen {
		l.byProxy[id] = true
	}
}

// progressCall is the open call whose progress token is tok.
func (l *legacy) progressCall(tok string) *call {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.open {
		if x.call != nil && x.call.token == tok {
			return x.call
		}
	}
	return nil
}

// legacyOpen is the session's table of open requests as session.Rule sees
// it.
type legacyOpen struct{ x *exchange }

func (o legacyOpen) Exact(id string) bool {
	l := o.x.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[id] != nil
}

func (o legacyOpen) Matches(keys []string) bool {
	l := o.x.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.open {
		if slices.Contains(keys, mcpwire.MatchKey(x.msg.ID)) {
			return true
		}
	}
	return false
}

func (o legacyOpen) Settled(keys []string) bool { return o.x.b.isSettled(keys) }

func (o legacyOpen) AnsweredByProxy(id string) bool {
	l := o.x.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byProxy[id]
}

// answerOpen answers requests the proxy settles itself on the stream (a
// refused frame a client could take as their answer, or the end of the
// upstream's stream): each call a transport failure, each request a
// JSON-RPC error on the client's stream.
func (x *exchange) answerOpen(victims []*exchange, detail string, code int) {
	for _, v := range victims {
		if v.call != nil {
			v.noAnswer(detail)
			v.b.untrack(v.call)
			if v.failed != nil && x.failed == nil {
				x.failed = v.failed
			}
		}
		x.legacy.answered(v.msg.IDText())
		x.legacy.write(messageEvent(rpcError(idOf(v.msg), code, "tracectl: "+detail+"; the outcome is unknown")))
	}
}

// forwardLegacy ends a POST of the deprecated transport once the upstream
// answered it: a 2xx is relayed as a bare status and the request stays
// open for its answer on the stream; any other status is relayed with the
// proxy's own text (the client's send fails) and settles the request.
func (x *exchange) forwardLegacy(resp *http.Response) {
	w := x.lw.w
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		w.WriteHeader(resp.StatusCode)
		return
	}
	detail := "the upstream answered the HTTP+SSE POST with HTTP " + strconv.Itoa(resp.StatusCode) + ": the message was not accepted"
	if x.msg != nil && x.msg.Kind == mcpwire.KindRequest {
		if !x.legacy.drop(x) {
			// The stream took the request's answer first (an upstream
			// that answers and fails the POST at once): that answer is
			// what the evidence binds and the client gets, so the
			// client's send does not fail (the upstream's status is in
			// the response line).
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if x.call != nil {
			x.noAnswer(detail)
			x.b.untrack(x.call)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, "tracectl: "+detail+"\n")
}

// legacyWriter stands for a deprecated-transport POST's response writer
// while the proxy handles it: what the proxy answers in the upstream's
// place (a JSON-RPC message) goes on the client's stream, where a legacy
// client reads it, and the POST is answered 202. The upstream's own status
// is written to w directly (forwardLegacy).
type legacyWriter struct {
	w      http.ResponseWriter
	l      *legacy
	header http.Header
	status int
	body   bytes.Buffer
}

func (lw *legacyWriter) Header() http.Header { return lw.header }
func (lw *legacyWriter) WriteHeader(status int) {
	if lw.status == 0 {
		lw.status = status
	}
}
func (lw *legacyWriter) Write(b []byte) (int, error) {
	if lw.body.Len()+len(b) > maxBody {
		return 0, io.ErrShortWrite
	}
	return lw.body.Write(b)
}

// finish answers the POST: the proxy's JSON-RPC message, if it wrote one,
// goes on the stream as one compact data line; the POST gets 202, or the
// bare status the proxy chose. Anything else the proxy wrote (the text of
// an HTTP failure, which may quote what the upstream sent) answers the
// POST itself, its controls escaped, and never reaches the stream: an
// event built from it could frame a message nobody recorded.
func (lw *legacyWriter) finish() {
	if lw.body.Len() == 0 {
		if lw.status != 0 {
			lw.w.WriteHeader(lw.status)
		}
		return
	}
	var msg bytes.Buffer
	if mt, _, _ := mime.ParseMediaType(lw.header.Get("Content-Type")); mt == "application/json" &&
		json.Compact(&msg, lw.body.Bytes()) == nil && bytes.HasPrefix(msg.Bytes(), []byte("{")) {
		lw.l.write(messageEvent(msg.Bytes()))
		lw.w.WriteHeader(http.StatusAccepted)
		return
	}
	status := lw.status
	if status == 0 || status < 400 {
		status = http.StatusBadGateway
	}
	lw.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	lw.w.Header().Set("X-Content-Type-Options", "nosniff")
	lw.w.WriteHeader(status)
	_, _ = io.WriteString(lw.w, plainText(lw.body.String()))
}

// plainText is s with every control character but the final LF escaped
// (Go's \x or \u form), so no line of it can start an SSE field or a
// terminal sequence wherever a client shows it.
func plainText(s string) string {
	s = strings.TrimSuffix(s, "\n")
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('\n')
	return b.String()
}

// legacyCandidate: a sessionless GET's event stream in the stateless
// bundle, which the upstream did not give a session: its first event says
// whether it is the deprecated transport's.
func (x *exchange) legacyCandidate() bool {
	return x.r.Method == http.MethodGet && x.r.Header.Get("Mcp-Session-Id") == "" && x.b.demux && x.legacy == nil &&
		x.upResp != nil && x.upResp.Header.Get("Mcp-Session-Id") == ""
}

// legacyBundle is the open session a POST names by its token, acquired;
// nil when there is none (its stream ended, or it never was).
func (p *Proxy) legacyBundle(token string) *bundle {
	if token == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.sessions[legacyKey(token)]
	if b == nil || b.legacy == nil || !b.acquire() {
		return nil
	}
	return b
}

// legacyDone ends a POST of the deprecated transport: a request the
// upstream did not accept is no longer open (its call settled by
// whatever ended it); one it accepted waits for its answer on the stream.
func (x *exchange) legacyDone() {
	if x.msg == nil || x.msg.Kind != mcpwire.KindRequest {
		return
	}
	if x.accepted {
		// Its body stays in memory with the open request: so does its
		// charge, given back when the request leaves the table.
		x.legacy.hold(x)
		return
	}
	x.legacy.drop(x)
	if x.call != nil {
		x.b.untrack(x.call)
	}
}

// endLegacy ends the session with its stream. When the upstream ended it
// (or the proxy is shutting down), each request still open is answered on
// the client's stream and each call is a transport failure; when the
// client went away, a call still open is unknown (resolved at the seal).
// The bundle is sealed once its POSTs in flight end.
func (x *exchange) endLegacy() {
	l := x.legacy
	if !x.gone {
		x.answerOpen(l.takeMatching(nil), "the HTTP+SSE stream ended with the request open", codeTransportFailure)
	}
	l.mu.Lock()
	l.gone, l.w = true, nil
	l.mu.Unlock()
	x.p.endSession(legacyKey(l.token))
	x.b.release()
}
