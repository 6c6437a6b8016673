package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// RecordingSink is the production Sink: it records through a producer
// Recorder (the durable journal) and assembles declaration snapshots from
// the tools/list pages the client fetched (passive collection).
type RecordingSink struct {
	rec       *producer.Recorder
	captureID func() (string, error)
	limits    snapshot.Limits

	mu         sync.Mutex
	coll       *snapshot.Collector // the client's own listing, observed (passive)
	active     *snapshot.Collector // the session's own collection (capture.go), while it runs
	current    bool                // the last snapshot recorded is complete, and no list_changed came since
	last       string              // the id of the last snapshot this sink recorded
	proto      producer.Protocol   // latest protocol observation, for snapshot manifests
	oversized  int64               // frames over the gate's limit
	refused    int64               // client frames the gate refused
	unreadable int64               // tools/list requests snapshot collection could not read

	// The recorder's policy, for decisions (policy.go).
	engine *policy.Engine
	audit  bool
}

// NewRecordingSink returns a Sink over rec, which must have been opened with
// producer.Options.FramesCommitted (the proxy commits every frame).
// captureID mints snapshot capture ids from the caller's entropy
// (snapshot.NewCaptureID).
func NewRecordingSink(rec *producer.Recorder, captureID func() (string, error), limits snapshot.Limits) *RecordingSink {
	engine, audit := rec.Policy()
	return &RecordingSink{rec: rec, captureID: captureID, limits: limits, engine: engine, audit: audit}
}

type handleRef struct{ h *producer.Handle }

func (r handleRef) AttemptID() string { return r.h.ID() }

func handleOf(a AttemptRef) *producer.Handle { return a.(handleRef).h }

// Attempt records the attempt; in strict durability it is on disk when this
// returns.
func (s *RecordingSink) Attempt(c Call) (AttemptRef, error) {
	ref, wait, err := s.AttemptWritten(c)
	if err != nil {
		return nil, err
	}
	if err := wait(); err != nil {
		return nil, err
	}
	return ref, nil
}

// pipelined: the proxy defers the durable waits of strict durability to
// its forwarders (pipeline.go); batch and none have none to defer.
func (s *RecordingSink) pipelined() bool {
	return s.rec.Durability() == transcript.DurabilityStrict
}

// AttemptWritten records the attempt line and hands back its durable wait:
// the request may be forwarded only after wait returned nil. The HTTP
// proxy calls it while it holds the client frame order and waits after
// releasing it, so concurrent calls share fsyncs
// (producer.Recorder.AttemptWritten).
func (s *RecordingSink) AttemptWritten(c Call) (AttemptRef, func() error, error) {
	// A call after a page that offered nextCursor, with no next page
	// observed (a client that reads the first page only, the TypeScript
	// SDK's plain listTools()): the declarations it was dispatched with
	// are that incomplete collection, which is recorded now so the attempt
	// binds it rather than no snapshot at all.
	s.mu.Lock()
	if s.coll != nil && s.coll.OfferedNextPage() {
		s.coll.Stop(snapshot.StopNextPageNotObserved, "a tools/call came after a page offering nextCursor; no next page was observed before it")
		if err := s.recordLocked(); err != nil {
			s.mu.Unlock()
			return nil, nil, err
		}
	}
	s.mu.Unlock()
	i := c.Index
	pc := producer.Call{Line: c.Line, Message: c.Msg, Frame: &i, Decide: c.Decide}
	if c.Bind != nil {
		pc.Snapshot, pc.NoSnapshot = c.Bind.Snapshot, c.Bind.Snapshot == ""
	}
	h, wait, err := s.rec.AttemptWritten(context.Background(), pc)
	if errors.Is(err, producer.ErrNotToolCall) || errors.Is(err, producer.ErrInvalidInput) {
		return nil, nil, fmt.Errorf("%w: %v", errUnrecordable, err)
	}
	if err != nil {
		return nil, nil, err
	}
	return handleRef{h}, wait, nil
}

// Response records a response (a late one after a timeout or cancellation:
// the producer keeps the earlier observation).
func (s *RecordingSink) Response(a AttemptRef, r ResponseObs) error {
	return handleOf(a).ResponseFrame(producer.Framed{Line: r.Line, Message: r.Msg, Index: r.Index})
}

// ResponseWritten records the response line and hands back its durable
// wait.
func (s *RecordingSink) ResponseWritten(a AttemptRef, r ResponseObs) (func() error, error) {
	return handleOf(a).ResponseFrameWritten(producer.Framed{Line: r.Line, Message: r.Msg, Index: r.Index})
}

func (s *RecordingSink) Timeout(a AttemptRef) error { return handleOf(a).Timeout() }

// CancelSent records the client's notifications/cancelled line and the
// unknown outcome it leaves.
func (s *RecordingSink) CancelSent(a AttemptRef, n NotificationObs) error {
	i := n.Index
	if err := s.rec.RecordNotification(producer.Notification{Line: n.Line, Message: n.Msg, Frame: &i, Direction: transcript.ClientToServer}); err != nil {
		return err
	}
	return handleOf(a).CancelSent()
}

