package producer

import (
	"context"

	"github.com/tracectl/tracectl/transcript"
)

// Pipelining: a proxy with many calls in flight records each attempt (and
// each response) in two steps, so that the reader of the next frame never
// waits for the previous frame's fsync. The first step writes the line to
// the journal: it has its place in file order, and a crash of the process
// loses nothing once it returns. The second, the returned wait, returns once
// the line and the payload bytes before it are durable, leading a group
// fsync if none is under way, so every line written meanwhile shares it.
// The frame may be forwarded only after the wait returned nil; any error
// (ErrAuditUnavailable) means it must never be.
//
// In durability batch and none the wait returns nil at once: the line is
// written, which is all those modes promise before forwarding.

// attempt is Attempt and Retry: the line written, then waited on.
func (r *Recorder) attempt(ctx context.Context, c Call, prev *attemptState, basis string) (*Handle, error) {
	h, err := r.attemptWritten(ctx, c, prev, basis)
	if err != nil {
		return nil, err
	}
	if err := r.j.settle(h.st.seq); err != nil {
		return nil, err
	}
	return h, nil
}

// observe records an observation, waited on as the mode promises.
func (h *Handle) observe(kind string, f Framed, detail string) error {
	seq, err := h.observeWritten(kind, f, detail)
	if err != nil {
		return err
	}
	return h.r.j.settle(seq)
}

// AttemptWritten is Attempt with the durable wait handed back: when it
// returns, the attempt line is written (in file order); dispatch the
// request only after wait returned nil. An error from either means nothing
// may be dispatched. wait may be called once, from any goroutine.
func (r *Recorder) AttemptWritten(ctx context.Context, c Call) (h *Handle, wait func() error, err error) {
	if h, err = r.attemptWritten(ctx, c, nil, ""); err != nil {
		return nil, nil, err
	}
	return h, r.j.durableWait(h.st.seq), nil
}

// ResponseFrameWritten is ResponseFrame with the durable wait handed back:
// deliver the response only after wait returned nil.
func (h *Handle) ResponseFrameWritten(f Framed) (wait func() error, err error) {
	seq, err := h.observeWritten(transcript.ObsResponse, f, "")
	if err != nil {
		return nil, err
	}
	return h.r.j.durableWait(seq), nil
}

// Durability returns the bundle's durability mode (transcript.DurabilityStrict,
// DurabilityBatch or DurabilityNone).
func (r *Recorder) Durability() string { return r.j.mode }
