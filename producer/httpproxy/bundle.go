package httpproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/transcript"
)

// bundle is one recording: a client session's (2025-11-25) or a rotation
// period's stateless traffic. Frames are numbered per direction in journal
// order: each direction's frames are committed one at a time under its
// lock, as the stdio proxy's two readers do.
type bundle struct {
	p    *Proxy
	rec  *producer.Recorder
	sink *session.RecordingSink

	cmu, smu   sync.Mutex // client / server frame order
	cidx, sidx int64

	mu       sync.Mutex
	refs     int
	retiring bool          // no new exchanges; sealed when the last one ends
	retired  chan struct{} // closed by retire
	done     chan struct{}
	calls    int64
	opened   time.Time
	lastSPKI string
	upstream bool // the upstream line is recorded
	inflight map[string][]*call
	session  string  // Mcp-Session-Id, for session bundles
	legacy   *legacy // a deprecated HTTP+SSE session's bundle (legacy.go)
	sealErr  error
	lastUsed time.Time   // when an exchange last began or ended
	expiry   func() bool // the pending expiry check of an unused session bundle

	// Stateless bundles hold many clients' tools/list collections at once:
	// each is its own sink over the one recorder, found by the view and
	// cursor its last page offered (demux).
	demux bool
	lists
	connSalt [16]byte // salts the connection digests of request lines; never recorded

	// settled holds, by mcpwire.MatchKey, the requests answered in this
	// bundle (bounded by session.MaxSettled): a later answer on another stream is
	// refused.
	settledMu sync.Mutex
	settled   map[string]bool
}

// lists is what a bundle knows of its clients' tools/list collections and
// of its own (capture.go).
type lists struct {
	listMu  sync.Mutex
	waiting map[string][]*session.RecordingSink // view and cursor -> collections awaiting that page
	listed  map[string]listed                   // per stateless view: its last listing
	// changes counts the list_changed notifications the bundle saw: a
	// stateless collection that saw it move is stale.
	changes  int64
	started  map[*session.RecordingSink]int64 // a collection's changes when it began
	views    map[string]*viewLock             // one collection of the proxy's own per view at a time
	captures int                              // the proxy's own collections in this bundle (maxCaptures)

	// captureMu: a session bundle's one collection of the proxy's own at
	// a time, so calls that arrive together bind the one collection.
	captureMu sync.Mutex
}

// call is a tools/call in flight in an exchange.
type call struct {
	ref      session.AttemptRef
	key      string // the client's identity (clientOf) and the request id's mcpwire.Key
	match    string // the request id's mcpwire.MatchKey
	token    string
	mu       sync.Mutex
	settled  bool // response or transport failure recorded
	timedOut bool
	canceled bool
	// approving: the approver is asked about the call: not forwarded yet.
	approving bool
}

func (p *Proxy) newBundle(kind string) (*bundle, error) {
	rec, err := p.cfg.Open(kind)
	if err != nil {
		return nil, err
	}
	b := &bundle{p: p, rec: rec, done: make(chan struct{}), retired: make(chan struct{}), opened: p.cfg.Clock(), inflight: map[string][]*call{}}
	b.sink = session.NewRecordingSink(rec, p.cfg.CaptureID, p.cfg.SnapshotLimits)
	b.demux = kind == kindStateless
	b.waiting = map[string][]*session.RecordingSink{}
	if _, err := io.ReadFull(p.cfg.Entropy, b.connSalt[:]); err != nil {
		rec.Close()
		return nil, fmt.Errorf("connection salt: %w", err)
	}
	return b, nil
}

// connection is the request's connection as its request line records it:
// the SHA-256 of the bundle's unkept salt and the connection's local and
// remote addresses (the identity callKey gives a sessionless client).
func (b *bundle) connection(r *http.Request) string {
	h := sha256.New()
	h.Write(b.connSalt[:])
	h.Write([]byte(connAddrs(r)))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// acquire admits one exchange; false when the bundle is retiring.
func (b *bundle) acquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retiring {
		return false
	}
	b.refs++
	b.lastUsed = b.p.cfg.Clock()
	return true
}

func (b *bundle) release() {
	b.mu.Lock()
	b.refs--
	last := b.refs == 0 && b.retiring
	if b.refs == 0 && !b.retiring && b.session != "" && b.p.cfg.SessionIdle > 0 {
		b.lastUsed = b.p.cfg.Clock()
		if b.expiry == nil {
			b.expiry = b.p.cfg.AfterFunc(b.p.cfg.SessionIdle, func() { b.p.expire(b) })
		}
	}
	b.mu.Unlock()
	if last {
		b.seal()
	}
}

// retire stops admitting exchanges and seals once the last one ends.
func (b *bundle) retire() {
	b.mu.Lock()
	if b.retiring {
		b.mu.Unlock()
		return
	}
	b.retiring = true
	if b.expiry != nil {
		b.expiry()
		b.expiry = nil
	}
	close(b.retired)
	idle := b.refs == 0
	b.mu.Unlock()
	if idle {
		b.seal()
	}
}

