package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// clientToServer reads client frames through the gate and forwards only
// what it understood and committed: a tools/call after its attempt is
// durable, any other frame after its line is written. A frame the gate
// refuses is committed as refused, answered with an error and never
// forwarded. Its queue (cq) is the only writer of the server's stdin; what
// is queued is delivered before it returns.
func (s *session) clientToServer() (err error) {
	defer func() {
		// The client's input ended: an elicitation waits in vain. Calls
		// still awaiting their approval (a command's) are forwarded or
		// denied before the queue closes, as if the reader had waited.
		s.clientEnded()
		s.asking.Wait()
		if qerr := s.cq.close(); qerr != nil && (err == nil || errors.Is(err, io.EOF)) {
			err = qerr
		}
	}()
	lr := newLineReader(s.clientIn, s.cfg.MaxInterpret)
	var index int64
	// An oversized client frame is spooled for the record (up to what the
	// recorder retains), never forwarded. One spool serves every frame in
	// turn: a frame is done with it when fromClient returns.
	sp := &spool{dir: s.cfg.SpoolDir, limit: s.cfg.MaxRetain}
	over := sp.write
	for {
		f, err := lr.next(over)
		if f.streamed || f.data != nil {
			f.spool = sp
			werr := s.fromClient(f, index)
			sp.reset()
			if werr != nil {
				return werr
			}
			index++
		}
		if err != nil {
			return err
		}
	}
}

// spool holds a frame too long to keep in memory: created on its first
// byte (exclusively, mode 0600), removed once the frame is committed and
// delivered.
type spool struct {
	dir   string
	limit int64 // bytes kept at most; past it the frame is only hashed
	n     int64
	f     *os.File
	err   error
	head  []byte // the frame's first bytes, whatever the limit
}

// spoolHead is how much of a spooled frame's beginning is kept in memory.
const spoolHead = 4096

// errSpoolFull: the frame outgrew the spool's limit.
var errSpoolFull = errors.New("frame longer than the spool limit")

func (sp *spool) write(b []byte) error {
	if room := spoolHead - len(sp.head); room > 0 {
		sp.head = append(sp.head, b[:min(room, len(b))]...)
	}
	if sp.err != nil {
		return nil
	}
	if sp.n += int64(len(b)); sp.n > sp.limit {
		sp.err = errSpoolFull
		if sp.f != nil { // give the disk back at once
			sp.f.Close()
			os.Remove(sp.f.Name())
			sp.f = nil
		}
		return nil
	}
	if sp.f == nil {
		sp.f, sp.err = os.CreateTemp(sp.dir, "tracectl-frame-*")
	}
	if sp.err == nil {
		_, sp.err = sp.f.Write(b)
	}
	return nil // a spool failure does not stop the reading: the frame is still hashed and committed
}

// body reads the first n bytes (the frame without its terminator), or is nil
// when the spool failed or the frame outgrew it.
func (sp *spool) body(n int64) io.Reader {
	if sp == nil || sp.f == nil || sp.err != nil {
		return nil
	}
	return io.NewSectionReader(sp.f, 0, n)
}

func (sp *spool) remove() {
	if sp != nil && sp.f != nil {
		sp.f.Close()
		os.Remove(sp.f.Name())
	}
}

// reset removes the spool's file and readies it for the next frame.
func (sp *spool) reset() {
	sp.remove()
	*sp = spool{dir: sp.dir, limit: sp.limit}
}

