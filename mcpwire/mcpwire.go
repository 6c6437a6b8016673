// Package mcpwire is tracectl's MCP wire vocabulary and its reference
// monitor's gate: the methods, _meta keys, JSON-RPC error codes, stdio
// terminators and revision strings that the proxy, the producer, snapshot
// collection and the verifier share, and Read, the single strict reading of
// one stdio frame that decides whether the frame is understood.
//
// It is a leaf above canon: nothing in tracectl that speaks MCP re-types
// these strings (spec/transcript.md, "The gate").
package mcpwire

// JSON-RPC and MCP methods tracectl interprets.
const (
	MethodToolsCall  = "tools/call"
	MethodToolsList  = "tools/list"
	MethodInitialize = "initialize"
	MethodDiscover   = "server/discover"

	NotifyCancelled        = "notifications/cancelled"
	NotifyToolsListChanged = "notifications/tools/list_changed"
	NotifyProgress         = "notifications/progress"
	NotifyInitialized      = "notifications/initialized"
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

// JSON-RPC 2.0 and MCP error codes a peer may send.
const (
	CodeParseError          = -32700
	CodeInvalidRequest      = -32600
	CodeMethodNotFound      = -32601
	CodeInvalidParams       = -32602
	CodeInternalError       = -32603
	CodeHeaderMismatch      = -32020 // MCP 2026-07-28
	CodeMissingCapability   = -32021 // MCP 2026-07-28
	CodeUnsupportedProtocol = -32022 // MCP 2026-07-28
)

// Envelope member names of a JSON-RPC 2.0 message.
const (
	MemberJSONRPC = "jsonrpc"
	MemberID      = "id"
	MemberMethod  = "method"
	MemberParams  = "params"
	MemberResult  = "result"
	MemberError   = "error"
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
