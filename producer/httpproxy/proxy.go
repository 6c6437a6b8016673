// Package httpproxy is tracectl's Streamable HTTP recording proxy: a
// reverse proxy in front of one remote MCP server that commits what passes
// through it with the same gate (mcpwire.Read) and the same recorder
// (producer.Recorder, session.RecordingSink) as the stdio proxy, plus the
// HTTP facts (spec/http.md).
//
// A tools/call attempt is durable before its POST goes upstream; a
// response is durable before its JSON body, or the SSE event carrying it,
// is delivered. An upstream failure is a transport failure or an unknown
// outcome, never evidence that the tool did not run.
package httpproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// Bundle kinds passed to Config.Open.
const (
	kindSession   = "session"   // one 2025-11-25 client session
	kindStateless = "stateless" // a rotation period of sessionless traffic
)

// Timer is the proxy's view of a timer, so tests fire it by hand.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration)
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// Config configures a Proxy.
type Config struct {
	// Upstream is the server's endpoint; every request is forwarded to it.
	Upstream *url.URL
	// Transport reaches the upstream (nil: a clone of
	// http.DefaultTransport, which verifies TLS against the system roots).
	Transport http.RoundTripper
	// Open creates a bundle's recorder (opened with FramesCommitted);
	// Seal seals (and signs) it.
	Open func(kind string) (*producer.Recorder, error)
	Seal func(*producer.Recorder) error
	// Sealed, when set, is told each bundle sealed.
	Sealed func(dir string, err error)
	// CaptureID mints snapshot capture ids.
	CaptureID      func() (string, error)
	SnapshotLimits snapshot.Limits
	// Capture says when the proxy collects the upstream's complete
	// tools/list itself, with the call's own headers, before recording a
	// tools/call ("" or "auto": when that client has no complete snapshot
	// current; "always"; "never": bind what the client listed, if
	// anything). Stateless clients are told apart by their view of the
	// server: the query and every request header that is not per-request
	// (session, credentials, tenant headers), never by connection.
	Capture string
	// CaptureTimeout bounds the wait for each page of that collection
	// (0: 30 s).
	CaptureTimeout time.Duration
	// RotateEvery and RotateCalls rotate the stateless bundle after that
	// long or that many tools/call attempts (0: never).
	RotateEvery time.Duration
	RotateCalls int64
	// CallTimeout records a timeout (an unknown outcome) when a tools/call
	// has no response within it; a late response is still recorded.
	CallTimeout time.Duration
	// StreamIdle abandons an upstream response stream silent this long: the
	// calls waiting on it get a timeout (unknown), and the client's
	// response ends (0: Defaults().StreamIdle, 5 minutes).
	StreamIdle time.Duration
	// SessionIdle retires a session bundle no exchange has used for this
	// long (an open GET stream is an exchange): it is sealed, and later
	// requests with its session id record into the stateless bundle, as
	// for any session this proxy did not see begin (0: Defaults().SessionIdle, 10 minutes;
	// negative: never).
	SessionIdle time.Duration
	// NewTimer makes timers (nil: time.NewTimer).
	NewTimer func(time.Duration) Timer
	// AfterFunc schedules the proxy's own housekeeping: rotation on time
	// and session expiry (nil: time.AfterFunc).
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Clock is the time (nil: time.Now).
	Clock func() time.Time
	// AllowedHosts are the Host names accepted besides the address a
	// connection reached and the loopback names on its port: HOST (any
	// port) or HOST:PORT. Any other Host is refused (403, recorded).
	AllowedHosts []string
	// AllowedOrigins are the Origin values accepted (scheme://host[:port]);
	// a request with any other Origin, "null" included, is refused. A
	// request without Origin (not from a browser) passes.
	AllowedOrigins []string
	// MaxInflightBytes bounds the request bodies held in memory at once
	// (0: Defaults(), 256 MiB); a request past it is answered 503 with
	// Retry-After and recorded.
	MaxInflightBytes int64
	// BodyTimeout bounds how long a request body may take to arrive (0:
	// Defaults(), 1 minute; negative: no bound): a slower one is answered
	// 408 and recorded, never forwarded.
	BodyTimeout time.Duration
	// MaxSessions bounds the session bundles open at once (0:
	// Defaults(), 256): a new session past it seals the least recently
	// used one (an idle one first).
	MaxSessions int
	// Redact are the rules a recorded URL path segment is scanned with
	// (nil: redact.Default()); RedactPaths are the operator's expressions
	// for path segments to redact besides (spec/http.md, "Secrets in
	// headers and URLs").
	Redact      *redact.Rules
	RedactPaths []*regexp.Regexp
	// UnsafeRecordInClear records Mcp-Param-* values and URL paths as
	// received, secrets included (an operator who retains payloads
	// unredacted). Otherwise a param value is recorded by a salted digest
	// whose salt is not kept, and a path with its credential-like segments
	// redacted.
	UnsafeRecordInClear bool
	// Entropy salts the digests of Mcp-Param-* values (nil:
	// crypto/rand.Reader).
	Entropy io.Reader
	// Failed, when set, is told an error the proxy answered a client for
	// without its text (a bundle that could not be opened: the text may
	// name a file system path, which a client is never shown).
	Failed func(error)
}

// Defaults is the configuration's bounds as New fills them in when they
// are zero: StreamIdle, SessionIdle, MaxInflightBytes, MaxSessions and
// BodyTimeout.
func Defaults() Config {
	return Config{StreamIdle: defaultStreamIdle, SessionIdle: defaultSessionIdle, MaxInflightBytes: defaultMaxInflightBytes, MaxSessions: defaultMaxSessions, BodyTimeout: defaultBodyTimeout}
}

// defaultStreamIdle is how long an upstream stream may stay silent.
const defaultStreamIdle = 5 * time.Minute