func (s *session) fromClient(f frame, index int64) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return io.ErrClosedPipe
	}
	if f.streamed {
		r := &mcpwire.Refusal{Rule: mcpwire.RuleTooLarge, ID: "null", Detail: strconv.FormatInt(f.length, 10) + " bytes, over the gate's limit of " + strconv.Itoa(s.cfg.MaxInterpret)}
		s.noteSinkErr(s.cfg.Sink.Frame(FrameObs{Digest: f.digest, Length: f.length, Terminator: f.term, Body: f.spool.body(f.length), Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameRefused}))
		return s.refuse(r, nil)
	}
	line := f.data
	m, ref := mcpwire.Read(line)
	if ref != nil {
		s.noteSinkErr(s.cfg.Sink.Frame(FrameObs{Line: line, Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameRefused, Refusal: ref}))
		return s.refuse(ref, line)
	}
	if m.Kind != mcpwire.KindResponse {
		s.noteEra(m)
		s.noteClient(m)
	}
	idKey := m.IDText()
	unavailable := func() error {
		if m.Kind != mcpwire.KindRequest {
			return nil
		}
		return s.cq.toClient(errorLine(idKey, codeAuditUnavailable, "tracectl: not forwarded: "+ErrAuditUnavailable.Error()))
	}
	forwardFrame := func(attempt AttemptRef) bool {
		err := s.cfg.Sink.Frame(FrameObs{Line: line, Msg: m, Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameForwarded, Attempt: attempt})
		if err != nil {
			s.noteSinkErr(err)
			_ = unavailable()
			return false
		}
		return true
	}
	switch {
	case s.ownAnswer(m):
		// The client's answer to the recorder's own elicitation request
		// (an approval): committed, handed over, never forwarded.
		s.consumeAnswer(line, m, index)
		return nil
	case m.IsToolCall():
		// Held (busy) from here until the call is tracked and queued: a
		// lifecycle ending the session waits for it (waitIdle) rather
		// than settle what is in flight without it.
		if !s.enterBusy() {
			return io.ErrClosedPipe
		}
		defer s.leaveBusy()
		if m.Kind == mcpwire.KindRequest {
			// A call binds a complete snapshot of this server: collected
			// now when none is current (capture.go).
			s.captureBefore(m)
		}
		// The attempt is made durable before anything else: no session
		// lock is held, so the other direction's recording (a response's
		// durable wait) can share the same fsync.
		decide, decision := s.decider(m)
		ref, w, err := s.attempt(Call{Line: line, Terminator: m.Terminator, Msg: m, Index: index, Decide: decide})
		if err == nil && Approving(decision) {
			// An approve rule matched: asked before anything else, off
			// this reader (approve.go); the call goes on, or is denied,
			// when the approval ends.
			s.approveAsync(ref, w, line, decision)
			return nil
		}
		return s.forwardCall(ref, w, err, line, m, idKey, decision)
	case m.Kind == mcpwire.KindNotification && m.Method == mcpwire.NotifyCancelled:
		handled, err := s.cancel(m, line, index)
		if err != nil {
			s.noteSinkErr(err)
			return nil // not committed: not forwarded (a notification gets no reply)
		}
		if !handled && !forwardFrame(nil) {
			return nil
		}
	default:
		var p *pending
		if m.Kind == mcpwire.KindRequest {
			// Every request is tracked by its id, so a call's response is
			// never taken from another request under the same id.
			switch m.Method {
			case mcpwire.MethodToolsList:
				p = &pending{what: reqList, listReq: append([]byte(nil), line...)}
			case mcpwire.MethodInitialize:
				p = &pending{what: reqInit}
			case mcpwire.MethodDiscover:
				p = &pending{what: reqDiscover}
			default:
				p = &pending{what: reqOther}
			}
		}
		if !forwardFrame(nil) {
			return nil
		}
		if p != nil {
			p.match = mcpwire.MatchKey(m.ID)
			s.track(idKey, p)
		}
	}
	return s.cq.toServer(line, nil, nil)
}

