package httpproxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// Bounds under abuse (spec/http.md, "Limits"): request bodies held in
// memory at once, and session bundles open at once.

// defaultMaxInflightBytes bounds the request bodies held in memory at once,
// over all exchanges: four bodies just under the gate's limit. Past it a request is
// answered 503 with Retry-After, not read further.
const defaultMaxInflightBytes = 256 << 20

// defaultMaxSessions bounds the 2025-11-25 session bundles open at once
// (each holds descriptors); reaching it seals the least recently used one.
const defaultMaxSessions = 256

// ruleInflightBudget refuses a request whose body would take the proxy's
// in-flight body budget past its bound (a refused line naming no frame:
// the body is not read whole).
const ruleInflightBudget = "inflight_budget"

// ruleBodyTimeout refuses a request whose body did not arrive whole within
// Config.BodyTimeout: a client trickling a body holds a connection and a
// goroutine, so the wait is bounded (a refused line naming no frame).
const ruleBodyTimeout = "body_timeout"

// defaultBodyTimeout is how long a request body may take to arrive.
const defaultBodyTimeout = time.Minute

// retryAfter is what an over-budget client is told to wait, in seconds:
// bodies in flight are released as their exchanges end.
const retryAfter = "1"

// readChunk is what a body of unknown length is first read into (and
// charged); the buffer doubles as it fills.
const readChunk = 4 << 10

// budget is the bytes of request bodies held in memory.
type budget struct {
	mu        sync.Mutex
	used, max int64
}

func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// readBody reads a POST's body within the gate's limit and the in-flight
// budget, into a buffer whose last byte is the LF of the frame the gate
// reads (no second copy), charged to the budget as it grows. A body over
// the limit is committed by digest and refused; one the budget cannot hold
// is refused with 503 when it no longer fits. ok false: the
// exchange is answered. release gives the body's bytes back to the budget
// once the exchange no longer holds them.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request, sid string) (line []byte, release func(), ok bool) {
	release = func() {}
	if r.Method != http.MethodPost {
		return nil, release, true
	}
	if r.ContentLength > maxBody {
		p.tooLarge(w, r, sid, nil)
		return nil, release, false
	}
	if t := p.cfg.BodyTimeout; t > 0 {
		// A deadline on this request's reads only: cleared once the body
		// is read, so a response stream is not cut by it.
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(t)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	var held int64
	release = func() { p.budget.give(held); held = 0 }
	// The buffer grows with what arrives, and is charged as it grows: a
	// client that declares a large Content-Length and sends nothing holds
	// no memory and no budget. With a length, it never grows past it (and
	// its LF).
	limit := int64(maxBody + 2)
	if r.ContentLength >= 0 {
		limit = r.ContentLength + 1
	}
	size := min(int64(readChunk), limit)
	if !p.budget.take(size) {
		p.overBudget(w, r)
		return nil, func() {}, false
	}
	held = size
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > maxBody {
				break
			}
			grow := min(int64(cap(buf))*2, limit)
			if grow <= int64(cap(buf)) {
				// Longer than its Content-Length said (net/http stops
				// there; another server might not): read on, to the
				// gate's limit.
				limit = maxBody + 2
				grow = min(int64(cap(buf))*2, limit)
			}
			if !p.budget.take(grow) {
				release()
				p.overBudget(w, r)
				return nil, func() {}, false
			}
			nb := make([]byte, len(buf), grow)
			copy(nb, buf)
			p.budget.give(held)
			buf, held = nb, grow
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if p.onRead != nil {
			p.onRead()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			release()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				p.bodyTimedOut(w, r, int64(len(buf)))
				return nil, func() {}, false
			}
			http.Error(w, "tracectl: reading the request body: "+err.Error(), http.StatusBadRequest)
			return nil, func() {}, false
		}
	}
	if int64(len(buf)) > maxBody {
		p.tooLarge(w, r, sid, buf)
		release()
		return nil, func() {}, false
	}
	// The LF has its byte when the body ended within its Content-Length;
	// otherwise append may grow the buffer once more, uncharged (at most
	// the bytes held).
	return append(buf, '\n'), release, true
}

