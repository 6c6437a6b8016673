package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// Approval through elicitation (spec/policy.md, "Approval"). With
// producer.Options.ApproveElicit, a call an approve rule matched is put to
// the MCP client itself when it declared the elicitation capability in its
// initialize request: the session sends it an elicitation/create request
// on its own stream, under an id of the recorder's namespace
// ("tracectl-approval-<session nonce>-<attempt id>", a JSON string no
// server is sent and none can guess), and the client's response under
// such an id is read by the gate, committed as a client frame withheld
// (the answer to the recorder's own request: never forwarded to the
// server) and handed to the approval waiting for it. The request itself,
// like the session's other answers to the client (errorLine), is not a
// frame of the transcript: the approval observation records what came of
// it. The approval runs off the client reader (approveAsync), so the
// answer, and the client's other frames, are read while it waits.

// elicitState is what the session knows of its client's elicitation.
type elicitState struct {
	mu       sync.Mutex
	declared bool   // the client's initialize request declared form elicitation
	by       string // approval.ClientBy of its clientInfo.name
	nonce    string // the session's part of every elicitation id
	waiting  map[string]chan []byte
	ended    chan struct{} // closed when the client's input ended: no answer will come
	endOnce  sync.Once
}

// prefix begins every elicitation id of this session (the namespace, the
// nonce).
func (e *elicitState) prefix() string {
	return approval.ElicitIDPrefix + e.nonce + "-"
}

// elicitID is the id of a response as a string (decoded: the client may
// spell it with escapes), or "" when it is none.
func elicitID(m *mcpwire.Message) string {
	if !m.ID.Valid() {
		return ""
	}
	id, _ := m.ID.Str()
	return id
}

func newElicitState() elicitState {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return elicitState{nonce: hex.EncodeToString(b[:]), waiting: map[string]chan []byte{}, ended: make(chan struct{})}
}

// The _meta keys under which a modern (stateless) request carries the
// client's capabilities and its name: each request declares them.
const (
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
)

// formElicitation says whether capabilities (an object) declare form
// elicitation: elicitation an object with form, or without url (an empty
// one is form only, as MCP says).
func formElicitation(caps canon.Value) bool {
	if !caps.Valid() || caps.Kind() != canon.KindObject {
		return false
	}
	el, ok := caps.Get("elicitation")
	if !ok || el.Kind() != canon.KindObject {
		return false
	}
	_, form := el.Get("form")
	_, url := el.Get("url")
	return form || !url
}

// noteClient reads the client's initialize request: whether it declared
// form elicitation, and its name (clientInfo.name).
func (s *session) noteClient(m *mcpwire.Message) {
	if m.Kind != mcpwire.KindRequest || m.Method != mcpwire.MethodInitialize || !m.Params.Valid() {
		return
	}
	caps, _ := m.Params.Get("capabilities")
	name := ""
	if ci, ok := m.Params.Get("clientInfo"); ok {
		name, _ = str(ci, "name")
	}
	e := &s.el
	e.mu.Lock()
	e.declared, e.by = formElicitation(caps), approval.ClientBy(name)
	e.mu.Unlock()
}

// clientAsker is who asks the client about the call m, or nil when the
// client did not declare elicitation (or the recorder does not elicit).
// A call that carries the modern _meta clientCapabilities declares them
// itself (and its clientInfo names the client); any other goes by the
// client's initialize request.
func (s *session) clientAsker(g *approval.Gate, m *mcpwire.Message) approval.Asker {
	if g == nil || !g.Elicit {
		return nil
	}
	if m != nil && m.Params.Valid() {
		if meta, ok := m.Params.Get("_meta"); ok && meta.Kind() == canon.KindObject {
			if caps, ok := meta.Get(metaClientCapabilities); ok {
				if !formElicitation(caps) {
					return nil
				}
				name := ""
				if ci, ok := meta.Get(metaClientInfo); ok {
					name, _ = str(ci, "name")
				}
				return &elicitor{s: s, by: approval.ClientBy(name), timeout: g.Timeout, after: g.After}
			}
		}
	}
	e := &s.el
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.declared {
		return nil
	}
	return &elicitor{s: s, by: e.by, timeout: g.Timeout, after: g.After}
}

