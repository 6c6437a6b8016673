package session

import (
	"io"

	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// Sink receives what the proxy reads, before the proxy forwards it.
// Implementations make it durable according to their durability mode
// before returning; every frame read in either direction reaches exactly
// one of Attempt, Response, CancelSent, ListChanged or Frame, with its
// index among its direction's frames (spec/transcript.md, "Frames").
type Sink interface {
	// Attempt records a tools/call attempt before it is forwarded.
	Attempt(c Call) (AttemptRef, error)
	// Response records the response to an attempt before it is delivered.
	Response(a AttemptRef, r ResponseObs) error
	// Timeout, CancelSent and TransportFailure record an unknown outcome.
	// CancelSent also commits the client's notifications/cancelled frame.
	Timeout(a AttemptRef) error
	CancelSent(a AttemptRef, n NotificationObs) error
	TransportFailure(a AttemptRef, detail string) error
	// Protocol records an era/revision observation (not a frame: the frame
	// it comes from is committed by Frame).
	Protocol(p ProtocolObs) error
	// ListPage hands a tools/list request and its response to snapshot
	// collection (not a frame either); ListChanged commits a
	// notifications/tools/list_changed frame.
	ListPage(request, response []byte, isError bool) error
	ListChanged(n NotificationObs) error
	// Frame commits any other frame: forwarded, refused by the gate, or
	// withheld.
	Frame(f FrameObs) error
	// ClientGone records, once, that a write to the client failed (it
	// closed its end or died): the proxy stops writing to it and goes on
	// recording what the server sends.
	ClientGone(detail string) error
}

// AttemptRef identifies a recorded attempt.
type AttemptRef interface{ AttemptID() string }

// Call is a tools/call request frame.
type Call struct {
	Line       []byte           // exact bytes including the terminator
	Terminator string           // "lf" | "crlf"
	Msg        *mcpwire.Message // the gate's reading of Line
	Index      int64            // the frame's index among the client's frames
	// Bind, when set, is the snapshot the attempt binds (a RecordingSink's
	// Bind: its own client's latest); nil binds the recording's latest.
	Bind *Binding
	// Decide, when a policy is in force, decides the call given the
	// snapshot its attempt binds (producer.Call.Decide; policy.go).
	Decide func(*transcript.Attempt, *policy.Snapshot) *transcript.Decision
}

// Binding names the snapshot an attempt binds: a recorded snapshot's id,
// or none ("").
type Binding struct{ Snapshot string }

// ResponseObs is a response frame to an attempt.
type ResponseObs struct {
	Line       []byte
	Msg        *mcpwire.Message
	Index      int64  // among the server's frames
	ResultType string // complete | input_required | <ext> | "error"
	IsError    bool
	ErrorCode  *int64
	Late       bool // after a timeout or cancellation
}

// NotificationObs is a notification frame the evidence interprets
// (cancelled, list_changed).
type NotificationObs struct {
	Line  []byte
	Msg   *mcpwire.Message
	Index int64
}

// FrameObs is any other frame.
type FrameObs struct {
	Line        []byte    // nil for a frame streamed past the limit
	Digest      string    // streamed: of the bytes without the terminator
	Length      int64     // streamed
	Terminator  string    // streamed
	Body        io.Reader // streamed: the frame's bytes without the terminator, from the spool
	Direction   string    // transcript.ClientToServer or ServerToClient
	Index       int64
	Disposition string // transcript.FrameForwarded, FrameRefused or FrameWithheld
	Msg         *mcpwire.Message
	Refusal     *mcpwire.Refusal
	Attempt     AttemptRef // the in-flight attempt it belongs to, or nil
}

// ProtocolObs is an era observation.
type ProtocolObs struct {
	Era                                        mcpwire.Era
	Version, Source, ServerName, ServerVersion string
	Line                                       []byte
}
