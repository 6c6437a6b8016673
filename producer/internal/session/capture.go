package session

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/snapshot"
)

// Capture policies (Config.Capture): when the session collects the
// server's complete tools/list itself before forwarding a tools/call.
const (
	// CaptureAuto (the default): when no complete snapshot of this
	// session is current (none observed, the client read the first page
	// only or reuses a cached list, or a list_changed came since).
	CaptureAuto = "auto"
	// CaptureAlways: before every call.
	CaptureAlways = "always"
	// CaptureNever: bind what the client's own listing gave, if anything.
	CaptureNever = "never"
)

// errServerEnded: the server's output ended; no page request is sent.
var errServerEnded = errors.New("the server's output ended")

// defaultCaptureTimeout bounds the wait for one page of the session's own
// collection when Config.CaptureTimeout is zero.
const defaultCaptureTimeout = 30 * time.Second

// capturer is a Sink that can record the session's own collection
// (RecordingSink): the snapshot is the producer's (manifest mode active),
// bound to the call that caused it like any other.
type capturer interface {
	// snapshotCurrent: a complete snapshot was recorded and no
	// list_changed came since.
	snapshotCurrent() bool
	// captureStart begins the producer's own collection (a passive one
	// left unfinished is recorded first, as it stands).
	captureStart() error
	// capturePage adds one page: the exact request the session sent and
	// the server's response, without terminators.
	capturePage(req, resp []byte) error
	// captureFinished: the collection reached its terminal page or a stop.
	captureFinished() bool
	// captureEnd stops the collection with a snapshot.Stop* reason (none
	// when it finished) and records it.
	captureEnd(reason, detail string) error
}

// captureBefore collects the server's tools/list before the tools/call m
// is recorded and forwarded, as Config.Capture says. Its requests carry ids
// no client request in flight uses and go to the server in order with the
// client's frames; the responses are committed (withheld: never delivered)
// and kept as the snapshot's pages. A page that does not come in time, or a
// session that ends, leaves an incomplete snapshot: the call is forwarded
// all the same, bound to it.
func (s *session) captureBefore(m *mcpwire.Message) {
	c := s.capt
	if c == nil || s.cfg.Capture == CaptureNever || (s.cfg.Capture != CaptureAlways && c.snapshotCurrent()) {
		return
	}
	if err := c.captureStart(); err != nil {
		s.noteSinkErr(err)
		return
	}
	meta := ProtocolMeta(m)
	var cursor []byte
	for page := 0; ; page++ {
		key, req, ch, err := s.captureRequest(meta, cursor)
		if errors.Is(err, errServerEnded) {
			s.noteSinkErr(c.captureEnd(snapshot.StopTransportClosed, fmt.Sprintf("page %d: %v", page, err)))
			return
		}
		if err != nil {
			s.noteSinkErr(c.captureEnd(snapshot.StopCancelled, err.Error()))
			return
		}
		if err := s.cq.toServer(append(req, '\n'), nil, nil); err != nil {
			s.dropCapture(key)
			s.noteSinkErr(c.captureEnd(snapshot.StopTransportClosed, fmt.Sprintf("page %d: the request could not be sent: %v", page, err)))
			return
		}
		timeout := s.cfg.CaptureTimeout
		if timeout <= 0 {
			timeout = defaultCaptureTimeout
		}
		t := time.NewTimer(timeout)
		var resp []byte
		var ok bool
		select {
		case resp, ok = <-ch:
			t.Stop()
		case <-t.C:
			s.dropCapture(key)
			s.noteSinkErr(c.captureEnd(snapshot.StopTimeout, fmt.Sprintf("page %d: no response within %s", page, timeout)))
			return
		}
		if !ok {
			s.noteSinkErr(c.captureEnd(snapshot.StopTransportClosed, fmt.Sprintf("page %d: the session ended before the response", page)))
			return
		}
		if resp == nil {
			s.noteSinkErr(c.captureEnd(snapshot.StopPageBytesLimit, fmt.Sprintf("page %d: the response is longer than the gate reads (committed by digest, withheld)", page)))
			return
		}
		body, _ := mcpwire.SplitTerminator(resp)
		if err := c.capturePage(req, body); err != nil {
			s.noteSinkErr(err)
			return
		}
		if c.captureFinished() {
			s.noteSinkErr(c.captureEnd("", ""))
			return
		}
		cursor = NextCursor(resp)
		if cursor == nil {
			s.noteSinkErr(c.captureEnd(snapshot.StopInvalidPage, fmt.Sprintf("page %d: no readable nextCursor", page)))
			return
		}
	}
}