func (s *RecordingSink) TransportFailure(a AttemptRef, detail string) error {
	return handleOf(a).TransportFailure(detail)
}

func (s *RecordingSink) Protocol(p ProtocolObs) error {
	pp := producer.Protocol{Era: p.Era, Version: p.Version, Source: p.Source, ServerName: p.ServerName, ServerVersion: p.ServerVersion, Line: p.Line}
	s.mu.Lock()
	if p.Source != transcript.SourceRequestMeta || s.proto.Era == "" {
		s.proto = pp
	}
	s.mu.Unlock()
	return s.rec.RecordProtocol(pp)
}

// ListPage feeds one tools/list exchange to snapshot collection. A request
// without a cursor starts a new collection; a finished collection is
// recorded at once, so attempts that follow bind it.
func (s *RecordingSink) ListPage(req, resp []byte, isErr bool) error {
	req, _ = mcpwire.SplitTerminator(req)
	resp, _ = mcpwire.SplitTerminator(resp)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coll == nil {
		if err := s.newCollector(); err != nil {
			return err
		}
	}
	err := s.coll.Add(req, resp)
	if errors.Is(err, snapshot.ErrFinished) {
		// The client started over: record what the earlier collection
		// got (incomplete, restarted) and collect anew.
		if err := s.recordLocked(); err != nil {
			return err
		}
		if err := s.newCollector(); err != nil {
			return err
		}
		err = s.coll.Add(req, resp)
	}
	if err != nil {
		// Not a readable tools/list request: forwarded, not collected,
		// and counted so the session summary says so.
		s.unreadable++
		return nil
	}
	if s.coll.Finished() {
		return s.recordLocked()
	}
	return nil
}

func (s *RecordingSink) newCollector() error {
	c, err := s.collector(snapshot.ModePassive)
	if err != nil {
		return err
	}
	s.coll = c
	return nil
}

// collector returns a new collector in mode, with what the session
// observed of the server and its protocol.
func (s *RecordingSink) collector(mode string) (*snapshot.Collector, error) {
	id, err := s.captureID()
	if err != nil {
		return nil, err
	}
	o := snapshot.Options{CaptureID: id, Mode: mode, Limits: s.limits, Era: mcpwire.EraUnknown}
	if s.proto.Era != "" {
		o.Era = s.proto.Era
		if s.proto.Version != "" {
			v := s.proto.Version
			o.Version = &v
		}
		switch s.proto.Source {
		case transcript.SourceInitialize, transcript.SourceDiscover:
			o.ServerSource = s.proto.Source
			name, ver := s.proto.ServerName, s.proto.ServerVersion
			o.ServerName, o.ServerVersion = &name, &ver
		}
		if s.proto.Era == mcpwire.EraLegacy {
			o.ListChangedWatch = snapshot.WatchSession
		}
	}
	return snapshot.NewCollector(o)
}

// recordLocked records the client's collection's snapshot and forgets it.
func (s *RecordingSink) recordLocked() error {
	c := s.coll
	s.coll = nil
	return s.recordCollectorLocked(c)
}

// recordCollectorLocked records a collection's snapshot.
func (s *RecordingSink) recordCollectorLocked(c *snapshot.Collector) error {
	snap, err := c.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	m := snap.Manifest
	blobs := make([][]byte, 0, 2*len(snap.Pages))
	for _, p := range snap.Pages {
		blobs = append(blobs, p.Request, p.Response)
	}
	ps := producer.Snapshot{
		Manifest: snap.Bytes, Digest: snap.Digest, Complete: m.Complete,
		Tools: int64(len(m.Tools)), Pages: int64(len(m.Pages)), Blobs: blobs,
	}
	if !m.Complete {
		ps.IncompleteReason = strings.Join(m.IncompleteReasons, ",")
		if ps.IncompleteReason == "" {
			ps.IncompleteReason = "incomplete"
		}
		if len(ps.IncompleteReason) > transcript.MaxReportedBytes {
			ps.IncompleteReason = ps.IncompleteReason[:transcript.MaxReportedBytes]
		}
	}
	id, err := s.rec.RecordSnapshot(ps)
	s.current = err == nil && m.Complete
	if err == nil {
		s.last = id
	}
	return err
}

// ListChanged records the notification; during a collection it makes that
// collection incomplete.
// Stale marks what this sink is collecting, or last recorded, as made
// stale by a list_changed another sink recorded (the HTTP proxy's
// stateless collections share one notification), without recording it.
func (s *RecordingSink) Stale() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coll != nil {
		s.coll.NotifyListChanged()
	}
	if s.active != nil {
		s.active.NotifyListChanged()
	}
	s.current = false
}

func (s *RecordingSink) ListChanged(n NotificationObs) error {
	s.mu.Lock()
	if s.coll != nil {
		s.coll.NotifyListChanged()
	}
	if s.active != nil {
		s.active.NotifyListChanged()
	}
	s.current = false
	s.mu.Unlock()
	i := n.Index
	return s.rec.RecordNotification(producer.Notification{Line: n.Line, Message: n.Msg, Frame: &i, Direction: transcript.ServerToClient})
}