// ownAnswer says whether a client response answers one of the session's
// own elicitation requests (pending or given up): by its id alone, in the
// session's namespace, and no longer than the transcript keeps an id's
// text (the recorder's own are far shorter): a withheld frame's id is
// kept whole, so verify can tell it is of the namespace.
func (s *session) ownAnswer(m *mcpwire.Message) bool {
	return m.Kind == mcpwire.KindResponse && len(m.IDText()) <= transcript.MaxRPCIDTextBytes && strings.HasPrefix(elicitID(m), s.el.prefix())
}

// answerElicit hands a client response (its line; nil when it could not
// be committed) to the approval waiting for it, if one still is.
func (s *session) answerElicit(id string, line []byte) {
	e := &s.el
	e.mu.Lock()
	ch, ok := e.waiting[id]
	delete(e.waiting, id)
	e.mu.Unlock()
	if ok {
		ch <- bytes.Clone(line) // buffered: one answer
	}
}

// clientEnded tells the approvals waiting for the client that no answer
// will come.
func (s *session) clientEnded() {
	if s.el.ended != nil { // nil only for a session a test built by hand
		s.el.endOnce.Do(func() { close(s.el.ended) })
	}
}

// elicitor asks the client about one call.
type elicitor struct {
	s       *session
	by      string
	timeout time.Duration
	after   func(time.Duration) <-chan time.Time
}

// Ask sends the elicitation/create request and waits for the client's
// answer, at most the timeout. At most approval.MaxPending elicitations
// wait at once in a session: past it, the approval fails at once.
func (a *elicitor) Ask(ctx context.Context, req *approval.Request) approval.Evidence {
	s, e := a.s, &a.s.el
	fail := func(outcome, why string) approval.Evidence {
		return approval.Evidence{Outcome: outcome, Reason: why, Via: approval.ViaElicitation}
	}
	key := e.prefix() + req.AttemptID
	idb, _ := json.Marshal(key)
	id := string(idb)
	ch := make(chan []byte, 1)
	e.mu.Lock()
	switch {
	case len(e.waiting) >= approval.MaxPending:
		e.mu.Unlock()
		return fail(approval.Failed, fmt.Sprintf("%d elicitations wait for the client already: no other is sent", approval.MaxPending))
	case e.waiting[key] != nil:
		e.mu.Unlock()
		return fail(approval.Failed, "an elicitation for this attempt is pending already")
	}
	e.waiting[key] = ch
	e.mu.Unlock()
	giveUp := func(why string, tell bool) {
		e.mu.Lock()
		delete(e.waiting, key)
		e.mu.Unlock()
		if tell {
			// The client may still show the question: tell it the answer
			// is no longer awaited (a late one is still withheld).
			b, _ := json.Marshal(why)
			_ = s.writeClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":` + string(b) + "}}\n"))
		}
	}
	select {
	case <-e.ended:
		giveUp("", false)
		return fail(approval.Failed, "the client's input ended before it answered")
	default:
	}
	line := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + approval.ElicitMethod + `","params":`)
	line = append(append(line, approval.ElicitParams(req)...), "}\n"...)
	_ = s.writeClient(line)
	timeout := a.timeout
	if timeout <= 0 {
		timeout = approval.DefaultTimeout
	}
	after := a.after
	if after == nil {
		after = time.After
	}
	select {
	case b := <-ch:
		if b == nil {
			return fail(approval.Failed, "the client's answer could not be recorded")
		}
		m, ref := mcpwire.Read(b)
		if ref != nil {
			return fail(approval.Failed, "the client's answer is not one")
		}
		return approval.ElicitAnswer(m.Result, m.Error, a.by)
	case <-after(timeout):
		giveUp("tracectl: approval timed out", true)
		return fail(approval.Timeout, fmt.Sprintf("no answer from the client within %s", timeout))
	case <-ctx.Done():
		giveUp("tracectl: the recording ended", true)
		return fail(approval.Failed, "the recording ended before the approver answered")
	case <-e.ended:
		giveUp("", false)
		return fail(approval.Failed, "the client's input ended before it answered")
	}
}

// consumeAnswer commits a client response to one of the session's own
// elicitation requests (withheld: not forwarded) and hands it over.
func (s *session) consumeAnswer(line []byte, m *mcpwire.Message, index int64) {
	err := s.cfg.Sink.Frame(FrameObs{Line: line, Msg: m, Direction: transcript.ClientToServer, Index: index, Disposition: transcript.FrameWithheld})
	if err != nil {
		s.noteSinkErr(err)
		line = nil
	}
	s.answerElicit(elicitID(m), line)
}
