package transcript

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// TypeHTTP is the "type" of an HTTP line: a fact about the HTTP exchange
// that carried a Streamable HTTP frame, as the producer observed it
// (spec/http.md). It commits to no frame: the frames an exchange carried
// are committed by their own lines.
const typeHTTP = "http"

// HTTP line events (HTTPEvent.Event).
const (
	// HTTPUpstream: the server's identity as observed on a connection the
	// producer opened: the endpoint URL and, over TLS, the leaf
	// certificate's SPKI digest and the chain verification result.
	HTTPUpstream = "upstream"
	// HTTPRequest: a client request as received (method, path, the MCP
	// headers, the names of credential headers present, and the client
	// frame its body is, if any).
	HTTPRequest = "request"
	// HTTPRefused: a client request refused before forwarding because its
	// routing headers are missing or disagree with its body (rule says
	// which); the frame named is committed refused.
	HTTPRefused = "refused"
	// HTTPResponse: the upstream's status and content type.
	HTTPResponse = "response"
	// HTTPFailure: the upstream exchange failed (connection refused or
	// reset, TLS refused, a timeout, a stream cut): detail says how.
	HTTPFailure = "failure"
	// HTTPWithheld (v4): an upstream SSE event or response body not
	// delivered because real clients read its framing differently (rule:
	// one of the SSE or media-type rules of spec/http.md); frame names the
	// server frame committed for its data, when it had one.
	HTTPWithheld = "withheld"
)

// Framing rules of a withheld line (HTTPEvent.Rule with HTTPWithheld): the
// server-direction rules of package mcpwire that concern HTTP framing.
var withheldRules = []string{"sse_bom", "sse_bare_cr", "sse_event_name", "sse_field", "sse_data_lines", "sse_too_large", "sse_unfinished", "media_type", "http_status", "sse_endpoint"}

// TLS chain results (HTTPTLS.Chain).
const (
	ChainVerified = "verified" // verified against the system or the configured roots, for the URL's host
)

// Header rules of an HTTP refusal (HTTPEvent.Rule); spec/http.md.
const (
	RuleHeaderMissing      = "header_missing"      // a routing header the body requires is absent
	RuleHeaderMismatch     = "header_mismatch"     // a routing header disagrees with the body
	RuleHeaderRepeated     = "header_repeated"     // a routing header given more than once
	RuleHeaderUnverifiable = "header_unverifiable" // an Mcp-Param-* header for a tool whose declaration the producer has not observed
)

// Peer rules of an HTTP refusal (HTTPEvent.Rule with HTTPRefused): a
// request refused before its body is read, for who sent it or for the
// producer's bounds, so the line names no frame; spec/http.md, "Who may
// talk to it" and "Limits".
var peerRules = []string{"host_not_allowed", "origin_not_allowed", "inflight_budget", "body_timeout", "sse_session_unknown"}

// MaxHeaderValueBytes bounds a header value recorded as text; a longer one
// (or one that is not UTF-8) is recorded by its SHA-256 in HeaderDigests.
const MaxHeaderValueBytes = 1024