// bodyTimedOut answers a request whose body did not arrive within
// BodyTimeout: 408, the connection closed, recorded as a refused line
// naming no frame (the body was not read whole).
func (p *Proxy) bodyTimedOut(w http.ResponseWriter, r *http.Request, got int64) {
	p.refusedUnread(w, r, ruleBodyTimeout, fmt.Sprintf("the body did not arrive within %s (%d bytes came); the body was not read", p.cfg.BodyTimeout, got))
	w.Header().Set("Connection", "close")
	writeRPCError(w, http.StatusRequestTimeout, "null", codeRefused, "tracectl: not forwarded: the request body did not arrive within "+p.cfg.BodyTimeout.String()+" ("+ruleBodyTimeout+")")
}

// refusedUnread records a request refused before its body was read: its
// request line and a refused line naming no frame.
func (p *Proxy) refusedUnread(w http.ResponseWriter, r *http.Request, rule, detail string) {
	b, err := p.bundleFor(r.Header.Get("Mcp-Session-Id"), "")
	if err != nil {
		return
	}
	defer b.release()
	x := &exchange{p: p, b: b, id: p.exch.Add(1), w: w, r: r}
	err = x.upstreamLine(nil)
	if err == nil {
		err = b.http(x.requestLine(nil))
	}
	if err == nil {
		_ = b.http(transcript.HTTPEvent{Event: transcript.HTTPRefused, Exchange: x.id, Rule: rule, Detail: detail})
	}
}

// overBudget answers a request the in-flight budget cannot hold: 503 with
// Retry-After, recorded as a refused line naming no frame (its body is
// not read whole).
func (p *Proxy) overBudget(w http.ResponseWriter, r *http.Request) {
	p.refusedUnread(w, r, ruleInflightBudget, "the request bodies in flight would exceed "+strconv.FormatInt(p.budget.max, 10)+" bytes; the body was not read")
	w.Header().Set("Retry-After", retryAfter)
	w.Header().Set("Connection", "close")
	writeRPCError(w, http.StatusServiceUnavailable, "null", codeRefused, "tracectl: not forwarded: the proxy holds as many request bodies as it may ("+ruleInflightBudget+"); retry later")
}

// maxLargeBody bounds a JSON body the proxy still reads when it is longer
// than the gate's limit: the answer to the exchange's own call, read in
// memory (mcpwire.ReadLarge) within the in-flight budget, committed and
// delivered like any answer (spec/http.md, "Limits").
const maxLargeBody = 256 << 20

// readLarge reads on from a body whose first bytes (head, over the gate's
// limit) are read, up to maxLargeBody (one byte more says it is longer),
// charging the budget as the buffer grows. A body of known length (the
// response's Content-Length, else -1) is read into one buffer of that
// length, charged once; one of unknown length grows by doubling, and the
// budget is charged for both buffers while one is copied to the next, so
// it needs up to three times its size at the last growth. A body the
// budget cannot hold is errOverBudget. release gives the charge back.
func (p *Proxy) readLarge(body io.Reader, head []byte, length int64) (data []byte, release func(), err error) {
	var held int64
	release = func() { p.budget.give(held); held = 0 }
	limit := int64(maxLargeBody + 1)
	size := min(int64(len(head))*2, limit)
	if length >= int64(len(head)) && length < limit {
		// One buffer; the one byte more says the body is longer than it
		// said (net/http does not deliver that, but the reader is any).
		limit = length + 1
		size = limit
	}
	if !p.budget.take(size) {
		return nil, release, errOverBudget
	}
	held = size
	buf := make([]byte, len(head), size)
	copy(buf, head)
	for {
		if int64(len(buf)) == limit {
			return buf, release, nil
		}
		if len(buf) == cap(buf) {
			grow := min(int64(cap(buf))*2, limit)
			if !p.budget.take(grow) {
				release()
				return nil, func() {}, errOverBudget
			}
			nb := make([]byte, len(buf), grow)
			copy(nb, buf)
			p.budget.give(held)
			buf, held = nb, grow
		}
		n, rerr := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(rerr, io.EOF) {
			return buf, release, nil
		}
		if rerr != nil {
			return buf, release, rerr
		}
	}
}

// errOverBudget: a long answer the in-flight budget could not hold.
var errOverBudget = errors.New("the answer is longer than the gate holds and the in-flight budget cannot hold it; withheld")

// bodyCharge is a request body's share of the in-flight budget. The POST's
// handler gives it back when it returns (done), unless the body stays in
// memory after it: a deprecated-transport request open on its session's
// stream holds it (moved) until it leaves the session's table
// (legacy.closeOpen), under the session's lock.
type bodyCharge struct {
	release func()
	mu      sync.Mutex
	moved   bool
}

func (c *bodyCharge) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.moved {
		c.release()
	}
}