// Frame commits any other frame (spec/transcript.md, "frame").
func (s *RecordingSink) Frame(f FrameObs) error {
	s.mu.Lock()
	if f.Line == nil {
		s.oversized++
	}
	if f.Disposition == transcript.FrameRefused {
		s.refused++
	}
	s.mu.Unlock()
	fr := producer.FrameRecord{
		Line: f.Line, Digest: f.Digest, Length: f.Length, Terminator: f.Terminator, Body: f.Body,
		Direction: f.Direction, Index: f.Index, Disposition: f.Disposition,
		Message: f.Msg, Refusal: f.Refusal,
	}
	if f.Attempt != nil {
		fr.AttemptID = f.Attempt.AttemptID()
	}
	return s.rec.RecordFrame(fr)
}

var _ pipelineSink = (*RecordingSink)(nil)

// Finish records a collection the session left unfinished (incomplete: the
// transport closed with pages outstanding).
func (s *RecordingSink) Finish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		a := s.active
		s.active = nil
		a.Stop(snapshot.StopTransportClosed, "the session ended during tracectl's own collection")
		if err := s.recordCollectorLocked(a); err != nil {
			return err
		}
	}
	if s.coll == nil {
		return nil
	}
	if s.coll.OfferedNextPage() {
		// The last page offered a nextCursor and no next page came: most
		// often a client that reads the first page only. Saying
		// transport_closed would claim a page request was outstanding,
		// which the sink cannot know.
		s.coll.Stop(snapshot.StopNextPageNotObserved, "the session ended after a page offering nextCursor; no next page was observed")
	} else {
		s.coll.Stop(snapshot.StopTransportClosed, "the session ended before the last page")
	}
	return s.recordLocked()
}

// RefusedFrames returns how many client frames the gate refused.
func (s *RecordingSink) RefusedFrames() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// OversizedFrames returns how many frames were too long to interpret.
func (s *RecordingSink) OversizedFrames() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.oversized
}

// UnreadableListRequests returns how many tools/list requests snapshot
// collection could not read (forwarded; not part of any snapshot).
func (s *RecordingSink) UnreadableListRequests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unreadable
}

func (s *RecordingSink) ClientGone(detail string) error { return s.rec.RecordClientGone(detail) }

// The session's own collection (capture.go). The exported forms are for
// a transport that sends the collection's requests itself (the HTTP
// proxy); the stdio session calls the unexported ones.

// Bind is what an attempt of this sink's client binds: the last snapshot
// this sink recorded, or none.
func (s *RecordingSink) Bind() *Binding {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Binding{Snapshot: s.last}
}

// SnapshotCurrent reports whether a complete snapshot this sink recorded
// is current: no list_changed since, no collection under way.
func (s *RecordingSink) SnapshotCurrent() bool { return s.snapshotCurrent() }

// CaptureStart begins the producer's own collection (manifest mode
// active).
func (s *RecordingSink) CaptureStart() error { return s.captureStart() }

// CapturePage adds one page: the exact request sent and the response body,
// without terminators.
func (s *RecordingSink) CapturePage(req, resp []byte) error { return s.capturePage(req, resp) }

// CaptureFinished reports whether the collection reached its terminal page
// or a stop.
func (s *RecordingSink) CaptureFinished() bool { return s.captureFinished() }

// CaptureEnd stops the collection with a stop reason (none when it
// finished) and records its snapshot.
func (s *RecordingSink) CaptureEnd(reason, detail string) error { return s.captureEnd(reason, detail) }

func (s *RecordingSink) snapshotCurrent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current && s.coll == nil
}

func (s *RecordingSink) captureStart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coll != nil && s.coll.OfferedNextPage() {
		// The client read part of the list: that is what it selected
		// from, recorded as it stands before the session's own.
		s.coll.Stop(snapshot.StopNextPageNotObserved, "a tools/call came after a page offering nextCursor; no next page was observed before it")
		if err := s.recordLocked(); err != nil {
			return err
		}
	}
	c, err := s.collector(snapshot.ModeActive)
	if err != nil {
		return err
	}
	s.active = c
	return nil
}

func (s *RecordingSink) capturePage(req, resp []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return nil
	}
	if err := s.active.Add(req, resp); err != nil {
		// The session's own request is always readable; a collector
		// that refuses it ends the collection.
		s.active.Stop(snapshot.StopInvalidPage, "tracectl's own page request: "+err.Error())
	}
	return nil
}

func (s *RecordingSink) captureFinished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active == nil || s.active.Finished()
}

func (s *RecordingSink) captureEnd(reason, detail string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.active
	if a == nil {
		return nil
	}
	s.active = nil
	if reason != "" {
		a.Stop(reason, detail)
	}
	return s.recordCollectorLocked(a)
}

var _ capturer = (*RecordingSink)(nil)