// forwardCall takes a recorded tools/call on (ref, w its durable wait, err
// the recording's failure): denied when its decision denies it in enforce
// mode, settled when the server is gone, else tracked and forwarded once
// durable. Called by the reader, or, for a call that waited for its
// approval, when the approval ended (approveAsync).
func (s *session) forwardCall(ref AttemptRef, w func() error, err error, line []byte, m *mcpwire.Message, idKey string, decision *transcript.Decision) error {
	unavailable := func() error {
		if m.Kind != mcpwire.KindRequest {
			return nil
		}
		return s.cq.toClient(errorLine(idKey, codeAuditUnavailable, "tracectl: not forwarded: "+ErrAuditUnavailable.Error()))
	}
	if err == nil && s.enforced(decision) {
		// Denied by the policy or lock: recorded, settled, never
		// forwarded (policy.go).
		return s.denyCall(ref, w, idKey, m.Kind, decision)
	}
	if err == nil && m.Kind == mcpwire.KindRequest && s.serverGone() {
		// The server went away while the session collected its list
		// for this call: recorded, never forwarded, settled now.
		return s.failUnforwarded(ref, w, idKey)
	}
	if err != nil {
		// Fail closed: not forwarded; the client learns why. (A call
		// the gate read but the recorder cannot record would be a
		// bug: it is an audit failure too, never a plain frame.)
		if errors.Is(err, errUnrecordable) {
			err = fmt.Errorf("%w: the recorder refused a call the gate read: %w", ErrAuditUnavailable, err)
		}
		s.noteSinkErr(err)
		return unavailable()
	}
	wait := w
	var fail func(error)
	if m.Kind == mcpwire.KindNotification {
		if wait != nil {
			fail = s.callNotForwarded(m.Kind, idKey, nil)
		}
		// a tools/call without an id: recorded, forwarded, no response to wait for
		return s.cq.toServer(line, wait, fail)
	}
	// A second call in flight under the same id is still its own
	// attempt, but a response to that id can then belong to either:
	// the proxy does not guess. Both attempts stay without a recorded
	// response (their outcome is unknown at seal), the responses are
	// forwarded, and the transcript shows two overlapping attempts
	// with one id.
	s.mu.Lock()
	p := &pending{what: reqCall, ref: ref, token: progressToken(m.Params), match: mcpwire.MatchKey(m.ID)}
	if p.token != "" {
		s.progress[p.token] = ref
	}
	if first, dup := s.inflight[idKey]; dup && first.what == reqCall {
		if first.timer != nil {
			first.timer.Stop()
		}
		if !first.conflicted() {
			first.unattributed = 1 // the first call's own response
		}
		first.conflict = append(first.conflict, ref)
		first.unattributed++
	} else if dup {
		// Another request waits under this id: a response to it can
		// answer either, so the call's is not guessed either.
		p.ambiguous, p.unattributed = true, 2
		s.inflight[idKey] = p
	} else {
		s.inflight[idKey] = p
		delete(s.answered, idKey)
		if s.cfg.CallTimeout > 0 {
			p.timer = time.AfterFunc(s.cfg.CallTimeout, func() { s.timeout(idKey, p) })
		}
	}
	s.mu.Unlock()
	if wait != nil { // pipelined: made only when a durable wait can fail
		fail = s.callNotForwarded(m.Kind, idKey, p)
	}
	return s.cq.toServer(line, wait, fail)
}

// callNotForwarded is what a call whose durable wait failed gets instead
// of being forwarded: the client learns why (in its turn, from cq), and the
// call (p, tracked under key; nil for a call without an id) holds nothing
// any more.
func (s *session) callNotForwarded(kind mcpwire.Kind, key string, p *pending) func(error) {
	return func(err error) {
		s.noteSinkErr(err)
		if kind == mcpwire.KindRequest {
			s.dropCall(key, p)
			_ = s.writeClient(errorLine(key, codeAuditUnavailable, "tracectl: not forwarded: "+ErrAuditUnavailable.Error()))
		}
	}
}

// cancel commits a notifications/cancelled that names a call in flight (the
// notification line and the unknown outcome it leaves); handled is false
// when it names none, so the caller commits it as a plain frame. An error
// means it could not be committed, so it must not be forwarded.
func (s *session) cancel(m *mcpwire.Message, line []byte, index int64) (handled bool, err error) {
	rid, ok := m.Params.Get("requestId")
	if !ok {
		return false, nil
	}
	// Matched by value, as the server matches it: a requestId of 7.0
	// cancels call 7. (Call ids themselves are canonical: the gate refuses
	// others.)
	key := mcpwire.Key(rid)
	s.mu.Lock()
	p, ok := s.inflight[key]
	if !ok || p.what != reqCall || p.conflicted() || p.canceled {
		// Not a call in flight, or cancelled already (a repeated
		// cancellation changes no outcome): a plain frame.
		s.mu.Unlock()
		return false, nil
	}
	p.canceled = true
	p.mu.Lock()
	s.mu.Unlock()
	err = s.cfg.Sink.CancelSent(p.ref, NotificationObs{Line: line, Msg: m, Index: index})
	p.mu.Unlock()
	return true, err
}

