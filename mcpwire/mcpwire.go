// Package mcpwire is tracectl's MCP wire vocabulary and its reference
// monitor's gate: the methods, _meta keys, JSON-RPC error codes, stdio
// terminators and revision strings that the proxy, the producer, snapshot
// collection and the verifier share, and Read, the single strict reading of
// one stdio frame that decides whether the frame is understood.
//
// It is a leaf above canon: nothing in tracectl that speaks MCP re-types
// these strings (spec/transcript.md, "The gate").
package mcpwire

import (
	"encoding/json"
	"strconv"

	"github.com/tracectl/tracectl/canon"
)

// JSON-RPC and MCP methods tracectl interprets.
const (
	MethodToolsCall  = "tools/call"
	MethodToolsList  = "tools/list"
	MethodInitialize = "initialize"
	MethodDiscover   = "server/discover"

	NotifyCancelled        = "notifications/cancelled"
	NotifyToolsListChanged = "notifications/tools/list_changed"
	NotifyProgress         = "notifications/progress"
	notifyInitialized      = "notifications/initialized"
)

// _meta keys. tracectl's own keys use its own prefix; the
// io.modelcontextprotocol/ prefix is reserved by MCP.
const (
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	MetaServerInfo      = "io.modelcontextprotocol/serverInfo"
	MetaCorrelationID   = "dev.tracectl/correlationId" // caller correlation id (seeds/correlation-id.txt)
	MetaRetryOf         = "dev.tracectl/retryOf"       // caller-declared retry: the correlation id of the earlier call
	MetaTraceparent     = "traceparent"
	MetaTracestate      = "tracestate"
	MetaProgressToken   = "progressToken"
)

// CodeInvalidRequest is JSON-RPC 2.0's code for an invalid request: the
// recording session answers a client frame the gate refuses with it.
const CodeInvalidRequest = -32600

// JSON-RPC error codes tracectl's recording session answers with in a
// peer's place (spec/wrap.md). They sit in JSON-RPC's implementation-defined
// range, clear of every code the MCP specification and the Go and
// TypeScript SDKs assign (-32000 connection closed, -32001 request timeout,
// -32002 resource not found, -32020..-32022, -32042). A frame the gate
// refuses is answered with CodeInvalidRequest.
const (
	CodeAuditUnavailable = -32091 // not forwarded: evidence could not be made durable
	CodeTransportFailure = -32092 // the server went away with the call in flight
	CodeResponseRefused  = -32093 // the server's answer was refused by the gate or mediation: not delivered, the outcome unknown
)

// ErrorResponse is the JSON-RPC error response tracectl sends in a peer's
// place, under the exact id text idText ("null" when there is none), without
// a terminator. Its data names tracectl and the reason (spec/wrap.md), so a
// client, and a person reading its log, can tell it from the server's.
func ErrorResponse(idText string, code int, msg string) []byte {
	if idText == "" {
		idText = "null"
	}
	// encoding/json, not strconv.Quote: the message must be a JSON string
	// whatever it holds (Go's \x escapes are not JSON).
	m, _ := json.Marshal(msg)
	return []byte(`{"jsonrpc":"2.0","id":` + idText + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(m) +
		`,"data":{"source":"tracectl","reason":"` + reasonOf(code) + `"}}}`)
}

// reasonOf is the reason string of one of tracectl's own error codes
// ("other" for any other code).
func reasonOf(code int) string {
	switch code {
	case CodeAuditUnavailable:
		return "audit_unavailable"
	case CodeTransportFailure:
		return "transport_failure"
	case CodeResponseRefused:
		return "response_refused"
	case CodeInvalidRequest:
		return "refused"
	}
	return "other"
}

// Envelope member names of a JSON-RPC 2.0 message.
const (
	memberJSONRPC = "jsonrpc"
	memberID      = "id"
	memberMethod  = "method"
	memberParams  = "params"
	memberResult  = "result"
	memberError   = "error"
)

// Terminators: how an exact stdio line ended on the wire.
const (
	TermLF   = "lf"
	TermCRLF = "crlf"
	TermNone = "none" // the stream ended without a terminator
)

// SplitTerminator separates an exact line from its terminator and names it.
func SplitTerminator(line []byte) (body []byte, term string) {
	n := len(line)
	switch {
	case n >= 2 && line[n-2] == '\r' && line[n-1] == '\n':
		return line[:n-2], TermCRLF
	case n >= 1 && line[n-1] == '\n':
		return line[:n-1], TermLF
	}
	return line, TermNone
}

// IsRevision accepts MCP's YYYY-MM-DD revision strings.
func IsRevision(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i != 4 && i != 7 && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// Era is the MCP protocol era a session speaks, as observed.
type Era string

// Eras.
const (
	EraLegacy Era = "legacy" // initialize, then notifications/initialized (revisions up to 2025-11-25)
	EraModern Era = "modern" // the revision in every request's _meta, server/discover (2026-07-28 on)
	// EraUnknown: nothing observed says which (no initialize, discover
	// or request revision seen yet).
	EraUnknown Era = "unknown"
)

// RequestRevision reads a message's per-request protocol revision (the
// modern era's params._meta MetaProtocolVersion): the revision and true when
// it is a YYYY-MM-DD string; the one reading the session core and the HTTP
// proxy share.
func (m *Message) RequestRevision() (string, bool) {
	if !m.Params.Valid() || m.Params.Kind() != canon.KindObject {
		return "", false
	}
	meta, ok := m.Params.Get("_meta")
	if !ok || meta.Kind() != canon.KindObject {
		return "", false
	}
	pv, ok := meta.Get(MetaProtocolVersion)
	if !ok {
		return "", false
	}
	if s, isStr := pv.Str(); isStr && IsRevision(s) {
		return s, true
	}
	return "", false
}
