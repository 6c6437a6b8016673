package proxy

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tracectl/tracectl/canon"
)

// clientToServer forwards client lines to the server, recording tools/call
// attempts (durably, before forwarding), tools/list requests and
// cancellations. It is the only writer of the server's stdin.
func (s *session) clientToServer() error {
	lr := newLineReader(s.cfg.ClientIn, s.cfg.MaxInterpret)
	for {
		f, err := lr.next(func(b []byte) error { _, werr := s.serverIn.Write(b); return werr })
		if f.streamed {
			s.mu.Lock()
			s.noteSinkErr(s.cfg.Sink.Oversized("client_to_server", f.digest, f.length))
			s.mu.Unlock()
		} else if f.data != nil {
			if werr := s.fromClient(f.data); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

func (s *session) fromClient(line []byte) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return io.ErrClosedPipe
	}
	body, term := splitTerminator(line)
	m := parseMessage(body, int64(s.cfg.MaxInterpret))
	if m.kind == kindRequest || m.kind == kindNotification {
		s.noteEra(m)
	}
	switch {
	case m.kind == kindUnrecordableCall:
		return s.refuse(m.idKey, m.why)
	case m.kind == kindRequest && m.method == "tools/call":
		// The attempt is made durable before anything else: no session
		// lock is held, so the other direction's recording (a response's
		// durable wait) can share the same fsync.
		ref, err := s.cfg.Sink.Attempt(Call{Line: line, Terminator: term, msg: m})
		if errors.Is(err, ErrUnrecordable) {
			return s.refuse(m.idKey, err.Error())
		}
		if err != nil {
			// Fail closed: not forwarded; the client learns why.
			s.noteSinkErr(err)
			return s.writeClient(errorLine(m.idKey, codeAuditUnavailable, "tracectl: not forwarded: "+ErrAuditUnavailable.Error()))
		}
		// A second call in flight under the same id is still its own
		// attempt, but a response to that id can then belong to either:
		// the proxy does not guess. Both attempts stay without a recorded
		// response (their outcome is unknown at seal), the responses are
		// forwarded, and the transcript shows two overlapping attempts
		// with one id.
		s.mu.Lock()
		p := &pending{what: reqCall, ref: ref}
		if first, dup := s.inflight[m.idKey]; dup && first.what == reqCall {
			if first.timer != nil {
				first.timer.Stop()
			}
			first.conflict = append(first.conflict, ref)
			first.unattributed = 1 + len(first.conflict)
		} else {
			s.inflight[m.idKey] = p
			delete(s.answered, m.idKey)
			if s.cfg.CallTimeout > 0 {
				key := m.idKey
				p.timer = time.AfterFunc(s.cfg.CallTimeout, func() { s.timeout(key, p) })
			}
		}
		s.mu.Unlock()
	case m.kind == kindRequest && m.method == "tools/list":
		s.track(m.idKey, &pending{what: reqList, listReq: append([]byte(nil), line...)})
	case m.kind == kindRequest && m.method == "initialize":
		s.track(m.idKey, &pending{what: reqInit})
	case m.kind == kindRequest && m.method == "server/discover":
		s.track(m.idKey, &pending{what: reqDiscover})
	case m.kind == kindNotification && m.method == "notifications/cancelled":
		if rid, ok := m.params.Get("requestId"); ok {
			key := string(rid.Raw())
			s.mu.Lock()
			if p, ok := s.inflight[key]; ok && p.what == reqCall && len(p.conflict) == 0 {
				p.canceled = true
				p.mu.Lock()
				s.mu.Unlock()
				s.noteSinkErr(s.cfg.Sink.CancelSent(p.ref, line))
				p.mu.Unlock()
			} else {
				s.mu.Unlock()
			}
		}
	}
	_, err := s.serverIn.Write(line)
	return err
}

func (s *session) track(key string, p *pending) {
	s.mu.Lock()
	s.inflight[key] = p
	s.mu.Unlock()
}

func (s *session) timeout(key string, p *pending) {
	s.mu.Lock()
	if cur, ok := s.inflight[key]; !ok || cur != p || len(p.conflict) > 0 {
		s.mu.Unlock()
		return
	}
	p.timedOut = true
	p.mu.Lock()
	s.mu.Unlock()
	defer p.mu.Unlock()
	s.noteSinkErr(s.cfg.Sink.Timeout(p.ref))
}

// refuse answers a tools/call the proxy will not forward because it cannot
// record it exactly.
func (s *session) refuse(idKey, why string) error {
	if idKey == "" {
		idKey = "null"
	}
	return s.writeClient(errorLine(idKey, codeUnrecordable, "tracectl: not forwarded: "+ErrUnrecordable.Error()+": "+why))
}

// serverToClient forwards server lines to the client, recording responses
// (durably, before forwarding), tools/list pages and list_changed.
func (s *session) serverToClient(r io.Reader) error {
	lr := newLineReader(progressReader{r, &s.lastRead}, s.cfg.MaxInterpret)
	for {
		streaming := false
		f, err := lr.next(func(b []byte) error {
			if !streaming {
				s.outMu.Lock() // held for the whole streamed line
				streaming = true
			}
			return s.writeClientLocked(b)
		})
		if streaming {
			s.outMu.Unlock()
		}
		if f.streamed {
			s.mu.Lock()
			s.noteSinkErr(s.cfg.Sink.Oversized("server_to_client", f.digest, f.length))
			s.mu.Unlock()
		} else if f.data != nil {
			if werr := s.fromServer(f.data); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

func (s *session) fromServer(line []byte) error {
	body, _ := splitTerminator(line)
	m := parseMessage(body, int64(s.cfg.MaxInterpret))
	forward, synth := s.observeServer(m, line)
	if synth != nil {
		if err := s.writeClient(synth); err != nil {
			return err
		}
	}
	if !forward {
		return nil
	}
	return s.writeClient(line)
}

// observeServer records what a server line means and decides whether it is
// forwarded (it always is, unless the proxy already answered the client for
// that id, or the response could not be recorded).
func (s *session) observeServer(m message, line []byte) (forward bool, synth []byte) {
	s.mu.Lock()
	switch m.kind {
	case kindResponse:
		p, ok := s.inflight[m.idKey]
		if !ok {
			break
		}
		delete(s.inflight, m.idKey)
		switch p.what {
		case reqList:
			s.noteSinkErr(s.cfg.Sink.ListPage(p.listReq, append([]byte(nil), line...), m.hasErr))
		case reqInit:
			if !m.hasErr {
				v, name, ver := initializeInfo(m.result)
				s.noteSinkErr(s.cfg.Sink.Protocol(ProtocolObs{Era: "legacy", Version: v, Source: "initialize_response", ServerName: name, ServerVersion: ver, Line: append([]byte(nil), line...)}))
			}
		case reqDiscover:
			if !m.hasErr {
				name, ver := discoverInfo(m.result)
				s.noteSinkErr(s.cfg.Sink.Protocol(ProtocolObs{Era: "modern", Version: s.modernVer, Source: "discover_response", ServerName: name, ServerVersion: ver, Line: append([]byte(nil), line...)}))
			}
		case reqCall:
			if len(p.conflict) > 0 {
				// Ambiguous: forwarded, attributed to no attempt. The
				// entry stays until as many responses as attempts came;
				// the attempts stay unknown.
				if p.unattributed--; p.unattributed > 0 {
					s.inflight[m.idKey] = p
				}
				break
			}
			if p.timer != nil {
				p.timer.Stop()
			}
			obs := responseObs(m, line)
			obs.Late = p.timedOut || p.canceled
			answered := s.answered[m.idKey]
			delete(s.answered, m.idKey)
			// The response's durable wait runs without the session lock
			// (the client direction keeps recording attempts meanwhile);
			// p.mu keeps it after any timeout or cancellation already
			// decided for this attempt.
			p.mu.Lock()
			s.mu.Unlock()
			err := s.cfg.Sink.Response(p.ref, obs)
			p.mu.Unlock()
			if err != nil {
				// Fail closed: a response is never forwarded unrecorded;
				// the client gets an error naming the reason instead.
				s.noteSinkErr(err)
				return false, errorLine(m.idKey, codeAuditUnavailable, "tracectl: response withheld: "+ErrAuditUnavailable.Error())
			}
			return !answered, nil
		}
	case kindNotification:
		if m.method == "notifications/tools/list_changed" {
			s.noteSinkErr(s.cfg.Sink.ListChanged(append([]byte(nil), line...)))
		}
	}
	s.mu.Unlock()
	return true, nil
}

func responseObs(m message, line []byte) ResponseObs {
	obs := ResponseObs{Line: line}
	if m.hasErr {
		obs.ResultType = "error"
		if m.errNum.Valid() {
			if v, err := strconv.ParseInt(string(m.errNum.Raw()), 10, 64); err == nil {
				obs.ErrorCode = &v
			}
		}
		return obs
	}
	obs.ResultType = "complete" // a legacy result without resultType is complete
	if rt, ok := str(m.result, "resultType"); ok {
		obs.ResultType = rt
	}
	if ie, ok := m.result.Get("isError"); ok {
		obs.IsError, _ = ie.Bool()
	}
	return obs
}

// noteEra: initialize means legacy; a request carrying the modern _meta
// protocol version means modern.
func (s *session) noteEra(m message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.method == "initialize" {
		s.era = "legacy"
		return
	}
	if state, v := m.protocolState(); state == "present" && s.era == "" {
		s.era = "modern"
		s.modernVer = v
		s.noteSinkErr(s.cfg.Sink.Protocol(ProtocolObs{Era: "modern", Version: v, Source: "request_meta"}))
	}
}

func initializeInfo(result canon.Value) (version, name, ver string) {
	version, _ = str(result, "protocolVersion")
	if si, ok := result.Get("serverInfo"); ok {
		name, _ = str(si, "name")
		ver, _ = str(si, "version")
	}
	return
}

func discoverInfo(result canon.Value) (name, ver string) {
	if meta, ok := result.Get("_meta"); ok {
		if si, ok := meta.Get(MetaServerInfo); ok {
			name, _ = str(si, "name")
			ver, _ = str(si, "version")
		}
	}
	return
}

var _ = errors.New

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