func (s *session) track(key string, p *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.inflight[key]; ok && cur.what == reqCall {
		// A call waits under this id: neither response is attributed.
		if !cur.conflicted() {
			cur.unattributed = 1 + len(cur.conflict)
		}
		cur.ambiguous = true
		cur.unattributed++
		if cur.timer != nil {
			cur.timer.Stop()
		}
		return
	}
	s.inflight[key] = p
}

func (s *session) timeout(key string, p *pending) {
	s.mu.Lock()
	if cur, ok := s.inflight[key]; !ok || cur != p || p.conflicted() {
		s.mu.Unlock()
		return
	}
	p.timedOut = true
	p.mu.Lock()
	s.mu.Unlock()
	defer p.mu.Unlock()
	s.noteSinkErr(s.cfg.Sink.Timeout(p.ref))
}

// refuse answers a frame the gate refused, naming the rule it broke, under
// the id RefusalID gives (line: the frame's bytes, nil when not kept).
func (s *session) refuse(r *mcpwire.Refusal, line []byte) error {
	s.mu.Lock()
	id, answer := RefusalID(r, line, sessionOpen{s})
	s.mu.Unlock()
	if !answer {
		return nil
	}
	return s.cq.toClient(errorLine(id, codeRefused, "tracectl: not forwarded: frame refused by the recorder's gate ("+string(r.Rule)+"): "+r.Detail))
}

// RefusalID is the id the proxy's answer to a client frame the gate
// refused goes under, and whether it answers at all. A frame shaped as a
// response (result or error, no method) is the client's answer to a
// server request: nothing answers it. Otherwise the answer goes under the
// frame's id, unless a client could match that id to a request of its
// own still open (mcpwire.MatchKey): the client would take the refusal
// for that request's answer while the evidence binds the server's, so
// the refusal goes under null instead (JSON-RPC's id for a request whose
// id cannot be trusted). open is read under the caller's lock.
func RefusalID(r *mcpwire.Refusal, line []byte, open Open) (id string, answer bool) {
	if responseShaped(line) {
		return "", false
	}
	if r.ID == "null" || r.ID == "" {
		return "null", true
	}
	doc, err := canon.Parse([]byte(r.ID), canon.ParseOptions{})
	if err != nil || open.Matches([]string{mcpwire.MatchKey(doc.Root())}) {
		return "null", true
	}
	return r.ID, true
}

// responseShaped says whether line parses as one JSON object with a
// result or error member and no method. A repeated member (a reason the
// gate refuses the frame) does not change its shape: a client's answer
// with one is still an answer (to a server's request, or to the recorder's
// own elicitation), which gets none.
func responseShaped(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	doc, err := canon.Parse(bytes.TrimRight(line, "\r\n"), canon.ParseOptions{AllowDuplicateKeys: true})
	if err != nil || doc.Root().Kind() != canon.KindObject {
		return false
	}
	root := doc.Root()
	_, hasMethod := root.Get("method")
	_, hasResult := root.Get("result")
	_, hasError := root.Get("error")
	return !hasMethod && (hasResult || hasError)
}

// serverToClient commits every server frame before it is delivered:
// responses to attempts durably (strict), the rest written to the journal.
// A frame over the limit is spooled while it is hashed, committed and
// withheld. What its queue (sq) holds is delivered before
// it returns.
func (s *session) serverToClient(r io.Reader) error {
	defer s.sq.close()
	defer s.abortCaptures() // nothing more will answer the session's own requests
	lr := newLineReader(progressReader{r, &s.lastRead}, s.cfg.MaxInterpret)
	var index int64
	sp := &spool{dir: s.cfg.SpoolDir, limit: s.cfg.MaxServerFrame} // reused as in clientToServer
	over := sp.write
	for {
		f, err := lr.next(over)
		if f.streamed {
			werr := s.fromServerStreamed(f, index, sp)
			sp.reset()
			index++
			if werr != nil {
				return werr
			}
		} else if f.data != nil {
			if werr := s.fromServer(f.data, index); werr != nil {
				return werr
			}
			index++
		}
		if err != nil {
			return err
		}
	}
}

// fromServerStreamed handles a frame too long to read with the gate's
// limit. One that begins as the answer to a call waiting for it, and that
// the spool holds whole within MaxLargeResponse, is read from the spool
// and handled as any frame (largeAnswer). Any other is committed by digest
// and withheld: never delivered uncommitted.
func (s *session) fromServerStreamed(f frame, index int64, sp *spool) error {
	if line := s.largeAnswer(f, sp); line != nil {
		m, ref := mcpwire.ReadLarge(line, s.cfg.MaxLargeResponse)
		return s.fromServerRead(line, index, m, ref)
	}
	s.withholdStreamed(f, index, sp)
	return nil
}