// captureRequest builds one page's request under a fresh id (random, so no
// client could have chosen it, and checked against the ids in flight) and
// registers it, so its response comes to ch.
func (s *session) captureRequest(meta, cursor []byte) (key string, req []byte, ch chan []byte, err error) {
	if key, err = CaptureRequestID(); err != nil {
		return "", nil, nil, err
	}
	req = ListRequest(key, meta, cursor)
	m, ref := mcpwire.Read(append(req, '\n'))
	if ref != nil {
		return "", nil, nil, fmt.Errorf("capture request: %v", ref)
	}
	ch = make(chan []byte, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serverEnded {
		return "", nil, nil, errServerEnded
	}
	if _, taken := s.inflight[key]; taken {
		return "", nil, nil, fmt.Errorf("capture request id %s is in flight", key)
	}
	s.inflight[key] = &pending{what: reqCapture, capture: ch, match: mcpwire.MatchKey(m.ID)}
	return key, req, ch, nil
}

// CaptureRequestID is a fresh id for one of the session's own page
// requests, as JSON text: "tracectl-capture-<24 hex>", random, so no
// client could have chosen it.
func CaptureRequestID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("capture request id: %w", err)
	}
	return strconv.Quote("tracectl-capture-" + hex.EncodeToString(b[:])), nil
}

// dropCapture gives up on a page request: a late answer is then withheld
// (the session answered that id itself, in a sense: nobody waits for it).
func (s *session) dropCapture(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.inflight[key]; ok && p.what == reqCapture {
		delete(s.inflight, key)
		s.answered[key] = true
	}
}

// ListRequest is the session's own tools/list request line (without its
// terminator): id (JSON text), the modern _meta when the session speaks
// the modern era, the cursor's exact JSON text from the previous page.
func ListRequest(id string, meta, cursor []byte) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"`)
	if meta != nil || cursor != nil {
		b = append(b, `,"params":{`...)
		if meta != nil {
			b = append(b, `"_meta":`...)
			b = append(b, meta...)
		}
		if cursor != nil {
			if meta != nil {
				b = append(b, ',')
			}
			b = append(b, `"cursor":`...)
			b = append(b, cursor...)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// ProtocolMeta returns the io.modelcontextprotocol/ members of the call's
// params._meta as a JSON object (the modern era's per-request protocol
// version, client info and capabilities, exactly as the client sent them),
// or nil when there are none (the legacy era).
func ProtocolMeta(m *mcpwire.Message) []byte {
	if !m.Params.Valid() || m.Params.Kind() != canon.KindObject {
		return nil
	}
	meta, ok := m.Params.Get("_meta")
	if !ok || meta.Kind() != canon.KindObject {
		return nil
	}
	var b []byte
	for _, mem := range meta.Members() {
		if !strings.HasPrefix(mem.Name, "io.modelcontextprotocol/") {
			continue
		}
		if b == nil {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		name, _ := json.Marshal(mem.Name)
		b = append(b, name...)
		b = append(b, ':')
		b = append(b, mem.Value.Raw()...)
	}
	if b == nil {
		return nil
	}
	return append(b, '}')
}

// NextCursor returns the exact JSON text of a page's result.nextCursor, or
// nil.
func NextCursor(resp []byte) []byte {
	m, r := mcpwire.Read(resp)
	if r != nil || m == nil || !m.Result.Valid() {
		return nil
	}
	v, ok := m.Result.Get("nextCursor")
	if !ok || v.Kind() != canon.KindString {
		return nil
	}
	return v.Raw()
}

// serverGone: the server's output ended (abortCaptures ran).
func (s *session) serverGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serverEnded
}

// failUnforwarded settles a call recorded after the server went away (it
// was held for the session's own collection): a transport failure, and the
// client's error, written before the session ends.
func (s *session) failUnforwarded(ref AttemptRef, wait func() error, key string) error {
	if wait != nil {
		if err := wait(); err != nil {
			s.noteSinkErr(err)
			return s.writeClient(errorLine(key, codeAuditUnavailable, "tracectl: not forwarded: "+ErrAuditUnavailable.Error()))
		}
	}
	s.noteSinkErr(s.cfg.Sink.TransportFailure(ref, "the server's output ended before the call could be forwarded"))
	return s.writeClient(errorLine(key, codeTransportFailure, "tracectl: transport failure: the server went away before the call could be forwarded"))
}

// enterBusy marks a call being recorded, unless the session has stopped.
func (s *session) enterBusy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.busy++
	return true
}

func (s *session) leaveBusy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy--; s.busy == 0 {
		s.idle.Broadcast()
	}
}

// pageTooLarge: a server frame too long to read begins like the answer to
// one of the session's own page requests: that page will not come
// readable, so the collection stops at once (page_bytes_limit) rather than
// at its timeout.
func (s *session) pageTooLarge(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.inflight[key]; ok && p.what == reqCapture {
		delete(s.inflight, key)
		s.answered[key] = true
		p.capture <- nil
	}
}
