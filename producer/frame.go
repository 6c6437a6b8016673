package producer

import (
	"errors"
	"fmt"
	"io"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// FrameRecord is one frame that no attempt, response observation or
// notification line commits to (spec/transcript.md, "frame"): a proxy
// records every other frame it reads, in either direction, before it
// forwards, refuses or withholds it.
type FrameRecord struct {
	// Line is the frame's exact bytes, terminator included. It is nil for a
	// frame too long to hold (it streamed through a spool): Digest, Length
	// and Terminator say what it was.
	Line       []byte
	Digest     string // sha256:<hex> of the bytes without the terminator, when Line is nil
	Length     int64  // their length, when Line is nil
	Terminator string // when Line is nil
	// Body reads the Length bytes of a frame that streamed (optional): with
	// it, such a frame is retained like any other, within the frame limit.
	Body      io.Reader
	Direction string // transcript.ClientToServer or ServerToClient
	// Index is the frame's 0-based position among its direction's frames.
	Index       int64
	Disposition string // transcript.FrameForwarded, FrameRefused or FrameWithheld
	// The gate's reading: Message when it understood the frame, Refusal
	// when not; neither for a frame too long to read. Both for a server
	// frame the gate read and mediation refused (Refusal.Rule one of
	// mcpwire.ServerRules: a settled id, an id twin, SSE framing).
	Message *mcpwire.Message
	Refusal *mcpwire.Refusal
	// AttemptID is the in-flight attempt the protocol ties the frame to
	// (a progress notification's token), or "".
	AttemptID string
}

// RecordFrame records a frame line. The line is written (ordered before
// anything the caller forwards after it returns) but, unlike an attempt or
// its response, not waited on for durability: it becomes durable with the
// next group commit (spec/transcript.md, "Durability"). It needs a Recorder
// opened with Options.FramesCommitted.
func (r *Recorder) RecordFrame(f FrameRecord) error {
	if !r.opts.FramesCommitted {
		return fmt.Errorf("%w: frame lines need Options.FramesCommitted", ErrInvalidInput)
	}
	if f.Direction != transcript.ClientToServer && f.Direction != transcript.ServerToClient {
		return fmt.Errorf("%w: direction %q", ErrInvalidInput, f.Direction)
	}
	if f.Index < 0 {
		return fmt.Errorf("%w: frame index %d", ErrInvalidInput, f.Index)
	}
	if f.Message != nil && f.Refusal != nil && (f.Direction != transcript.ServerToClient || f.Disposition != transcript.FrameRefused) {
		return fmt.Errorf("%w: a frame is either read or refused, but for a server frame mediation refused", ErrInvalidInput)
	}
	if err := r.begin(true); err != nil {
		return err
	}
	defer r.ops.Done()
	ev := &transcript.Frame{Direction: f.Direction, Index: f.Index, Disposition: f.Disposition, AttemptID: f.AttemptID}
	if f.Line == nil {
		if _, err := canon.ParseDigest(f.Digest); err != nil || f.Length < 0 {
			return fmt.Errorf("%w: a streamed frame needs its digest and length", ErrInvalidInput)
		}
		ev.Kind, ev.Rule = transcript.FrameUnread, string(mcpwire.RuleTooLarge)
		ev.Payload = transcript.Payload{Digest: f.Digest, Length: f.Length}
		ev.Terminator = f.Terminator
		switch {
		case f.Length > r.opts.Limits.MaxFrameBytes:
			ev.Payload.OverLimit = true
		case f.Body != nil && r.opts.Retention == transcript.RetainFull && r.rules != nil:
			// Too long to redact: kept only when redaction is off.
			ev.Payload.Withheld = transcript.WithheldUnredactable
		case f.Body != nil && r.opts.Retention == transcript.RetainFull:
			switch err := r.pack.putReader(f.Body, f.Digest, f.Length); {
			case errors.Is(err, errPayloadChanged):
				// Not the bytes that were hashed: committed, not retained.
			case err != nil:
				return r.auditFail(err)
			default:
				ev.Payload.Retained = true
			}
		}
	} else {
		body, term := splitTerminator(f.Line)
		m, ref := f.Message, f.Refusal
		if m == nil && ref == nil {
			m, ref = mcpwire.Read(f.Line)
		}
		var facts transcript.FrameFacts
		if m != nil && ref != nil {
			facts = transcript.FrameFactsOf(m, nil)
			facts.Rule = string(ref.Rule)
		} else {
			facts = transcript.FrameFactsOf(m, ref)
		}
		ev.Kind, ev.Rule, ev.Method, ev.RPCID = facts.Kind, facts.Rule, facts.Method, facts.RPCID
		ev.Terminator = term
		p, err := r.payload(body, m, r.opts.Retention == transcript.RetainFull)
		if err != nil {
			return r.auditFail(err)
		}
		ev.Payload = p
	}
	_, err := r.j.appendWritten(r.lineOf(func(s, at int64) { ev.Seq, ev.AtMs = s, at }, ev))
	return err
}