// largeAnswer is a streamed frame's bytes with their terminator, read back
// from the spool, when they may be a waiting call's response: the frame
// begins exactly {"jsonrpc":"2.0","id":<id>, naming a call in flight, the
// spool holds it whole and the bytes read back are the ones hashed, within
// MaxLargeResponse. Otherwise nil.
func (s *session) largeAnswer(f frame, sp *spool) []byte {
	if f.length > s.cfg.MaxLargeResponse || f.term == mcpwire.TermNone {
		return nil
	}
	body := sp.body(f.length)
	if body == nil {
		return nil
	}
	key, ok := leadingID(sp.head)
	if !ok {
		return nil
	}
	s.mu.Lock()
	p, ok := s.inflight[key]
	waiting := ok && p.what == reqCall && !p.conflicted()
	s.mu.Unlock()
	if !waiting {
		return nil
	}
	term := "\n"
	if f.term == mcpwire.TermCRLF {
		term = "\r\n"
	}
	line := make([]byte, f.length, f.length+int64(len(term)))
	if _, err := io.ReadFull(body, line); err != nil {
		return nil
	}
	if sum := sha256.Sum256(line); "sha256:"+hex.EncodeToString(sum[:]) != f.digest {
		return nil // not the bytes that were read from the server
	}
	return append(line, term...)
}

// withholdStreamed commits a frame too long to read by its digest and
// length, withheld.
func (s *session) withholdStreamed(f frame, index int64, sp *spool) {
	// The gate cannot read a frame this long, so no client may receive it
	// (spec/transcript.md, "Server to client"): it is committed by digest
	// and length (retained from the spool when the spool holds it whole)
	// and withheld. If it begins like the answer to a call in flight, that
	// call is settled by the proxy: the client gets -32093 at once rather
	// than waiting for an answer that will not come.
	err := s.cfg.Sink.Frame(FrameObs{Digest: f.digest, Length: f.length, Terminator: f.term, Body: sp.body(f.length), Direction: transcript.ServerToClient, Index: index, Disposition: transcript.FrameWithheld})
	if err != nil {
		s.noteSinkErr(err)
		return
	}
	if sp.err != nil && !errors.Is(sp.err, errSpoolFull) {
		// The bytes were to be retained and could not be: fail closed, as
		// a payload the recorder cannot write.
		s.noteSinkErr(fmt.Errorf("spool a %d-byte server frame: %v", f.length, sp.err))
	}
	if key, ok := leadingID(sp.head); ok {
		s.pageTooLarge(key)
	}
	for _, b := range s.settleVictims(s.unreadVictims(sp.head), index, mcpwire.RuleTooLarge) {
		if err := s.sq.toClient(b); err != nil {
			return
		}
	}
}

// unreadVictims: the call in flight a frame too long to read answers when
// it begins exactly {"jsonrpc":"2.0","id":<that id>,...: taken for the
// proxy to settle (its p.mu held, as takeMatchingLocked leaves it).
func (s *session) unreadVictims(head []byte) []victim {
	key, ok := leadingID(head)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inflight[key]
	if !ok || p.what != reqCall || p.conflicted() {
		return nil
	}
	return s.takeMatchingLocked([]string{p.match})
}

// leadingID reads the id of a response that begins exactly
// {"jsonrpc":"2.0","id":<id>, with the id a plain integer or a string
// without escapes: the canonical ids the gate lets requests carry.
func leadingID(b []byte) (string, bool) {
	const prefix = `{"jsonrpc":"2.0","id":`
	rest, ok := bytes.CutPrefix(b, []byte(prefix))
	if !ok || len(rest) == 0 {
		return "", false
	}
	end := -1
	if rest[0] == '"' {
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\\' || rest[i] < 0x20 {
				return "", false
			}
			if rest[i] == '"' {
				end = i + 1
				break
			}
		}
	} else {
		i := 0
		if i < len(rest) && rest[i] == '-' {
			i++
		}
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		end = i
	}
	if end <= 0 || end >= len(rest) || rest[end] != ',' {
		return "", false
	}
	return string(rest[:end]), true
}