// defaultSessionIdle is how long a session bundle stays open unused:
// minutes, since clients often never DELETE their sessions (the MCP
// Inspector does not) and each open bundle holds descriptors.
const defaultSessionIdle = 10 * time.Minute

// Proxy is an http.Handler.
type Proxy struct {
	cfg       Config
	access    access
	budget    budget
	serverURL string
	decls     bindings
	exch      atomic.Int64

	base       context.Context // upstream requests; cancelled when a shutdown's grace ends
	baseCancel context.CancelFunc
	closing    chan struct{} // closed when a shutdown starts: streams without a call end

	onTimeout func() // tests: told after a call timeout is recorded
	onRead    func() // tests: told after each read of a request body

	mu        sync.Mutex
	closed    bool
	stateless *bundle
	sessions  map[string]*bundle
	live      map[*bundle]bool
	errs      []error
}

// New returns a proxy. Close it to seal every bundle.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == nil || cfg.Open == nil || cfg.Seal == nil || cfg.CaptureID == nil {
		return nil, errors.New("httpproxy: Upstream, Open, Seal and CaptureID are required")
	}
	switch cfg.Capture {
	case "":
		cfg.Capture = session.CaptureAuto
	case session.CaptureAuto, session.CaptureAlways, session.CaptureNever:
	default:
		return nil, fmt.Errorf("httpproxy: Capture %q: want auto, always or never", cfg.Capture)
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if cfg.NewTimer == nil {
		cfg.NewTimer = func(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.StreamIdle <= 0 {
		cfg.StreamIdle = defaultStreamIdle
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = defaultSessionIdle
	}
	if cfg.Entropy == nil {
		cfg.Entropy = rand.Reader
	}
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = defaultMaxInflightBytes
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = defaultMaxSessions
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = defaultBodyTimeout
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	srv, err := producer.HTTPServer(cfg.Upstream, "")
	if err != nil {
		return nil, err
	}
	acc, err := newAccess(cfg.AllowedHosts, cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	p := &Proxy{cfg: cfg, access: acc, budget: budget{max: cfg.MaxInflightBytes}, base: base, baseCancel: cancel, closing: make(chan struct{}),
		sessions: map[string]*bundle{}, live: map[*bundle]bool{}}
	p.serverURL = p.redactURL(srv.URL)
	return p, nil
}

func (p *Proxy) sealed(b *bundle, err error) {
	p.mu.Lock()
	delete(p.live, b)
	if err != nil {
		p.errs = append(p.errs, err)
	}
	p.mu.Unlock()
	if p.cfg.Sealed != nil {
		p.cfg.Sealed(b.rec.Dir(), err)
	}
}

// Close is Shutdown without a deadline: calls in flight may finish (each
// stream is still bounded by StreamIdle).
func (p *Proxy) Close() error { return p.Shutdown(context.Background()) }

// Shutdown stops admitting exchanges, ends streams that carry no call
// (the 2025-11-25 GET streams), lets calls in flight finish until ctx is
// done, then closes their upstream requests (a transport failure: the
// outcome is unknown), and seals every bundle.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
	}
	var all []*bundle
	for b := range p.live {
		all = append(all, b)
	}
	p.mu.Unlock()
	for _, b := range all {
		b.retire()
	}
	for _, b := range all {
		select {
		case <-b.done:
		case <-ctx.Done():
			p.baseCancel()
			<-b.done
		}
	}
	p.baseCancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

var errClosed = errors.New("the proxy is shutting down")

// bundleFor picks (and acquires) the bundle an exchange records into.
// fresh, when set, is the kind of a new bundle of one client to open
// (kindSession for an initialize, kindSSE for a deprecated-transport
// stream); otherwise the exchange records into its session's bundle or the
// stateless one.
func (p *Proxy) bundleFor(sid string, fresh string) (*bundle, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errClosed
		}
		var b *bundle
		if sid != "" {
			b = p.sessions[sid]
		}
		switch {
		case b != nil:
		case fresh != "":
			// A new client session: its own bundle, keyed by the session id
			// the server assigns in its answer. At the cap, the least
			// recently used session is sealed first: a new client is
			// served, never turned away by sessions others abandoned.
			if v := p.sessionVictim(); v != nil {
				p.mu.Unlock()
				v.retire()
				continue
			}
		default:
			// Sessionless traffic, and sessions this proxy did not see begin
			// (it restarted): the shared bundle. A client cannot make the
			// proxy open bundles by inventing session ids.
			b = p.stateless
			if b != nil && p.rotateDue(b) {
				p.stateless = nil
				p.mu.Unlock()
				b.retire()
				continue
			}
		}
		if b == nil {
			kind := kindStateless
			if fresh != "" {
				kind = fresh
			}
			nb, err := p.newBundle(kind)
			if err != nil {
				p.mu.Unlock()
				return nil, err
			}
			b = nb
			p.live[b] = true
			if fresh == "" {
				p.stateless = b
				if d := p.cfg.RotateEvery; d > 0 {
					// Rotated on time even when no request comes to do it.
					p.cfg.AfterFunc(d, func() { p.rotate(b) })
				}
			}
		}
		ok := b.acquire()
		p.mu.Unlock()
		if ok {
			return b, nil
		}
	}
}

