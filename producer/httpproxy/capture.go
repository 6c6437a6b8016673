package httpproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// The proxy's own tools/list collection (spec/snapshot.md, "The session's
// own collection"): before a tools/call is recorded, when no complete
// snapshot of that client's server is current, the proxy lists the
// upstream's tools itself, with the call's own headers (its session, its
// credentials, its protocol version), so the call binds a complete
// snapshot of the server it goes to. A session bundle has one client; a
// stateless bundle has many, and a call binds only what was listed with
// its own view of the server (its credentials: viewKey), by a client or
// by the proxy, never a list another client's credentials were given.

// defaultCaptureTimeout bounds the wait for one page when
// Config.CaptureTimeout is zero.
const defaultCaptureTimeout = 30 * time.Second

// listed is what one view of the server (viewKey) last listed, or the
// proxy collected for it.
type listed struct {
	snapshot string // its id
	current  bool   // complete, and no list_changed since
}

// viewKey names the server a request sees: what the upstream's answer to
// tools/list can depend on besides the server itself. That is every
// end-to-end request header (the session, the credentials, a tenant or
// user header a gateway in front of the proxy sets, the protocol version)
// but the ones that describe one request only (perRequestHeaders), and the
// query string; never the connection, since one client lists on one
// connection and calls on another. Requests with one view key see one
// tool list; a call binds only what its own view listed. The key is a
// digest: no header value is kept.
func viewKey(r *http.Request) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(r.URL.RawQuery)
	names := make([]string, 0, len(r.Header))
	for n := range r.Header {
		c := http.CanonicalHeaderKey(n)
		if !perRequestHeaders[c] && !strings.HasPrefix(strings.ToLower(c), hParamPrefix) {
			names = append(names, c)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		vals := r.Header.Values(n)
		field(n)
		field(strconv.Itoa(len(vals)))
		for _, v := range vals {
			field(v)
		}
	}
	return string(h.Sum(nil))
}

// perRequestHeaders describe one request, not who asks: they are not part
// of a view (and neither is any Mcp-Param-* header).
var perRequestHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Accept": true, "Accept-Encoding": true, "Accept-Language": true,
	"Mcp-Method": true, "Mcp-Name": true, "Last-Event-Id": true, "Traceparent": true, "Tracestate": true, "Baggage": true,
	"User-Agent": true, "Cache-Control": true, "Pragma": true, "Expect": true, "Origin": true, "Referer": true,
}

// maxCaptures bounds the proxy's own collections in one bundle: each
// stores the whole list, so a client that invents views (a new query
// string per call) cannot make the bundle grow by a list per call. Past
// it a call binds what its view listed, or nothing.
const maxCaptures = 64

// viewLock is one view's collection lock, shared while held or awaited.
type viewLock struct {
	mu   sync.Mutex
	refs int
}

// lockView takes the view's lock: one collection per view at a time, and
// views never wait on each other.
func (b *bundle) lockView(view string) (unlock func()) {
	b.listMu.Lock()
	if b.views == nil {
		b.views = map[string]*viewLock{}
	}
	l := b.views[view]
	if l == nil {
		l = &viewLock{}
		b.views[view] = l
	}
	l.refs++
	b.listMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		b.listMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(b.views, view)
		}
		b.listMu.Unlock()
	}
}

// startedLocked notes when a collection began (b.changes), with listMu.
func (b *bundle) startedLocked(s *session.RecordingSink) {
	if b.started == nil {
		b.started = map[*session.RecordingSink]int64{}
	}
	b.started[s] = b.changes
}

// staleIfChanged marks s's collection stale when a list_changed came
// since it began.
func (b *bundle) staleIfChanged(s *session.RecordingSink) {
	b.listMu.Lock()
	start, ok := b.started[s]
	changed := ok && b.changes != start
	b.listMu.Unlock()
	if changed {
		s.Stale()
	}
}

// forget drops a finished collection's start.
func (b *bundle) forget(s *session.RecordingSink) {
	b.listMu.Lock()
	delete(b.started, s)
	b.listMu.Unlock()
}