func (s *session) fromServer(line []byte, index int64) error {
	m, ref := mcpwire.Read(line)
	return s.fromServerRead(line, index, m, ref)
}

// fromServerRead commits a server frame the gate read, and delivers it as
// mediation decides.
func (s *session) fromServerRead(line []byte, index int64, m *mcpwire.Message, ref *mcpwire.Refusal) error {
	forward, synth, wait, key := s.observeServer(m, ref, line, index)
	for _, b := range synth {
		if err := s.sq.toClient(b); err != nil {
			return err
		}
	}
	if !forward && wait == nil {
		return nil
	}
	it := outItem{toClient: true, wait: wait}
	if forward {
		it.line = line
	}
	if wait != nil {
		it.fail = func(err error) {
			// Fail closed: a response is never delivered uncommitted; the
			// client gets an error naming the reason instead.
			s.noteSinkErr(err)
			_ = s.writeClient(errorLine(key, codeAuditUnavailable, "tracectl: response withheld: "+ErrAuditUnavailable.Error()))
		}
	}
	return s.sq.put(it)
}

// observeServer commits a server frame and decides whether it is delivered:
// it is, unless the gate refused it, mediation refused it (an id twin, a
// second answer to a settled request), the proxy already answered that id
// itself, or the frame could not be committed. A refused frame a client
// could take as the answer to an open request settles that request, and
// synth holds the errors the client gets in its place. A response to an
// attempt recorded pipelined comes with its durable wait, and the id text
// its error would answer if that failed.
func (s *session) observeServer(m *mcpwire.Message, refusal *mcpwire.Refusal, line []byte, index int64) (forward bool, synth [][]byte, wait func() error, key string) {
	obs := FrameObs{Line: line, Direction: transcript.ServerToClient, Index: index, Disposition: transcript.FrameForwarded, Msg: m, Refusal: refusal}
	commit := func() bool {
		if err := s.cfg.Sink.Frame(obs); err != nil {
			s.noteSinkErr(err)
			return false
		}
		return obs.Disposition == transcript.FrameForwarded
	}
	var body []byte
	if m == nil {
		body, _ = mcpwire.SplitTerminator(line)
	}
	s.mu.Lock()
	ru := Rule(m, refusal, nil, body, m != nil && padded(m.Body), sessionOpen{s}, mcpwire.RuleUnsolicited)
	if ru.Refusal != nil || ru.Withheld {
		// Not delivered: committed refused (or withheld, an answer the
		// proxy gave itself). If a client could have taken it as an open
		// request's answer, the proxy answers that request instead.
		obs.Disposition = transcript.FrameRefused
		if ru.Withheld {
			obs.Disposition = transcript.FrameWithheld
		} else if m != nil {
			obs.Refusal = ru.Refusal
		}
		var vs []victim
		if ru.Answers {
			keys := mcpwire.LenientIDs(body)
			if m != nil {
				keys = mcpwire.ResponseKeys(m.ID)
			}
			vs = s.takeMatchingLocked(keys)
		}
		s.mu.Unlock()
		commit()
		var rule mcpwire.Rule
		if ru.Refusal != nil {
			rule = ru.Refusal.Rule
		}
		return false, s.settleVictims(vs, index, rule), nil, ""
	}
	switch m.Kind {
	case mcpwire.KindResponse:
		key := m.IDText()
		p := s.inflight[key] // Rule delivers a response only under an open request's exact id
		delete(s.inflight, key)
		if !p.conflicted() {
			s.settled.add(p.match)
		}
		switch p.what {
		case reqCapture:
			// The session's own page: committed, never delivered, kept
			// as the snapshot's (captureBefore waits for it).
			obs.Disposition = transcript.FrameWithheld
			s.mu.Unlock()
			commit()
			p.capture <- append([]byte(nil), line...)
			return false, nil, nil, ""
		case reqList:
			s.noteSinkErr(s.cfg.Sink.ListPage(p.listReq, append([]byte(nil), line...), m.Error.Valid()))
		case reqInit:
			if !m.Error.Valid() {
				v, name, ver := initializeInfo(m.Result)
				s.noteSinkErr(s.cfg.Sink.Protocol(ProtocolObs{Era: mcpwire.EraLegacy, Version: v, Source: transcript.SourceInitialize, ServerName: name, ServerVersion: ver, Line: append([]byte(nil), line...)}))
			}
		case reqDiscover:
			if !m.Error.Valid() {
				name, ver := discoverInfo(m.Result)
				s.noteSinkErr(s.cfg.Sink.Protocol(ProtocolObs{Era: mcpwire.EraModern, Version: s.modernVer, Source: transcript.SourceDiscover, ServerName: name, ServerVersion: ver, Line: append([]byte(nil), line...)}))
			}
		case reqCall:
			if p.conflicted() {
				// Ambiguous: committed and forwarded, attributed to no
				// attempt. The entry stays until as many responses as
				// attempts came; the attempts stay unknown.
				if p.unattributed--; p.unattributed > 0 {
					s.inflight[key] = p
				}
				break
			}
			if p.timer != nil {
				p.timer.Stop()
			}
			if p.token != "" && s.progress[p.token] == p.ref {
				delete(s.progress, p.token)
			}
			ro := responseObs(m, line, index)
			ro.Late = p.timedOut || p.canceled
			answered := s.answered[key]
			delete(s.answered, key)
			// The response's durable wait runs without the session lock
			// (the client direction keeps recording attempts meanwhile);
			// p.mu keeps it after any timeout or cancellation already
			// decided for this attempt.
			p.mu.Lock()
			s.mu.Unlock()
			wait, err := s.response(p.ref, ro)
			p.mu.Unlock()
			if err != nil {
				// Fail closed: a response is never delivered uncommitted;
				// the client gets an error naming the reason instead.
				s.noteSinkErr(err)
				return false, [][]byte{errorLine(key, codeAuditUnavailable, "tracectl: response withheld: "+ErrAuditUnavailable.Error())}, nil, ""
			}
			return !answered, nil, wait, key
		}
	case mcpwire.KindNotification:
		switch m.Method {
		case mcpwire.NotifyToolsListChanged:
			s.mu.Unlock()
			if err := s.cfg.Sink.ListChanged(NotificationObs{Line: line, Msg: m, Index: index}); err != nil {
				s.noteSinkErr(err)
				return false, nil, nil, ""
			}
			return true, nil, nil, ""
		case mcpwire.NotifyProgress:
			obs.Attempt = s.progress[notificationToken(m.Params)]
		}
	}
	s.mu.Unlock()
	return commit(), nil, nil, ""
}

