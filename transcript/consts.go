package transcript

// Limits of the format. A line or member beyond them is rejected by
// DecodeLine and Reader; producers record a digest instead of a value that
// would exceed them (spec/transcript.md, "Limits").
const (
	// MaxLineBytes bounds one transcript line (without its LF). Lines carry
	// digests, never payloads, so the largest real line (an attempt with a
	// MaxRPCIDTextBytes id and a full tracestate) stays far below it; the
	// bound is what keeps a streaming reader's memory independent of the
	// transcript.
	MaxLineBytes = 64 << 10
	// MaxRPCIDTextBytes bounds the exact id text an attempt carries. A longer
	// id (legal JSON-RPC, absurd in practice) is recorded by digest.
	MaxRPCIDTextBytes = 4096
	// MaxToolNameBytes bounds a recorded tool name (MCP suggests 1-128
	// characters). A longer name is recorded as tool_invalid too_long: the
	// request digest still commits to it, and a name is never truncated.
	maxToolNameBytes = 1024
	// MaxIDBytes bounds identifiers tracectl mints (execution scope, attempt
	// and snapshot ids) and those it checks (quarantine file names).
	maxIDBytes = 128
	// MaxReportedBytes bounds short strings as reported by a peer: protocol
	// versions, serverInfo name and version, result types, methods. Longer
	// values are left out; the payload digest still commits to them.
	MaxReportedBytes = 256
	// maxDetailBytes bounds producer-written prose (observation and recovery
	// details). Prose is not evidence, so it is cut at a rune boundary.
	maxDetailBytes = 1024
	// MaxPathBytes bounds the recorded server executable path (PATH_MAX).
	MaxPathBytes = 4096
)

// MCP eras and how an attempt's revision was known (AttemptProto.State).
const (
	ProtoPresent    = "present"    // request _meta protocolVersion is a revision string
	ProtoAbsent     = "absent"     // request has no _meta protocolVersion
	ProtoMalformed  = "malformed"  // the member is there but not a revision string
	ProtoNegotiated = "negotiated" // legacy: the version from the initialize exchange
)

// Sources of a protocol observation.
const (
	SourceInitialize  = "initialize_response"
	SourceDiscover    = "discover_response"
	SourceRequestMeta = "request_meta"
)

// Retry link bases (Attempt.RetryBasis).
const (
	BasisCallerDeclared = "caller_declared" // the caller said so (API, or mcpwire.MetaRetryOf)
	BasisInferred       = "inferred"        // same tool and canonical arguments after an unknown outcome or a transport failure
	BasisContinuation   = "continuation"    // re-issue after an input_required result
	// BasisCallerToolUse: the request carries the agent host's tool-use id
	// (correlation.tool_use_id) an earlier attempt carried: the host
	// re-issued its own tool use.
	BasisCallerToolUse = "caller_tool_use_id"
)

// Tool name problems (Attempt.ToolInvalid).
const (
	toolAbsent    = "absent"
	toolNotString = "not_string"
	toolTooLong   = "too_long"
)

// Notification directions.
const (
	ServerToClient = "server_to_client"
	ClientToServer = "client_to_server"
)

// Transports of the server (Server.Transport).
const (
	TransportStdio     = "stdio"
	TransportInProcess = "in-process"
	TransportHTTP      = "streamable_http"
)

// BasisProducer is the only Observation.Basis: what tracectl observed, not
// something the server authenticated.
const BasisProducer = "producer_observation"

// ResultTypeError is Observation.ResultType for a JSON-RPC error response.
const ResultTypeError = "error"