// bindFor decides the snapshot the tools/call m binds, collecting the
// upstream's tools/list first when Config.Capture says so. nil binds the
// bundle's latest (a session bundle: its one client's). An error is an
// audit failure.
func (x *exchange) bindFor(m *mcpwire.Message) (*session.Binding, error) {
	b, policy := x.b, x.p.cfg.Capture
	if b.legacy != nil {
		// The deprecated HTTP+SSE transport answers on the session's
		// stream, not on the POST: the proxy does not collect there (a
		// call binds what the client's own listing gave, as with never).
		return nil, nil
	}
	if !b.demux {
		b.captureMu.Lock()
		defer b.captureMu.Unlock()
		if policy == session.CaptureNever || (policy != session.CaptureAlways && b.sink.SnapshotCurrent()) {
			return nil, nil
		}
		if err := x.collect(b.sink, m); err != nil {
			return nil, err
		}
		return b.sink.Bind(), nil
	}
	view := viewKey(x.r)
	bound := func() *session.Binding {
		if l, ok := b.listedBy(view); ok {
			return &session.Binding{Snapshot: l.snapshot}
		}
		return &session.Binding{} // bind none: another client's list is not this one's
	}
	current := func() bool { l, ok := b.listedBy(view); return ok && l.current }
	if policy == session.CaptureNever || (policy != session.CaptureAlways && current()) {
		return bound(), nil
	}
	unlock := b.lockView(view)
	defer unlock()
	if policy != session.CaptureAlways && current() { // collected while this call waited
		return bound(), nil
	}
	b.listMu.Lock()
	over := b.captures >= maxCaptures
	if !over {
		b.captures++
	}
	b.listMu.Unlock()
	if over {
		return bound(), nil
	}
	s := session.NewRecordingSink(b.rec, x.p.cfg.CaptureID, x.p.cfg.SnapshotLimits)
	if err := x.collect(s, m); err != nil {
		return nil, err
	}
	bind := s.Bind()
	b.setListed(view, listed{snapshot: bind.Snapshot, current: s.SnapshotCurrent()})
	return bind, nil
}

// collect runs one collection of the upstream's tools/list into s, page
// by page, and records its snapshot: complete, or stopped with the reason
// a page did not come. The call is forwarded either way.
func (x *exchange) collect(s *session.RecordingSink, call *mcpwire.Message) error {
	b := x.b
	// The collection as a whole is bounded (4 page timeouts), and ends
	// when the client whose call waits on it goes away.
	ctx, cancel := context.WithCancel(x.p.base)
	defer cancel()
	defer context.AfterFunc(x.r.Context(), cancel)()
	var over atomic.Bool
	total := x.p.cfg.NewTimer(4 * x.pageTimeout())
	go func() {
		select {
		case <-total.C():
			over.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	defer total.Stop()
	b.listMu.Lock()
	b.startedLocked(s)
	b.listMu.Unlock()
	defer b.forget(s)
	if err := s.CaptureStart(); err != nil {
		return err
	}
	end := func(reason, detail string) error {
		b.staleIfChanged(s)
		return s.CaptureEnd(reason, detail)
	}
	meta := session.ProtocolMeta(call)
	var cursor []byte
	for page := 0; ; page++ {
		id, err := session.CaptureRequestID()
		if err != nil {
			return end(snapshot.StopCancelled, err.Error())
		}
		req := session.ListRequest(id, meta, cursor)
		resp, stop, detail, err := x.capturePage(ctx, req, id)
		if err != nil {
			return err
		}
		if stop != "" {
			switch {
			case over.Load():
				stop, detail = snapshot.StopTimeout, "the collection took longer than "+(4*x.pageTimeout()).String()
			case x.r.Context().Err() != nil:
				stop, detail = snapshot.StopCancelled, "the client whose call waited on it went away"
			}
			return end(stop, fmt.Sprintf("page %d: %s", page, detail))
		}
		b.staleIfChanged(s)
		if err := s.CapturePage(req, resp); err != nil {
			return err
		}
		if s.CaptureFinished() {
			return end("", "")
		}
		if cursor = session.NextCursor(append(resp, '\n')); cursor == nil {
			return end(snapshot.StopInvalidPage, fmt.Sprintf("page %d: no readable nextCursor", page))
		}
	}
}

// pageTimeout is Config.CaptureTimeout, or its default.
func (x *exchange) pageTimeout() time.Duration {
	if t := x.p.cfg.CaptureTimeout; t > 0 {
		return t
	}
	return defaultCaptureTimeout
}

// capturePage sends one page request upstream and returns the response to
// it (the message body, without terminator), or why none came (stop, a
// snapshot stop reason, and its detail). Every message read on the page's
// stream is committed as a server frame withheld: the client never sees
// the proxy's collection. err is an audit failure.
func (x *exchange) capturePage(parent context.Context, req []byte, id string) (resp []byte, stop, detail string, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	up := *x.p.cfg.Upstream
	if x.r.URL.RawQuery != "" && up.RawQuery == "" {
		up.RawQuery = x.r.URL.RawQuery
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, up.String(), bytes.NewReader(req))
	if err != nil {
		return nil, snapshot.StopTransportClosed, "build the request: " + err.Error(), nil
	}
	hreq.Header = captureHeaders(x.r.Header)
	hreq.Host = up.Host
	hreq.ContentLength = int64(len(req))
	timeout := x.pageTimeout()
	var timedOut atomic.Bool
	t := x.p.cfg.NewTimer(timeout)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-t.C():
			timedOut.Store(true)
			cancel()
		case <-done:
			t.Stop()
		}
	}()
	failed := func(err error) (string, string) {
		if timedOut.Load() {
			return snapshot.StopTimeout, "no response within " + timeout.String()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // never the URL: its path may hold a key
		}
		return snapshot.StopTransportClosed, err.Error()
	}
	hresp, err := x.p.cfg.Transport.RoundTrip(hreq)
	if err != nil {
		stop, detail = failed(err)
		return nil, stop, detail, nil
	}
	defer hresp.Body.Close()
	mt, _, _ := mime.ParseMediaType(hresp.Header.Get("Content-Type"))
	if hresp.StatusCode != http.StatusOK || (mt != "application/json" && mt != "text/event-stream") {
		return nil, snapshot.StopInvalidPage, "HTTP " + strconv.Itoa(hresp.StatusCode) + " " + strconv.Quote(boundedText(mt)), nil
	}
	if ce := hresp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, snapshot.StopInvalidPage, "content coding " + strconv.Quote(boundedText(ce)), nil
	}
	if mt == "application/json" {
		// The collector judges the page's length (page_bytes_limit); the
		// read is bounded by what the gate reads.
		const limit = mcpwire.MaxFrameBytes
		body, err := io.ReadAll(io.LimitReader(hresp.Body, limit+1))
		if err != nil {
			stop, detail = failed(err)
			return nil, stop, detail, nil
		}
		if int64(len(body)) > limit {
			return nil, snapshot.StopPageBytesLimit, "a response longer than " + strconv.FormatInt(limit, 10) + " bytes", nil
		}
		m, err := x.withheld(body, nil, id)
		if err != nil {
			return nil, "", "", err
		}
		if m == nil {
			return nil, snapshot.StopInvalidPage, "the body is not the response to the page request", nil
		}
		return body, "", "", nil
	}
	er := mcpwire.NewEventReader(hresp.Body)
	for {
		ev, rerr := er.Next()
		switch {
		case ev.Data != nil:
			m, err := x.withheld(ev.Data, ev.Refusal, id)
			if err != nil {
				return nil, "", "", err
			}
			if m != nil {
				return ev.Data, "", "", nil
			}
		case ev.Refusal != nil:
			if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: string(ev.Refusal.Rule), Detail: ev.Refusal.Detail}); err != nil {
				return nil, "", "", err
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				return nil, snapshot.StopTransportClosed, "the stream ended before the response", nil
			}
			stop, detail = failed(rerr)
			return nil, stop, detail, nil
		}
	}
}