func (b *bundle) seal() {
	// Calls still in flight are resolved unknown by the seal itself;
	// collections left waiting for a page are recorded incomplete.
	err := b.sink.Finish()
	b.listMu.Lock()
	for _, l := range b.waiting {
		for _, s := range l {
			if ferr := s.Finish(); err == nil {
				err = ferr
			}
		}
	}
	b.waiting = nil
	b.listMu.Unlock()
	if serr := b.p.cfg.Seal(b.rec); err == nil {
		err = serr
	}
	b.mu.Lock()
	b.sealErr = err
	b.mu.Unlock()
	b.p.sealed(b, err)
	close(b.done)
}

// clientFrame commits one client frame under the client order; f is given
// the frame's index.
func (b *bundle) clientFrame(f func(index int64) error) error {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	i := b.cidx
	b.cidx++
	return f(i)
}

func (b *bundle) serverFrame(f func(index int64) error) error {
	b.smu.Lock()
	defer b.smu.Unlock()
	i := b.sidx
	b.sidx++
	return f(i)
}

func (b *bundle) track(c *call) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight[c.key] = append(b.inflight[c.key], c)
	b.calls++
}

// openMatches reports whether a call in flight in b has an id a client
// could match to one of keys (mcpwire.MatchKey).
func (b *bundle) openMatches(keys []string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.inflight {
		for _, c := range l {
			if slices.Contains(keys, c.match) {
				return true
			}
		}
	}
	return false
}

func (b *bundle) untrack(c *call) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.inflight[c.key]
	for i, x := range l {
		if x == c {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(b.inflight, c.key)
	} else {
		b.inflight[c.key] = l
	}
}

// onlyInflight is the one call in flight under a key (the client's
// identity and the id's, callKey), or nil when there are none or several
// (a cancellation then names no attempt).
func (b *bundle) onlyInflight(key string) *call {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.inflight[key]; len(l) == 1 {
		return l[0]
	}
	return nil
}

func (b *bundle) settle(key string) {
	b.settledMu.Lock()
	defer b.settledMu.Unlock()
	if b.settled == nil {
		b.settled = map[string]bool{}
	}
	if len(b.settled) < session.MaxSettled {
		b.settled[key] = true
	}
}

func (b *bundle) isSettled(keys []string) bool {
	b.settledMu.Lock()
	defer b.settledMu.Unlock()
	for _, k := range keys {
		if b.settled[k] {
			return true
		}
	}
	return false
}

// http records an HTTP line; a failure is an audit failure.
func (b *bundle) http(ev transcript.HTTPEvent) error {
	return b.rec.RecordHTTP(ev)
}

// gateLine is a message as the gate reads it: its bytes with an LF, the
// frame form the transcript commits to (spec/http.md, "Frames").
func gateLine(body []byte) ([]byte, *mcpwire.Message, *mcpwire.Refusal) {
	line := make([]byte, len(body)+1)
	copy(line, body)
	line[len(body)] = '\n'
	if len(body) > mcpwire.MaxFrameBytes {
		// an answer longer than the gate holds, read within maxLargeBody
		// (relayBody): every other rule the same
		m, r := mcpwire.ReadLarge(line, maxLargeBody)
		return line, m, r
	}
	m, r := mcpwire.Read(line)
	return line, m, r
}

// listPage hands a tools/list exchange to snapshot collection. A session
// bundle has one client: one collection at a time, as on stdio. A
// stateless bundle has many: a request without a cursor starts a
// collection, and one with a cursor continues a collection whose last page
// offered it (any of them when several did: a deterministic server gives
// every client the same pages), or starts one that joined mid-stream.
func (b *bundle) listPage(client string, req, resp []byte, m *mcpwire.Message) error {
	isErr := m.Error.Valid()
	if !b.demux {
		return b.sink.ListPage(req, resp, isErr)
	}
	cursor, hasCursor := "", false
	if rm, ref := mcpwire.Read(req); ref == nil {
		cursor, hasCursor = str(rm.Params, "cursor")
	}
	// A collection continues only under the view that began it: another
	// client's pages (other credentials, maybe another list) never join it.
	key := client + "\x00" + cursor
	b.listMu.Lock()
	var s *session.RecordingSink
	if hasCursor {
		if l := b.waiting[key]; len(l) > 0 {
			s, b.waiting[key] = l[0], l[1:]
			if len(b.waiting[key]) == 0 {
				delete(b.waiting, key)
			}
		}
	}
	if s == nil {
		s = session.NewRecordingSink(b.rec, b.p.cfg.CaptureID, b.p.cfg.SnapshotLimits)
		b.startedLocked(s)
	}
	b.listMu.Unlock()
	b.staleIfChanged(s) // a list_changed since the collection began: it is stale
	if err := s.ListPage(req, resp, isErr); err != nil {
		return err
	}
	next, more := "", false
	if !isErr {
		next, more = str(m.Result, "nextCursor")
	}
	if !more {
		// recorded already when finished; else incomplete now. What this
		// client's calls bind from now on.
		b.forget(s)
		if err := s.Finish(); err != nil {
			return err
		}
		b.setListed(client, listed{snapshot: s.Bind().Snapshot, current: s.SnapshotCurrent()})
		return nil
	}
	b.listMu.Lock()
	defer b.listMu.Unlock()
	if b.waiting == nil { // sealing
		return s.Finish()
	}
	nk := client + "\x00" + next
	b.waiting[nk] = append(b.waiting[nk], s)
	return nil
}