func responseObs(m *mcpwire.Message, line []byte, index int64) ResponseObs {
	obs := ResponseObs{Line: line, Msg: m, Index: index}
	if m.Error.Valid() {
		obs.ResultType = "error"
		if c, ok := m.Error.Get("code"); ok {
			if v, err := strconv.ParseInt(string(c.Raw()), 10, 64); err == nil {
				obs.ErrorCode = &v
			}
		}
		return obs
	}
	obs.ResultType = "complete" // a legacy result without resultType is complete
	if rt, ok := str(m.Result, "resultType"); ok {
		obs.ResultType = rt
	}
	if ie, ok := m.Result.Get("isError"); ok {
		obs.IsError, _ = ie.Bool()
	}
	return obs
}

// noteEra: initialize means legacy; a request carrying the modern _meta
// protocol version means modern.
func (s *session) noteEra(m *mcpwire.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Method == mcpwire.MethodInitialize {
		s.era = mcpwire.EraLegacy
		return
	}
	if s.era != "" {
		return // known: a request's revision changes nothing
	}
	if v, ok := m.RequestRevision(); ok {
		s.era = mcpwire.EraModern
		s.modernVer = v
		s.noteSinkErr(s.cfg.Sink.Protocol(ProtocolObs{Era: mcpwire.EraModern, Version: v, Source: transcript.SourceRequestMeta}))
	}
}

// progressReader notes when bytes last arrived, so draining a server that
// has exited waits as long as output keeps flowing.
type progressReader struct {
	r    io.Reader
	last *atomic.Int64
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// padded reports whether a frame the gate read has bytes after its JSON
// object (white space: anything else the gate refuses).
func padded(body []byte) bool {
	return len(body) > 0 && body[len(body)-1] != '}'
}