// captureHeaders are the headers of a page request: the call's own (its
// session, credentials and protocol version), without hop-by-hop ones,
// content coding or length, and with the call's method headers (SEP-2243)
// restated for tools/list.
func captureHeaders(call http.Header) http.Header {
	h := call.Clone()
	dropHop(h)
	h.Del("Accept-Encoding")
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	for n := range h {
		if strings.HasPrefix(strings.ToLower(n), hParamPrefix) {
			h.Del(n)
		}
	}
	h.Del(hName)
	if h.Get(hMethod) != "" {
		h.Set(hMethod, mcpwire.MethodToolsList)
	}
	return h
}

// withheld commits one upstream message of the proxy's own collection:
// the page (the response to id) as a server frame withheld, never
// delivered; anything else refused: by the gate, for the SSE event that
// carried it (framing, with its http withheld line, as relaySSE commits
// one), or as capture_stream. It returns the page's reading, else nil.
func (x *exchange) withheld(body []byte, framing *mcpwire.Refusal, id string) (*mcpwire.Message, error) {
	b := x.b
	line, m, ref := gateLine(body)
	page := framing == nil && m != nil && m.Kind == mcpwire.KindResponse && m.IDText() == id
	err := b.serverFrame(func(index int64) error {
		obs := session.FrameObs{Line: line, Msg: m, Refusal: ref, Direction: transcript.ServerToClient, Index: index, Disposition: transcript.FrameWithheld}
		switch {
		case framing != nil:
			obs.Disposition = transcript.FrameRefused
			if m != nil {
				obs.Refusal = framing
			}
			if err := b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Frame: &index, Rule: string(framing.Rule), Detail: framing.Detail}); err != nil {
				return err
			}
		case m == nil:
			obs.Disposition = transcript.FrameRefused
		case !page:
			obs.Disposition = transcript.FrameRefused
			obs.Refusal = &mcpwire.Refusal{Rule: mcpwire.RuleCaptureStream, Detail: "on the stream of the proxy's own tools/list request " + boundedText(id), ID: "null"}
		}
		return b.sink.Frame(obs)
	})
	if err != nil || !page {
		return nil, err
	}
	return m, nil
}

// listedBy is what a stateless client last listed.
func (b *bundle) listedBy(client string) (listed, bool) {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	l, ok := b.listed[client]
	return l, ok
}

func (b *bundle) setListed(client string, l listed) {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	if b.listed == nil {
		b.listed = map[string]listed{}
	}
	if _, ok := b.listed[client]; !ok && len(b.listed) >= maxListedClients {
		clear(b.listed) // bounded: clients forgotten list again (auto) or bind none
	}
	b.listed[client] = l
}

// listChanged: a notifications/tools/list_changed makes every stateless
// client's list stale, and every collection under way (changes).
func (b *bundle) listChanged() {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	b.changes++
	for k, l := range b.listed {
		l.current = false
		b.listed[k] = l
	}
}

// maxListedClients bounds the stateless clients whose listing a bundle
// remembers.
const maxListedClients = 1 << 16
