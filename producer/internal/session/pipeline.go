package session

import (
	"bytes"
	"sync"
)

// Pipelining (spec/transcript.md, "Durability"). In strict durability the
// frames that must be durable before they are forwarded (a tools/call and
// the response to one) are not waited on by the goroutine that reads them:
// the reader writes the frame's line to the journal (its place in file
// order, safe from a crash of this process) and queues the frame; a
// forwarder goroutine per direction takes the queue in read order, waits
// for each frame's durability and only then writes it. While one fsync is
// under way the reader goes on writing lines, and the next fsync covers all
// of them: calls in flight share fsyncs.
//
// Every output a frame causes (the frame itself, the error the proxy
// answers in its place) goes through its direction's queue, so nothing read
// later overtakes it. In durability batch and none, and with a Sink that
// cannot split its durable wait, the queue runs each item on the reader at
// once: today's path, with no asynchronous writer.

// pipelineSink is a Sink that can record an attempt or a response without
// waiting for its durability, handing the wait back. RecordingSink is one.
type pipelineSink interface {
	// pipelined says whether waits are worth deferring: strict durability.
	pipelined() bool
	// AttemptWritten is Attempt, returned once the line is written; the
	// request may be forwarded only after wait returned nil.
	AttemptWritten(c Call) (ref AttemptRef, wait func() error, err error)
	// ResponseWritten is Response, likewise.
	ResponseWritten(a AttemptRef, r ResponseObs) (wait func() error, err error)
}

// Queue bounds: a reader that gets this far ahead of the durable writes
// waits (backpressure), so memory stays bounded whatever the peer sends.
const (
	maxQueued      = 256     // frames
	maxQueuedBytes = 8 << 20 // bytes of queued frame copies (one larger frame is still let through alone)
)

// outItem is one output, delivered after every item queued before it.
type outItem struct {
	wait     func() error    // the frame's durable wait, or nil
	fail     func(err error) // run instead of writing when wait fails
	line     []byte          // written once wait returned nil (nil: nothing)
	toClient bool            // line goes to the client; else to the server
}

// outQueue delivers one direction's outputs in the order they were put.
type outQueue struct {
	s     *session
	async bool

	mu     sync.Mutex
	wmu    sync.Mutex // one write to the server at a time (run, or the callers of a queue that is not async)
	cond   sync.Cond
	items  []outItem
	bytes  int
	closed bool
	err    error // the first failed write to the server: what follows for it is dropped
	done   chan struct{}
}

func newOutQueue(s *session, async bool) *outQueue {
	q := &outQueue{s: s, async: async, done: make(chan struct{})}
	q.cond.L = &q.mu
	if async {
		go q.run()
	} else {
		close(q.done)
	}
	return q
}

// put delivers it after everything put before. It returns the error of a
// failed write to the server (the server's stdin is gone): the caller stops
// reading. Pipelined, it blocks only while the queue is full.
func (q *outQueue) put(it outItem) error {
	if !q.async {
		return q.deliver(it)
	}
	// The reader's buffer is not the queue's: copy what outlives the call.
	it.line = bytes.Clone(it.line)
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) > 0 && (len(q.items) >= maxQueued || q.bytes+len(it.line) > maxQueuedBytes) {
		q.cond.Wait()
	}
	q.items = append(q.items, it)
	q.bytes += len(it.line)
	q.cond.Broadcast()
	return q.err
}

// toServer forwards a frame once wait (if any) returned nil; fail runs
// instead if it did not.
func (q *outQueue) toServer(line []byte, wait func() error, fail func(error)) error {
	return q.put(outItem{line: line, wait: wait, fail: fail})
}

// toClient writes a line to the client in its turn.
func (q *outQueue) toClient(line []byte) error {
	return q.put(outItem{line: line, toClient: true})
}

// close delivers what is queued, stops the forwarder and returns the first
// failed write to the server, if any. Nothing may be put after it.
func (q *outQueue) close() error {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	<-q.done
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// run is the forwarder: one item at a time, in order.
func (q *outQueue) run() {
	defer close(q.done)
	q.mu.Lock()
	for {
		for len(q.items) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.items) == 0 {
			q.mu.Unlock()
			return
		}
		it := q.items[0]
		q.items[0] = outItem{}
		q.items = q.items[1:]
		dropped := q.err != nil && !it.toClient
		q.cond.Broadcast() // room for a frame (its bytes count until delivered)
		q.mu.Unlock()
		var err error
		if !dropped {
			err = q.deliver(it)
		}
		q.mu.Lock()
		if err != nil && q.err == nil {
			q.err = err
		}
		q.bytes -= len(it.line)
		q.cond.Broadcast()
	}
}

// deliver waits for the item's durability, then writes it.
func (q *outQueue) deliver(it outItem) error {
	if it.wait != nil {
		if err := it.wait(); err != nil {
			it.fail(err)
			return nil
		}
	}
	switch {
	case it.line == nil:
		return nil
	case it.toClient:
		return q.s.writeClient(it.line)
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	_, err := q.s.serverIn.Write(it.line)
	return err
}

// pipeline sets up the session's output queues: pipelined when its Sink
// (under Run's notifySink) can split its durable waits and the mode has
// any to split.
func (s *session) pipeline() {
	sink := s.cfg.Sink
	s.wake = func() {}
	if n, ok := sink.(notifySink); ok {
		sink, s.wake = n.Sink, n.wake
	}
	if p, ok := sink.(pipelineSink); ok && p.pipelined() {
		s.pipe = p
	}
	if c, ok := sink.(capturer); ok {
		s.capt = c
	}
	s.cq, s.sq = newOutQueue(s, s.pipe != nil), newOutQueue(s, s.pipe != nil)
}

// attempt records a tools/call attempt: pipelined, the line is written and
// the wait handed back; otherwise durable (as the mode promises) already.
func (s *session) attempt(c Call) (AttemptRef, func() error, error) {
	if s.pipe != nil {
		return s.pipe.AttemptWritten(c)
	}
	ref, err := s.cfg.Sink.Attempt(c)
	return ref, nil, err
}

// response records the response to an attempt, likewise.
func (s *session) response(a AttemptRef, r ResponseObs) (func() error, error) {
	if s.pipe != nil {
		defer s.wake()
		return s.pipe.ResponseWritten(a, r)
	}
	return nil, s.cfg.Sink.Response(a, r)
}

// dropCall forgets a call that was never forwarded (its durable wait
// failed): no response to it will come, so it must not hold the grace
// period, be answered by a timeout, or make a later response under its id
// ambiguous.
func (s *session) dropCall(key string, p *pending) {
	defer s.wake() // the grace loop counts open calls
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.token != "" && s.progress[p.token] == p.ref {
		delete(s.progress, p.token)
	}
	cur, ok := s.inflight[key]
	if !ok || cur.what != reqCall {
		return
	}
	if cur == p {
		if p.timer != nil {
			p.timer.Stop()
		}
		if !p.conflicted() {
			delete(s.inflight, key)
			return
		}
	} else {
		// A second call under the id: it is one of cur's conflicts.
		i := -1
		for j, r := range cur.conflict {
			if r == p.ref {
				i = j
			}
		}
		if i < 0 {
			return
		}
		cur.conflict = append(cur.conflict[:i], cur.conflict[i+1:]...)
	}
	// One response fewer is owed under this id.
	if cur.unattributed--; cur.unattributed <= 0 {
		delete(s.inflight, key)
	}
}