// sessionVictim, with p.mu held, is the session bundle to seal before
// another opens, when MaxSessions are open: the least recently used idle
// one, else the least recently used (its calls in flight finish; its
// streams without a call end). It is no longer reachable by its session
// id once returned.
func (p *Proxy) sessionVictim() *bundle {
	open := 0
	var idle, any *bundle
	var idleAt, anyAt time.Time
	for b := range p.live {
		if b.demux {
			continue
		}
		b.mu.Lock()
		retiring, refs, used := b.retiring, b.refs, b.lastUsed
		b.mu.Unlock()
		if retiring {
			continue
		}
		open++
		if b.session == "" {
			continue // its initialize is in flight
		}
		if refs == 0 && (idle == nil || used.Before(idleAt)) {
			idle, idleAt = b, used
		}
		if any == nil || used.Before(anyAt) {
			any, anyAt = b, used
		}
	}
	if open < p.cfg.MaxSessions {
		return nil
	}
	v := idle
	if v == nil {
		v = any
	}
	if v != nil && p.sessions[v.session] == v {
		delete(p.sessions, v.session)
	}
	return v
}

// rotate retires b if it is still the stateless bundle.
func (p *Proxy) rotate(b *bundle) {
	p.mu.Lock()
	cur := p.stateless == b
	if cur {
		p.stateless = nil
	}
	p.mu.Unlock()
	if cur {
		b.retire()
	}
}

func (p *Proxy) rotateDue(b *bundle) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return p.cfg.RotateCalls > 0 && b.calls >= p.cfg.RotateCalls ||
		p.cfg.RotateEvery > 0 && p.cfg.Clock().Sub(b.opened) >= p.cfg.RotateEvery
}

// adopt registers an initialize exchange's bundle under the session id the
// server assigned.
func (p *Proxy) adopt(b *bundle, sid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.session == "" && sid != "" && p.sessions[sid] == nil {
		b.session = sid
		p.sessions[sid] = b
	}
}

// expire retires b, a session bundle, if no exchange has used it for
// SessionIdle; otherwise, while it is unused, it checks again when that
// much time will have passed since its last use.
func (p *Proxy) expire(b *bundle) {
	b.mu.Lock()
	b.expiry = nil
	idle := p.cfg.Clock().Sub(b.lastUsed)
	due := b.refs == 0 && !b.retiring && idle >= p.cfg.SessionIdle
	if b.refs == 0 && !b.retiring && !due {
		b.expiry = p.cfg.AfterFunc(p.cfg.SessionIdle-idle, func() { p.expire(b) })
	}
	sid := b.session
	b.mu.Unlock()
	if !due {
		return
	}
	p.mu.Lock()
	if p.sessions[sid] == b {
		delete(p.sessions, sid)
	}
	p.mu.Unlock()
	b.retire()
}

func (p *Proxy) endSession(sid string) {
	p.mu.Lock()
	b := p.sessions[sid]
	delete(p.sessions, sid)
	p.mu.Unlock()
	if b != nil {
		b.retire()
	}
}

// exchange is one HTTP request through the proxy.
type exchange struct {
	p      *Proxy
	b      *bundle
	id     int64
	w      http.ResponseWriter
	r      *http.Request
	body   []byte
	msg    *mcpwire.Message
	call   *call
	list   []byte           // a tools/list request line, for snapshot collection
	bind   *session.Binding // the snapshot a tools/call binds (capture.go); nil: the bundle's latest
	what   string           // the request's method, for its response
	gone   bool             // the client went away: record, do not deliver
	failed error            // an audit failure: stop delivering
	// answered: the exchange's request has its answer (delivered, or the
	// proxy's own); a later frame a client could match to it is refused.
	answered     bool
	refusedIndex int64                // the refused server frame that made the proxy answer
	refusedRule  mcpwire.Rule         // and its rule
	denied       *transcript.Decision // the policy denied the exchange's call: the proxy answers it
	durable      func() error         // the attempt line's durable wait: forward only after it returned nil
	approving    *pendingApproval     // an approve rule matched the exchange's call: asked once the frame order is released (approve.go)

	// The deprecated HTTP+SSE transport (legacy.go): the session of a
	// POST or of the stream (stream), the POST's writer, whether the
	// upstream accepted the POST (its request stays open), and the
	// upstream's URL and answer for a stream that may turn out to be one.
	legacy   *legacy
	stream   bool
	lw       *legacyWriter
	accepted bool
	upURL    *url.URL
	upResp   *http.Response
	charge   *bodyCharge // the body's share of the in-flight budget, held while its request is open on the stream
}