// HTTPEvent is an HTTP line (v2, a Streamable HTTP producer).
type HTTPEvent struct {
	Type     string `json:"type"` // "http"
	Seq      int64  `json:"seq"`
	AtMs     int64  `json:"at_ms"`
	Event    string `json:"event"`
	Exchange int64  `json:"exchange"` // the producer's number for the HTTP exchange, unique in the transcript
	Method   string `json:"method,omitempty"`
	Path     string `json:"path,omitempty"`
	Status   int64  `json:"status,omitempty"`
	// ContentType is the Content-Type header as received (request or
	// response).
	ContentType string `json:"content_type,omitempty"`
	// Headers are the MCP headers by lower-case name (mcp-protocol-version,
	// mcp-method, mcp-name, mcp-param-*, last-event-id), values as received.
	Headers       map[string]string `json:"headers,omitempty"`
	HeaderDigests map[string]string `json:"header_digests,omitempty"` // values too long or not UTF-8, by sha256
	// Session is the SHA-256 of the Mcp-Session-Id header (2025-11-25):
	// the session is linkable, its id is not disclosed.
	Session string `json:"session,omitempty"`
	// Connection names the connection a request came on (request lines):
	// the SHA-256 of its local and remote addresses under a salt the
	// producer does not keep, so requests on one connection share it
	// within a transcript and the addresses are not disclosed. Sessionless
	// clients have no other identity: a cancellation names only a call on
	// the same connection.
	Connection string `json:"connection,omitempty"`
	// Credentials are the lower-case names of credential headers present
	// (Authorization, Cookie, API keys). Their values are never recorded.
	Credentials []string `json:"credentials,omitempty"`
	// Frame is the client frame (its index) the request's body is.
	Frame  *int64   `json:"frame,omitempty"`
	Rule   string   `json:"rule,omitempty"`
	URL    string   `json:"url,omitempty"`
	TLS    *HTTPTLS `json:"tls,omitempty"`
	Detail string   `json:"detail,omitempty"`
}

// HTTPTLS is an upstream TLS connection as observed.
type HTTPTLS struct {
	Version    string `json:"version"`     // "TLS 1.3"
	SPKISHA256 string `json:"spki_sha256"` // sha256:<hex> of the leaf certificate's SubjectPublicKeyInfo
	Chain      string `json:"chain"`       // ChainVerified
	ChainLen   int64  `json:"chain_length"`
}

func (v *HTTPEvent) encode(e *encoder) {
	e.open()
	e.int("at_ms", v.AtMs)
	e.optStr("connection", v.Connection)
	e.optStr("content_type", v.ContentType)
	if len(v.Credentials) > 0 {
		e.key("credentials")
		e.b = append(e.b, '[')
		for i, c := range v.Credentials {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.string(c)
		}
		e.b = append(e.b, ']')
	}
	e.optStr("detail", v.Detail)
	e.str("event", v.Event)
	e.int("exchange", v.Exchange)
	e.optFrame(v.Frame)
	e.stringMap("header_digests", v.HeaderDigests)
	e.stringMap("headers", v.Headers)
	e.optStr("method", v.Method)
	e.optStr("path", v.Path)
	e.optStr("rule", v.Rule)
	e.int("seq", v.Seq)
	e.optStr("session", v.Session)
	e.optInt("status", v.Status)
	if t := v.TLS; t != nil {
		e.key("tls")
		e.open()
		e.str("chain", t.Chain)
		e.int("chain_length", t.ChainLen)
		e.str("spki_sha256", t.SPKISHA256)
		e.str("version", t.Version)
		e.close()
	}
	e.typ(v.Type, typeHTTP)
	e.optStr("url", v.URL)
	e.close()
}

// stringMap writes a map of strings, when it has members, its keys in RFC
// 8785 order (UTF-16 code units).
func (e *encoder) stringMap(k string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	e.key(k)
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
	})
	e.b = append(e.b, '{')
	for i, mk := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.string(mk)
		e.b = append(e.b, ':')
		e.string(m[mk])
	}
	e.b = append(e.b, '}')
}

