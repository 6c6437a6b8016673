package producer

// SessionResult summarizes a recorded session's run, as a transport
// (package stdio for tracectl wrap, package mcpsdk in process) returns it
// once the session has ended. The evidence is the bundle; this is what the
// caller needs to decide its own exit.
type SessionResult struct {
	ExitStatus string // the server's exit status as observed
	// ExitCode is the server's exit code, 128+signal when a signal ended
	// it, -1 when unknown.
	ExitCode int
	// EndedOnItsOwn: the server exited or closed its stdout before the
	// proxy asked it to end (by closing its stdin). Its exit code is then
	// the server's own verdict; otherwise the proxy ended it.
	EndedOnItsOwn bool
	// Ended says what ended the session first: "client_eof" (the client
	// closed its side), "canceled" (the context was cancelled: SIGTERM,
	// SIGINT), "server_exit" (the server exited on its own) or
	// "server_stdout_closed" (the server closed its stdout on its own).
	Ended string
	// ClientBytes is how many bytes the client sent: 0 for a start that
	// never became a session.
	ClientBytes int64
	// ClientGone: a write to the client failed; what came after was
	// recorded but not delivered.
	ClientGone bool
	// TransportFailures counts attempts the server abandoned: it exited or
	// closed stdout on its own with them in flight.
	TransportFailures int
	// InFlight are the ids of attempts still without an answer when the
	// proxy itself ended the session (client gone, grace period over).
	// Their outcome is unknown: the recorder resolves those with no
	// observation at all when it seals; one with a timeout or cancellation
	// already says unknown.
	InFlight []string
	// RefusedFrames counts frames, in either direction, the gate refused
	// (committed as refused, never forwarded); OversizedFrames those of
	// them refused for their size; UnreadableListRequests the tools/list
	// requests whose page could not be collected. Stdio fills these.
	RefusedFrames, OversizedFrames, UnreadableListRequests int64
}