// Limits.
const maxBody = mcpwire.MaxFrameBytes

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// who: judged on the headers as received (a Connection header naming
	// Origin cannot hide it)
	rule, detail := p.access.check(r)
	// The hop-by-hop headers end here: the header gate, the record and
	// the upstream all see the same headers (a Connection header naming
	// Mcp-Name cannot show the gate a header the upstream never gets),
	// and Proxy-Authorization is never recorded.
	r.Header = r.Header.Clone()
	dropHop(r.Header)
	if rule != "" {
		p.refusePeer(w, r, rule, detail)
		return
	}
	// read
	sid := r.Header.Get("Mcp-Session-Id")
	var lb *bundle // the deprecated transport's session a POST names (legacy.go)
	if tok, named := legacyToken(r); named {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "tracectl: an HTTP+SSE endpoint takes POSTs only", http.StatusMethodNotAllowed)
			return
		}
		if lb = p.legacyBundle(tok); lb == nil {
			p.refuseUnknownLegacy(w, r)
			return
		}
	}
	line, release, ok := p.readBody(w, r, sid)
	charge := &bodyCharge{release: release}
	defer charge.done()
	if !ok {
		if lb != nil {
			lb.release()
		}
		return
	}
	// gate
	var g gated
	var body []byte
	if line != nil {
		body = line[:len(line)-1]
		g.line = line
		g.msg, g.refusal = mcpwire.Read(line)
	}
	initialize := g.msg != nil && g.msg.Kind == mcpwire.KindRequest && g.msg.Method == mcpwire.MethodInitialize && sid == ""
	var b *bundle
	var err error
	if lb != nil {
		b = lb
	} else {
		fresh := ""
		if initialize {
			fresh = kindSession
		}
		if b, err = p.bundleFor(sid, fresh); err != nil {
			p.unavailable(w, idOf(g.msg), err)
			return
		}
	}
	defer b.release()
	if initialize {
		defer func() {
			if b.session == "" {
				b.retire() // no session came of it: a bundle of one handshake
			}
		}()
	}
	x := &exchange{p: p, b: b, id: p.exch.Add(1), w: w, r: r, body: body, msg: g.msg, charge: charge}
	if b.legacy != nil {
		// The proxy's own answers go on the session's stream (legacy.go).
		x.legacy = b.legacy
		x.lw = &legacyWriter{w: w, l: b.legacy, header: http.Header{}}
		x.w = x.lw
		defer x.lw.finish()
		defer x.legacyDone()
	}
	// a snapshot for the call to bind (capture.go), before it is recorded
	// (a call the header gate refuses is never forwarded: nothing to bind)
	if g.msg != nil && g.msg.Kind == mcpwire.KindRequest && g.msg.IsToolCall() && checkHeaders(r.Header, g.msg, &p.decls) == nil {
		if x.bind, err = x.bindFor(g.msg); err != nil {
			x.auditFail(err)
			return
		}
	}
	// commit
	if err := x.upstreamLine(nil); err != nil {
		x.auditFail(err)
		return
	}
	reply, err := x.commit(g)
	if err != nil {
		x.auditFail(err)
		return
	}
	if reply != nil {
		reply() // the proxy's own answer: nothing is forwarded
		return
	}
	// forward once the attempt is durable, and reply with what the
	// upstream answered
	if x.call != nil && x.legacy == nil {
		defer b.untrack(x.call)
	}
	if x.durable != nil {
		if err := x.durable(); err != nil {
			x.auditFail(err)
			return
		}
	}
	if x.approving != nil && !x.approve() {
		return // denied (answered) or an audit failure
	}
	if x.legacy != nil && g.msg != nil && g.msg.Kind == mcpwire.KindRequest && !x.legacy.register(x) {
		x.noAnswer("not forwarded: a request with this id is open in the HTTP+SSE session already, or too many are")
		writeRPCError(x.w, http.StatusOK, x.answerID(x.msg), codeRefused, "tracectl: not forwarded: a request with this id is open in the HTTP+SSE session already, or too many are")
		return
	}
	if x.call != nil && x.legacy == nil && p.cfg.CallTimeout > 0 {
		defer x.watchCall()()
	}
	x.forward(body)
	if r.Method == http.MethodDelete && sid != "" {
		p.endSession(sid)
	}
}

// openTable is the requests a client could take the proxy's own answer
// for: the HTTP+SSE session's open requests, or the calls in flight in
// the bundle.
func (x *exchange) openTable() session.Open {
	if x.legacy != nil {
		return legacyOpen{x}
	}
	return bundleOpen{x.b}
}

// answerID is the id the proxy's own answer to request m goes under: m's,
// unless a client could match it to another request still open (it would
// take the answer for that one's), then null (session.RefusalID).
func (x *exchange) answerID(m *mcpwire.Message) string {
	id := idOf(m)
	if id != "null" && m.ID.Valid() && x.openTable().Matches([]string{mcpwire.MatchKey(m.ID)}) {
		return "null"
	}
	return id
}

// bundleOpen is a bundle's calls in flight as session.Open, for the id of
// the proxy's own answers (only Matches is asked).
type bundleOpen struct{ b *bundle }

func (o bundleOpen) Exact(string) bool           { return false }
func (o bundleOpen) Matches(keys []string) bool  { return o.b.openMatches(keys) }
func (o bundleOpen) Settled([]string) bool       { return false }
func (o bundleOpen) AnsweredByProxy(string) bool { return false }

// gated is a request body as the gate read it.
type gated struct {
	line    []byte // the body with an LF: the frame the transcript commits to
	msg     *mcpwire.Message
	refusal *mcpwire.Refusal
}

// unavailable answers a request no bundle could take: 503, without the
// error's text (it may name a path); the operator is told it (Failed).
func (p *Proxy) unavailable(w http.ResponseWriter, id string, err error) {
	if errors.Is(err, errClosed) {
		writeRPCError(w, http.StatusServiceUnavailable, id, codeAuditUnavailable, "tracectl: not forwarded: "+errClosed.Error())
		return
	}
	if p.cfg.Failed != nil {
		p.cfg.Failed(err)
	}
	writeRPCError(w, http.StatusServiceUnavailable, id, codeAuditUnavailable, "tracectl: not forwarded: "+session.ErrAuditUnavailable.Error()+": the recorder could not open a bundle")
}

// commit records the request before anything reaches the upstream: its
// HTTP facts and its frame (refused, an attempt, a cancellation, or a plain
// frame). reply, when set, is the proxy's own answer in the upstream's
// place (a frame the gate or the header gate refused); it is written once
// the client frame order is released.
func (x *exchange) commit(g gated) (reply func(), err error) {
	b, r, w, m := x.b, x.r, x.w, g.msg
	if x.body == nil {
		return nil, b.http(x.requestLine(nil))
	}
	err = b.clientFrame(func(index int64) error {
		if err := b.http(x.requestLine(&index)); err != nil {
			return err
		}
		if ref := g.refusal; ref != nil {
			if err := b.sink.Frame(session.FrameObs{Line: g.line, Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameRefused, Refusal: ref}); err != nil {
				return err
			}
			reply = func() {
				text := "tracectl: not forwarded: frame refused by the recorder's gate (" + string(ref.Rule) + "): " + ref.Detail
				id, answer := session.RefusalID(ref, g.line, x.openTable())
				if !answer {
					// The client's answer to a server request: no
					// JSON-RPC message answers it, the POST fails.
					http.Error(w, text, http.StatusBadRequest)
					return
				}
				writeRPCError(w, http.StatusBadRequest, id, codeRefused, text)
			}
			return nil
		}
		if hr := checkHeaders(r.Header, m, &x.p.decls); hr != nil {
			i := index
			if err := b.http(transcript.HTTPEvent{Event: transcript.HTTPRefused, Exchange: x.id, Frame: &i, Rule: hr.rule, Detail: hr.detail}); err != nil {
				return err
			}
			if err := b.sink.Frame(session.FrameObs{Line: g.line, Msg: m, Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameRefused}); err != nil {
				return err
			}
			reply = func() {
				writeRPCError(w, http.StatusBadRequest, x.answerID(m), codeRefused, "tracectl: not forwarded: the request's headers are refused by the recorder's gate ("+hr.rule+"): "+hr.detail)
			}
			return nil
		}
		if err := x.commitFrame(g.line, m, index); err != nil {
			return err
		}
		if d := x.denied; d != nil {
			reply = func() { writeDenied(w, m, d) }
		}
		return nil
	})
	return reply, err
}