// IsCredentialHeader reports whether a header carries a credential by its
// name: Authorization, Proxy-Authorization, Cookie, Set-Cookie, and names
// that say key, token, secret, auth or password. Such values are never
// recorded.
func IsCredentialHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	for _, w := range []string{"key", "token", "secret", "auth", "password", "passwd", "credential", "session-token"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Check reports whether v, with the seq and time it has, is an http line
// the format allows: what DecodeLine refuses of Encode(v) beyond bytes
// Encode cannot write (strings that are not UTF-8), without decoding.
// Type may be empty (Encode writes it). Errors are *LineError.
func (v *HTTPEvent) Check() error {
	c := *v
	if c.Type == "" {
		c.Type = typeHTTP
	}
	if e := c.validate(); e != nil {
		return e.withSeq(c.Seq)
	}
	return nil
}

func (v *HTTPEvent) validate() *invalid {
	e := first(
		event(v.Type, typeHTTP, v.Seq, v.AtMs),
		oneOf("event", v.Event, HTTPUpstream, HTTPRequest, HTTPRefused, HTTPResponse, HTTPFailure, HTTPWithheld),
		nonneg("exchange", v.Exchange),
		short("method", v.Method, MaxReportedBytes),
		short("path", v.Path, MaxPathBytes),
		short("content_type", v.ContentType, MaxReportedBytes),
		optDigest("session", v.Session),
		optDigest("connection", v.Connection),
		short("url", v.URL, MaxPathBytes),
		short("detail", v.Detail, maxDetailBytes),
	)
	if e != nil {
		return e
	}
	if v.Status < 0 || v.Status > 999 {
		return bad("status %d is not an HTTP status", v.Status)
	}
	if v.Frame != nil && *v.Frame < 0 {
		return bad("frame is negative")
	}
	if (v.Event == HTTPRefused || v.Event == HTTPWithheld) != (v.Rule != "") {
		return bad("rule is present iff event is refused or withheld")
	}
	if v.Event == HTTPWithheld {
		if e := oneOf("rule", v.Rule, withheldRules...); e != nil {
			return e
		}
	} else if v.Rule != "" {
		if slices.Contains(peerRules, v.Rule) {
			if v.Frame != nil {
				return bad("a request refused before its body is read (%s) names no frame", v.Rule)
			}
		} else if e := oneOf("rule", v.Rule, RuleHeaderMissing, RuleHeaderMismatch, RuleHeaderRepeated, RuleHeaderUnverifiable); e != nil {
			return e
		} else if v.Frame == nil {
			return bad("a refused request names its frame")
		}
	}
	if v.Connection != "" && v.Event != HTTPRequest {
		return bad("connection belongs to request lines")
	}
	if v.TLS != nil && v.Event != HTTPUpstream {
		return bad("tls belongs to upstream lines")
	}
	if t := v.TLS; t != nil {
		if e := first(short("tls.version", t.Version, MaxReportedBytes), digest("tls.spki_sha256", t.SPKISHA256),
			oneOf("tls.chain", t.Chain, ChainVerified), nonneg("tls.chain_length", t.ChainLen)); e != nil {
			return e
		}
	}
	for _, m := range []map[string]string{v.Headers, v.HeaderDigests} {
		for k := range m {
			if k == "" || k != strings.ToLower(k) || len(k) > MaxReportedBytes {
				return bad("header name %q is not a lower-case name within %d bytes", bounded(k), MaxReportedBytes)
			}
			if IsCredentialHeader(k) {
				// A credential's value never enters the evidence, not
				// even by digest (a short token's digest is guessable).
				return bad("header %q is a credential: only its presence may be recorded", bounded(k))
			}
		}
	}
	for k, val := range v.Headers {
		if len(val) > MaxHeaderValueBytes || !utf8.ValidString(val) {
			return bad("header %q value over %d bytes or not UTF-8: record it by digest", bounded(k), MaxHeaderValueBytes)
		}
		if _, dup := v.HeaderDigests[k]; dup {
			return bad("header %q recorded both by value and by digest", bounded(k))
		}
	}
	for k, d := range v.HeaderDigests {
		if e := digest("header_digests/"+k, d); e != nil {
			return e
		}
	}
	if !sort.StringsAreSorted(v.Credentials) {
		return bad("credentials are not sorted")
	}
	for i, c := range v.Credentials {
		if c == "" || c != strings.ToLower(c) || len(c) > MaxReportedBytes {
			return bad("credential header name %q is not a lower-case name within %d bytes", bounded(c), MaxReportedBytes)
		}
		if i > 0 && v.Credentials[i-1] == c {
			return bad("credential header %q listed twice", bounded(c))
		}
	}
	return nil
}