// commitFrame commits a client frame the gate read, which is then
// forwarded: a tools/call as an attempt (durable first), a cancellation
// of the one call in flight under its id, any other frame as a frame.
func (x *exchange) commitFrame(line []byte, m *mcpwire.Message, index int64) error {
	b := x.b
	switch {
	case m.IsToolCall():
		decide, decision := b.sink.Decider(m)
		// Written in client frame order; made durable after the order is
		// released (x.durable, before forwarding), so that the calls in
		// flight share fsyncs rather than queueing one per call.
		a, wait, err := b.sink.AttemptWritten(session.Call{Line: line, Terminator: mcpwire.TermLF, Msg: m, Index: index, Decide: decide, Bind: x.bind})
		if err != nil {
			return err
		}
		if b.sink.Enforced(decision) {
			// Denied by the policy or lock: recorded, answered by the
			// proxy, never forwarded (spec/policy.md); the denial's own
			// wait covers the attempt line before it.
			x.denied = decision
			return b.sink.Denied(a)
		}
		x.durable = wait
		if session.Approving(decision) {
			x.approving = &pendingApproval{ref: a, line: line, decision: decision}
		}
		if m.Kind == mcpwire.KindRequest {
			x.call = &call{ref: a, key: x.callKey(mcpwire.Key(m.ID)), match: mcpwire.MatchKey(m.ID), token: progressToken(m.Params), approving: x.approving != nil}
			b.track(x.call)
		}
		return nil
	case m.Kind == mcpwire.KindNotification && m.Method == mcpwire.NotifyCancelled:
		rid, ok := m.Params.Get("requestId")
		var c *call
		if ok {
			c = b.onlyInflight(x.callKey(mcpwire.Key(rid)))
		}
		if c != nil {
			c.mu.Lock()
			// A call awaiting approval is not in flight yet: the
			// cancellation is a plain frame, and leaves the call's own
			// cancellation, once forwarded, to be recorded.
			dup := c.canceled || c.settled || c.approving
			c.canceled = c.canceled || !c.approving
			c.mu.Unlock()
			if !dup {
				return b.sink.CancelSent(c.ref, session.NotificationObs{Line: line, Msg: m, Index: index})
			}
		}
	case m.Kind == mcpwire.KindRequest:
		x.what = m.Method
		if m.Method == mcpwire.MethodToolsList {
			x.list = line
		}
	}
	return b.sink.Frame(session.FrameObs{Line: line, Msg: m, Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameForwarded})
}

// callKey names a call in flight by its client and its JSON-RPC id: a
// cancellation names only a call of the same client. A client is its
// session (the Mcp-Session-Id it sends, whether or not this proxy saw the
// session begin); sessionless traffic has no identity beyond its
// connection, so it is the connection the request came on (its local and
// remote addresses: unique while the connection is open, and a call in
// flight holds its connection open, since a client that closes it closes
// the call). JSON-RPC ids are per client: every client starts at 1.
// A deprecated-transport session has one client, whatever connection
// each POST comes on.
func (x *exchange) callKey(id string) string {
	if x.legacy != nil {
		return "sse " + id
	}
	return callKey(x.r, id)
}

func callKey(r *http.Request, id string) string {
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		return "session " + canon.SHA256([]byte(sid)) + " " + id
	}
	return "connection " + connAddrs(r) + " " + id
}

// connAddrs is the connection a request came on: its local and remote
// addresses.
func connAddrs(r *http.Request) string {
	local := ""
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
		local = a.String()
	}
	return local + " " + r.RemoteAddr
}

// watchCall records a timeout (an unknown outcome) when the call has no
// response within CallTimeout; the exchange goes on waiting, and a
// response that comes later is recorded as late. It returns the stop.
func (x *exchange) watchCall() (stop func()) {
	t := x.p.cfg.NewTimer(x.p.cfg.CallTimeout)
	done := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			c := x.call
			c.mu.Lock()
			if !c.settled && !c.timedOut {
				c.timedOut = true
				// A failure here fails the journal, which every later
				// record of this exchange reports.
				_ = x.b.sink.Timeout(c.ref)
			}
			c.mu.Unlock()
			if x.p.onTimeout != nil {
				x.p.onTimeout()
			}
		case <-done:
		}
	}()
	return func() { close(done); t.Stop() }
}

// tooLarge commits a request body over the gate's limit by its digest and
// length (hashing the rest of it), refused, and answers 413.
func (p *Proxy) tooLarge(w http.ResponseWriter, r *http.Request, sid string, head []byte) {
	h := sha256.New()
	h.Write(head)
	n, err := io.Copy(h, r.Body)
	if err != nil {
		http.Error(w, "tracectl: reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	b, err := p.bundleFor(sid, "")
	if err != nil {
		p.unavailable(w, "null", err)
		return
	}
	defer b.release()
	x := &exchange{p: p, b: b, id: p.exch.Add(1), w: w, r: r}
	length := int64(len(head)) + n
	err = x.upstreamLine(nil)
	if err == nil {
		err = b.clientFrame(func(index int64) error {
			if err := b.http(x.requestLine(&index)); err != nil {
				return err
			}
			return b.sink.Frame(session.FrameObs{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Length: length, Terminator: mcpwire.TermLF,
				Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameRefused})
		})
	}
	if err != nil {
		x.auditFail(err)
		return
	}
	writeRPCError(w, http.StatusRequestEntityTooLarge, "null", codeRefused, "tracectl: not forwarded: frame refused by the recorder's gate (frame_too_large): "+strconv.FormatInt(length, 10)+" bytes")
}

func (x *exchange) auditFail(err error) {
	if x.call != nil {
		x.settle(func() error { return x.b.sink.TransportFailure(x.call.ref, "the recorder failed: "+err.Error()) })
	}
	writeRPCError(x.w, http.StatusServiceUnavailable, idOf(x.msg), codeAuditUnavailable, "tracectl: not forwarded: "+session.ErrAuditUnavailable.Error())
}

// requestLine is the HTTP facts of the client's request.
func (x *exchange) requestLine(frame *int64) transcript.HTTPEvent {
	ev := transcript.HTTPEvent{Event: transcript.HTTPRequest, Exchange: x.id, Method: x.r.Method, Path: boundedPath(x.p.redactPath(x.r.URL.EscapedPath())), Frame: frame}
	ev.ContentType = boundedText(x.r.Header.Get("Content-Type"))
	ev.Headers, ev.HeaderDigests, ev.Session, ev.Credentials = x.p.headerFacts(x.r.Header)
	ev.Connection = x.b.connection(x.r)
	return ev
}

// headerFacts splits a request's headers into what is recorded: the MCP
// headers by value (or digest), Mcp-Param-* values by salted digest
// (paramValue), the session id by digest, credential headers by name only.
// Nothing else is recorded.
func (p *Proxy) headerFacts(h http.Header) (vals, digests map[string]string, sid string, creds []string) {
	for name, vv := range h {
		n := strings.ToLower(name)
		switch {
		case transcript.IsCredentialHeader(n):
			creds = append(creds, n)
			continue
		case n == hSessionID:
			sid = canon.SHA256([]byte(strings.Join(vv, ",")))
			continue
		case n == hProtocolVersion || n == hMethod || n == hName || n == hLastEventID || strings.HasPrefix(n, hParamPrefix):
		default:
			continue
		}
		if len(n) > transcript.MaxReportedBytes {
			continue
		}
		v := strings.Join(vv, ", ")
		if strings.HasPrefix(n, hParamPrefix) && !p.cfg.UnsafeRecordInClear {
			if d, ok := p.paramValue(v); ok {
				if digests == nil {
					digests = map[string]string{}
				}
				digests[n] = d
			}
			continue
		}
		if len(v) > transcript.MaxHeaderValueBytes || !validText(v) {
			if digests == nil {
				digests = map[string]string{}
			}
			digests[n] = canon.SHA256([]byte(v))
			continue
		}
		if vals == nil {
			vals = map[string]string{}
		}
		vals[n] = v
	}
	sort.Strings(creds)
	creds = compact(creds)
	return
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if (i == 0 || s[i-1] != v) && len(v) <= transcript.MaxReportedBytes {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func validText(s string) bool {
	b, err := canon.Marshal(s)
	return err == nil && len(b) > 0
}

func boundedPath(p string) string {
	if len(p) > transcript.MaxPathBytes {
		p = p[:transcript.MaxPathBytes]
	}
	if !validText(p) {
		return ""
	}
	return p
}

func boundedText(s string) string {
	if len(s) > transcript.MaxReportedBytes || !validText(s) {
		return ""
	}
	return s
}

// upstreamLine records the server's identity in the bundle the first time,
// and again whenever a TLS connection presents another key.
func (x *exchange) upstreamLine(resp *http.Response) error {
	b := x.b
	ev := transcript.HTTPEvent{Event: transcript.HTTPUpstream, Exchange: x.id, URL: x.p.serverURL}
	b.mu.Lock()
	need := !b.upstream
	if resp != nil && resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		leaf := resp.TLS.PeerCertificates[0]
		sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
		spki := "sha256:" + hex.EncodeToString(sum[:])
		chain := int64(0)
		if len(resp.TLS.VerifiedChains) > 0 {
			chain = int64(len(resp.TLS.VerifiedChains[0]))
		}
		need = spki != b.lastSPKI && len(resp.TLS.VerifiedChains) > 0
		b.lastSPKI = spki
		ev.TLS = &transcript.HTTPTLS{Version: tlsVersion(resp.TLS.Version), SPKISHA256: spki, Chain: transcript.ChainVerified, ChainLen: chain}
	} else if resp != nil {
		need = false
	}
	b.upstream = true
	b.mu.Unlock()
	if !need {
		return nil
	}
	return b.http(ev)
}

func tlsVersion(v uint16) string {
	switch v {
	case 0x0304:
		return "TLS 1.3"
	case 0x0303:
		return "TLS 1.2"
	}
	return "TLS 0x" + strconv.FormatUint(uint64(v), 16)
}

// hop-by-hop headers are not forwarded in either direction (RFC 9110
// section 7.6.1, and httputil.ReverseProxy's list): Proxy-Authorization
// is a credential for the hop to the proxy, never the upstream's.
var hop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// dropHop removes hop-by-hop headers, those the Connection header names
// included.
func dropHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, n := range hop {
		h.Del(n)
	}
}

// forward sends the request upstream and relays the answer, committing
// every message in it before it is delivered.
func (x *exchange) forward(body []byte) {
	ctx, cancel := context.WithCancel(x.p.base)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	up := *x.p.cfg.Upstream
	if x.r.URL.RawQuery != "" && up.RawQuery == "" {
		up.RawQuery = x.r.URL.RawQuery
	}
	if x.legacy != nil {
		up = *x.legacy.endpoint // the upstream's, which the client never saw
	}
	x.upURL = &up
	req, err := http.NewRequestWithContext(ctx, x.r.Method, up.String(), rd)
	if err != nil {
		x.upstreamFailed("build the upstream request: "+err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = x.r.Header.Clone()
	dropHop(req.Header)
	// The proxy reads what it commits: no content coding (Go's transport
	// asks for gzip itself and decodes it transparently).
	req.Header.Del("Accept-Encoding")
	req.Host = up.Host
	req.ContentLength = int64(len(body))
	// Waiting for the response headers is bounded like a silent stream;
	// a client that closes its request meanwhile closes the upstream one.
	clientGone := x.r.Context().Done()
	var why atomic.Value
	wait := x.p.cfg.NewTimer(x.p.cfg.StreamIdle)
	stop := make(chan struct{})
	go func() {
		select {
		case <-wait.C():
			why.Store("no response headers from the upstream within " + x.p.cfg.StreamIdle.String() + "; abandoned")
			cancel()
		case <-clientGone:
			why.Store("the client closed the request before the upstream answered; the upstream request was closed")
			cancel()
		case <-stop:
		}
	}()
	resp, err := x.p.cfg.Transport.RoundTrip(req)
	close(stop)
	wait.Stop()
	if err != nil {
		// Never the URL (its path may hold a key): the cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		detail := "upstream request failed: " + err.Error()
		if w, ok := why.Load().(string); ok {
			detail = w
		} else if x.p.base.Err() != nil {
			detail = "the proxy shut down before the upstream answered; the upstream request was closed"
		}
		x.upstreamFailed(detail, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if err := x.upstreamLine(resp); err != nil {
		x.auditFail(err)
		return
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		x.upstreamFailed("the upstream answered with content coding "+strconv.Quote(boundedText(ce))+", which the proxy cannot read to commit", http.StatusBadGateway)
		return
	}
	rl := transcript.HTTPEvent{Event: transcript.HTTPResponse, Exchange: x.id, Status: int64(resp.StatusCode), ContentType: boundedText(ct)}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		rl.Session = canon.SHA256([]byte(sid))
		if x.msg != nil && x.msg.Method == mcpwire.MethodInitialize {
			x.p.adopt(x.b, sid)
		}
	}
	if err := x.b.http(rl); err != nil {
		x.auditFail(err)
		return
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// A client that follows a redirect sends the request to the
		// Location itself, around the recorder: never relayed (neither
		// the status nor the Location), whatever the method.
		x.upstreamFailed("the upstream answered HTTP "+strconv.Itoa(resp.StatusCode)+" (a redirect), which is not followed and not relayed: a client following it would reach a server around the recorder", http.StatusBadGateway)
		return
	}
	if x.legacy != nil {
		x.accepted = resp.StatusCode >= 200 && resp.StatusCode < 300
		x.forwardLegacy(resp)
		return
	}
	x.upResp = resp
	hdr := x.w.Header()
	for k, vv := range resp.Header {
		hdr[k] = append([]string(nil), vv...)
	}
	dropHop(hdr)
	switch {
	case mt == "text/event-stream" && resp.StatusCode == http.StatusOK:
		hdr.Del("Content-Length")
		x.w.WriteHeader(resp.StatusCode)
		flush(x.w)
		x.relaySSE(ctx, cancel, resp.Body, clientGone)
	default:
		x.relayBody(cancel, resp, mt, ct)
	}
}

// relayBody reads a whole upstream body (not an event stream), commits
// the message in it, and delivers it as read, or the proxy's own answer
// where mediation refuses it.
func (x *exchange) relayBody(cancel context.CancelFunc, resp *http.Response, mt, ct string) {
	hdr := x.w.Header()
	// A body that stalls is abandoned like a silent stream.
	var stalled atomic.Bool
	bodyWait := x.p.cfg.NewTimer(x.p.cfg.StreamIdle)
	read := make(chan struct{})
	go func() {
		select {
		case <-bodyWait.C():
			stalled.Store(true)
			cancel()
		case <-read:
		}
	}()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && int64(len(data)) > maxBody && resp.StatusCode == http.StatusOK && mt == "application/json" && x.call != nil {
		// The answer to this exchange's call, longer than the gate
		// holds: read on, within maxLargeBody and the in-flight budget.
		var release func()
		data, release, err = x.p.readLarge(resp.Body, data, resp.ContentLength)
		defer release()
	}
	close(read)
	bodyWait.Stop()
	if err != nil {
		detail := "reading the upstream body: " + err.Error()
		if stalled.Load() {
			detail = "the upstream's body stalled for " + x.p.cfg.StreamIdle.String() + "; abandoned"
		}
		x.upstreamFailed(detail, http.StatusBadGateway)
		return
	}
	if int64(len(data)) > maxBody && (x.call == nil || int64(len(data)) > maxLargeBody || mt != "application/json" || resp.StatusCode != http.StatusOK) {
		x.upstreamFailed("the upstream's response body is over the gate's limit; withheld", http.StatusBadGateway)
		return
	}
	ok2xx := resp.StatusCode >= 200 && resp.StatusCode < 300
	if resp.StatusCode != http.StatusOK && (mt == "text/event-stream" || json.Valid(bytes.TrimPrefix(bytes.TrimSpace(data), []byte("\xef\xbb\xbf")))) {
		x.withholdStatus(resp, ct, data)
		return
	}
	switch {
	case ok2xx && mt == "application/json" && len(bytes.TrimSpace(data)) > 0:
		// A JSON body is the request's whole answer: delivered only as
		// the gate and mediation read it; otherwise the client gets
		// the proxy's error in its place.
		d := x.message(data, nil)
		if x.failed != nil {
			x.auditFail(x.failed)
			return
		}
		if d != deliverIt {
			x.answerRefused(-1, "")
			return
		}
	case ok2xx && sniffed(ct) && mt != "application/json" && mt != "text/event-stream" && len(data) > 0 && resp.StatusCode != http.StatusAccepted:
		// Not exactly application/json: a client matching the media
		// type by substring would read it as a message the gate never
		// read.
		if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: string(mcpwire.RuleMediaType),
			Detail: "a " + strconv.Itoa(resp.StatusCode) + " body of content type " + strconv.Quote(boundedText(ct)) + ", not exactly application/json or text/event-stream"}); err != nil {
			x.auditFail(err)
			return
		}
		x.answerRefused(-1, mcpwire.RuleMediaType)
		return
	}
	x.noAnswer(fmt.Sprintf("upstream answered HTTP %d (%s) without a response to the call", resp.StatusCode, boundedText(ct)))
	hdr.Set("Content-Length", strconv.Itoa(len(data)))
	x.w.WriteHeader(resp.StatusCode)
	_, _ = x.w.Write(data)
}

// withholdStatus: a JSON (or event-stream) body on a status other than 200,
// which clients read by the status and differently from one another (the
// Go SDK and the TypeScript SDK v2 take a JSON-RPC error from a non-2xx
// body, v1 does not; the TypeScript SDK discards a 202's body, the Go SDK
// reads it): never delivered (mcpwire.RuleHTTPStatus). A non-2xx keeps its
// status and headers (an OAuth 401 still works) with a body of the proxy's
// own; a 2xx answers a request with -32093.
func (x *exchange) withholdStatus(resp *http.Response, ct string, data []byte) {
	detail := "a " + strconv.Itoa(resp.StatusCode) + " body of content type " + strconv.Quote(boundedText(ct)) + " (" + strconv.Itoa(len(data)) + " bytes), which clients read by its status, differently"
	if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: string(mcpwire.RuleHTTPStatus), Detail: detail}); err != nil {
		x.auditFail(err)
		return
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		x.answerRefused(-1, mcpwire.RuleHTTPStatus)
		return
	}
	x.noAnswer("the upstream answered HTTP " + strconv.Itoa(resp.StatusCode) + "; its body was withheld (" + string(mcpwire.RuleHTTPStatus) + ")")
	hdr := x.w.Header()
	hdr.Del("Content-Length")
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	x.w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(x.w, "tracectl: the upstream's HTTP "+strconv.Itoa(resp.StatusCode)+" body was withheld: clients read a JSON-RPC message in it differently (http_status)\n")
}

// upstreamFailed: no answer came from the upstream at all.
func (x *exchange) upstreamFailed(detail string, status int) {
	_ = x.b.http(transcript.HTTPEvent{Event: transcript.HTTPFailure, Exchange: x.id, Detail: detail})
	x.noAnswer(detail)
	if x.msg != nil && x.msg.Kind == mcpwire.KindRequest {
		writeRPCError(x.w, status, idOf(x.msg), codeTransportFailure, "tracectl: "+detail+"; the outcome is unknown")
		return
	}
	x.w.Header().Del("Content-Length")
	http.Error(x.w, "tracectl: "+detail, status)
}

// noAnswer settles a call the exchange ended without answering: a
// transport failure (the outcome is unknown: the tool may have run).
func (x *exchange) noAnswer(detail string) {
	if x.call == nil {
		return
	}
	x.settle(func() error { return x.b.sink.TransportFailure(x.call.ref, detail) })
}

// settle records a call's terminal observation once.
func (x *exchange) settle(f func() error) {
	c := x.call
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settled {
		return
	}
	c.settled = true
	if err := f(); err != nil {
		x.failed = err
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func serverInfo(v canon.Value, member string) (name, ver string) {
	if !v.Valid() {
		return "", ""
	}
	si, ok := v.Get(member)
	if !ok {
		return "", ""
	}
	name, _ = str(si, "name")
	ver, _ = str(si, "version")
	return
}

func progressToken(params canon.Value) string {
	if !params.Valid() || params.Kind() != canon.KindObject {
		return ""
	}
	meta, ok := params.Get("_meta")
	if !ok || meta.Kind() != canon.KindObject {
		return ""
	}
	if tok, ok := meta.Get(mcpwire.MetaProgressToken); ok {
		return mcpwire.Key(tok)
	}
	return ""
}

// JSON-RPC error codes the proxy answers with (spec/wrap.md's, reused).
const (
	codeAuditUnavailable = mcpwire.CodeAuditUnavailable
	codeTransportFailure = mcpwire.CodeTransportFailure
	codeResponseRefused  = mcpwire.CodeResponseRefused
	codeRefused          = mcpwire.CodeInvalidRequest
)

func idOf(m *mcpwire.Message) string {
	if m == nil || m.Kind != mcpwire.KindRequest {
		return "null"
	}
	return m.IDText()
}

func writeRPCError(w http.ResponseWriter, status int, id string, code int, msg string) {
	if id == "" {
		id = "null"
	}
	w.Header().Del("Content-Length") // the upstream's, if it was copied
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(rpcError(id, code, msg))
}

// rpcError is a JSON-RPC error response naming tracectl as its source.
func rpcError(id string, code int, msg string) []byte { return mcpwire.ErrorResponse(id, code, msg) }

// spki returns sha256:<hex> of a certificate's SubjectPublicKeyInfo, the
// form HTTP upstream lines record.
func spki(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}
