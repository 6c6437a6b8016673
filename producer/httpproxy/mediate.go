package httpproxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/transcript"
)

// Mediation of the upstream's answers (spec/http.md, "Server to client"):
// an upstream message reaches the client only if every real client reads
// its body or SSE event as the gate did, and only the first answer to the
// exchange's request, under its exact id. Everything else is committed
// refused (or withheld, for framing) and not delivered; when a client could
// have taken it as the answer, the request is settled by the proxy (a
// transport failure for a call) and the client gets the proxy's error.

// delivery is what becomes of one upstream message.
type delivery uint8

const (
	deliverIt delivery = iota // committed forwarded: deliver it
	dropIt                    // committed refused: not delivered; the exchange goes on
	answerIt                  // committed refused, and a client could take it as the exchange's answer: the proxy answers instead
)

// sniffed reports whether a client that matches media types by substring
// (the TypeScript SDK: contentType.includes(...)) would read a body as JSON
// or as an event stream.
func sniffed(ct string) bool {
	l := strings.ToLower(ct)
	return strings.Contains(l, "application/json") || strings.Contains(l, "text/event-stream")
}

// exchangeOpen is an exchange's one request as session.Rule sees it: a
// POST's stream answers that POST's request, and the bundle remembers the
// ids already answered.
type exchangeOpen struct{ x *exchange }

func (o exchangeOpen) request() bool {
	return o.x.msg != nil && o.x.msg.Kind == mcpwire.KindRequest
}

func (o exchangeOpen) Exact(id string) bool {
	return o.request() && !o.x.answered && id == o.x.msg.IDText()
}

// Matches reports whether a client could take a frame with one of these
// ids (mcpwire.MatchKey) as the answer to the exchange's request.
func (o exchangeOpen) Matches(keys []string) bool {
	return o.request() && !o.x.answered && slices.Contains(keys, mcpwire.MatchKey(o.x.msg.ID))
}

// Settled: an id the bundle saw answered, or this exchange's own once it
// has its answer.
func (o exchangeOpen) Settled(keys []string) bool {
	if o.request() && o.x.answered && slices.Contains(keys, mcpwire.MatchKey(o.x.msg.ID)) {
		return true
	}
	return o.x.b.isSettled(keys)
}

// AnsweredByProxy is false: an exchange the proxy answered itself is over,
// and its stream delivers nothing more.
func (exchangeOpen) AnsweredByProxy(string) bool { return false }

// message commits one server message of this exchange (a JSON body or an
// SSE event's data) and decides whether it is delivered. framing, when
// set, is why the SSE event that carried it is refused whatever its data.
func (x *exchange) message(data []byte, framing *mcpwire.Refusal) delivery {
	b := x.b
	line, m, ref := gateLine(data)
	d := deliverIt
	var durable func() error // the response's durable wait, when it answers this exchange's call
	err := b.serverFrame(func(index int64) error {
		obs := session.FrameObs{Line: line, Msg: m, Refusal: ref, Direction: transcript.ServerToClient, Index: index, Disposition: transcript.FrameForwarded}
		refuse := func(r *mcpwire.Refusal, answers bool) error {
			obs.Disposition = transcript.FrameRefused
			if m != nil {
				obs.Refusal = r
			}
			d = dropIt
			if framing != nil {
				if err := b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Frame: &index, Rule: string(framing.Rule), Detail: framing.Detail}); err != nil {
					return err
				}
			}
			if err := b.sink.Frame(obs); err != nil {
				return err
			}
			if answers {
				d = answerIt
				x.answered = true
				x.refusedIndex, x.refusedRule = index, r.Rule
				x.noAnswerLocked("the upstream's frame " + strconv.FormatInt(index, 10) + ", which a client could take as the answer, was refused by the recorder's gate (" + string(r.Rule) + ") and not delivered")
			}
			return nil
		}
		var open session.Open = exchangeOpen{x}
		if x.stream {
			// the deprecated transport's stream answers every open
			// request of its session (legacy.go)
			open = legacyOpen{x}
		}
		ru := session.Rule(m, ref, framing, data, false, open, mcpwire.RuleForeignResponse)
		if x.stream && (ru.Withheld || ru.Refusal != nil && ru.Answers) {
			// An answer the proxy gave itself (withheld), or a frame a
			// client could take as open requests' answers: the proxy
			// answers them on the stream.
			obs.Disposition, d = transcript.FrameRefused, dropIt
			if ru.Withheld {
				obs.Disposition = transcript.FrameWithheld
			} else if m != nil {
				obs.Refusal = ru.Refusal
			}
			if err := b.sink.Frame(obs); err != nil {
				return err
			}
			if ru.Answers {
				keys := mcpwire.LenientIDs(data)
				if m != nil {
					keys = mcpwire.ResponseKeys(m.ID)
				}
				x.answerOpen(x.legacy.takeMatching(keys), "the upstream's frame "+strconv.FormatInt(index, 10)+", which a client could take as the answer, was refused by the recorder's gate ("+string(ru.Refusal.Rule)+") and not delivered", codeResponseRefused)
			}
			return nil
		}
		if ru.Refusal != nil {
			return refuse(ru.Refusal, ru.Answers)
		}
		switch m.Kind {
		case mcpwire.KindResponse:
			mk := mcpwire.MatchKey(m.ID)
			t := x // the exchange whose request this answers
			if x.stream {
				if t = x.legacy.take(m.IDText()); t == nil {
					// its POST failed since Rule looked: no longer open
					return refuse(&mcpwire.Refusal{Rule: mcpwire.RuleForeignResponse, Detail: "id " + m.IDText() + " names no open request", ID: "null"}, false)
				}
				if t.call != nil {
					b.untrack(t.call)
				}
			}
			t.answered = true
			b.settle(mk)
			if t.call != nil {
				c := t.call
				c.mu.Lock()
				defer c.mu.Unlock()
				if !c.settled {
					c.settled = true
					// durable before delivery, waited on once the
					// server frame order is released (below)
					w, err := b.sink.ResponseWritten(c.ref, session.ResponseObs{Line: line, Msg: m, Index: index})
					durable = w
					return err
				}
				return b.sink.Frame(obs)
			}
			if err := b.sink.Frame(obs); err != nil {
				return err
			}
			switch t.what {
			case mcpwire.MethodToolsList:
				if !m.Error.Valid() {
					x.p.decls.observe(m.Result)
				}
				return b.listPage(viewKey(t.r), t.list, line, m)
			case mcpwire.MethodInitialize:
				if !m.Error.Valid() {
					v, _ := str(m.Result, "protocolVersion")
					name, ver := serverInfo(m.Result, "serverInfo")
					return b.sink.Protocol(session.ProtocolObs{Era: mcpwire.EraLegacy, Version: v, Source: transcript.SourceInitialize, ServerName: name, ServerVersion: ver, Line: line})
				}
			case mcpwire.MethodDiscover:
				if !m.Error.Valid() {
					meta, _ := m.Result.Get("_meta")
					name, ver := serverInfo(meta, mcpwire.MetaServerInfo)
					v, _ := t.msg.RequestRevision()
					return b.sink.Protocol(session.ProtocolObs{Era: mcpwire.EraModern, Version: v, Source: transcript.SourceDiscover, ServerName: name, ServerVersion: ver, Line: line})
				}
			}
			return nil
		case mcpwire.KindNotification:
			switch m.Method {
			case mcpwire.NotifyToolsListChanged:
				b.listChanged()
				return b.sink.ListChanged(session.NotificationObs{Line: line, Msg: m, Index: index})
			case mcpwire.NotifyProgress:
				if tok, ok := m.Params.Get("progressToken"); ok {
					switch {
					case x.stream:
						if c := x.legacy.progressCall(mcpwire.Key(tok)); c != nil {
							obs.Attempt = c.ref
						}
					case x.call != nil && x.call.token != "" && mcpwire.Key(tok) == x.call.token:
						obs.Attempt = x.call.ref
					}
				}
			}
		}
		return b.sink.Frame(obs)
	})
	if err == nil && durable != nil {
		err = durable()
	}
	if err != nil {
		x.failed = err
		return dropIt
	}
	return d
}

// noAnswerLocked settles the exchange's call as a transport failure from
// inside a serverFrame callback.
func (x *exchange) noAnswerLocked(detail string) {
	if x.call == nil {
		return
	}
	x.settle(func() error { return x.b.sink.TransportFailure(x.call.ref, detail) })
}

// answerRefused answers the client in place of a JSON body the proxy did
// not deliver: a JSON-RPC error under the request's id (HTTP 200, so an
// SDK client hands its application the error), the call settled as a
// transport failure.
func (x *exchange) answerRefused(index int64, rule mcpwire.Rule) {
	if index < 0 && x.refusedRule != "" {
		index, rule = x.refusedIndex, x.refusedRule
	}
	detail := "the upstream's answer was refused by the recorder's gate"
	if rule != "" {
		detail += " (" + string(rule) + ")"
	}
	if index >= 0 {
		detail = "the upstream's frame " + strconv.FormatInt(index, 10) + ", which a client could take as the answer, was refused by the recorder's gate (" + string(rule) + ")"
	}
	detail += " and not delivered"
	x.noAnswer(detail)
	if x.msg == nil || x.msg.Kind != mcpwire.KindRequest {
		x.w.Header().Del("Content-Length")
		http.Error(x.w, "tracectl: "+detail, http.StatusBadGateway)
		return
	}
	writeRPCError(x.w, http.StatusOK, idOf(x.msg), codeResponseRefused, "tracectl: "+detail+"; the outcome is unknown")
}

// sseError is the proxy's answer as an SSE event on a stream already
// begun.
func (x *exchange) sseError() []byte {
	detail := "the upstream's frame " + strconv.FormatInt(x.refusedIndex, 10) + ", which a client could take as the answer, was refused by the recorder's gate (" + string(x.refusedRule) + ") and not delivered; the outcome is unknown"
	return append(append([]byte("event: message\ndata: "), rpcError(idOf(x.msg), codeResponseRefused, "tracectl: "+detail)...), "\n\n"...)
}

// relaySSE commits each event of an upstream stream, then delivers it.
func (x *exchange) relaySSE(ctx context.Context, cancel context.CancelFunc, body io.Reader, clientGone <-chan struct{}) {
	type item struct {
		ev  mcpwire.Event
		err error
	}
	events := make(chan item)
	go func() {
		defer close(events)
		er := mcpwire.NewEventReader(body)
		for {
			ev, err := er.Next()
			select {
			case events <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	idle := x.p.cfg.NewTimer(x.p.cfg.StreamIdle)
	defer idle.Stop()
	var closing, retired <-chan struct{}
	if x.call == nil {
		closing, retired = x.p.closing, x.b.retired
	}
	first := x.legacyCandidate()
	for {
		select {
		case <-closing:
			return // a stream with no call in it: nothing is left unanswered
		case <-retired:
			return // its session was deleted, or its bundle rotated
		case it, ok := <-events:
			if !ok {
				// Closed under the reader: the proxy shut down.
				x.noAnswer("the proxy shut down with the call in flight; the upstream request was closed")
				return
			}
			if first && len(it.ev.Raw) > 0 {
				first = false
				handled, err := x.startLegacy(it.ev)
				if err != nil {
					x.failed = err
				}
				if x.legacy != nil {
					defer x.endLegacy()
					retired = x.b.retired // the session's own bundle now
				}
				if handled || err != nil {
					if x.legacy == nil || err != nil {
						cancel()
						return
					}
					idle.Reset(x.p.cfg.StreamIdle)
					continue
				}
			}
			if len(it.ev.Raw) > 0 {
				idle.Reset(x.p.cfg.StreamIdle)
				d := deliverIt
				switch ev := it.ev; {
				case endpointNamed(ev.Raw):
					// An endpoint event the proxy does not take as the
					// transport's (a second one, one with other fields,
					// padding or a BOM): it names the upstream's URL and
					// session, a capability, so it is withheld with no
					// frame or bytes, and never delivered.
					d = dropIt
					if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: ruleSSEEndpoint, Detail: "an endpoint event not taken as the HTTP+SSE transport's: its URL is neither delivered nor kept"}); err != nil {
						x.failed = err
					}
				case ev.Data != nil:
					d = x.message(ev.Data, ev.Refusal)
				case ev.Refusal != nil:
					d = dropIt
					if err := x.b.http(transcript.HTTPEvent{Event: transcript.HTTPWithheld, Exchange: x.id, Rule: string(ev.Refusal.Rule), Detail: ev.Refusal.Detail}); err != nil {
						x.failed = err
					}
				}
				if x.failed != nil {
					cancel()
					return
				}
				switch {
				case d == answerIt:
					// The client's answer is the proxy's: the stream ends
					// with it, and what the upstream sends after is not
					// observed.
					if !x.gone {
						_, _ = x.w.Write(x.sseError())
						flush(x.w)
					}
					cancel()
					return
				case d == deliverIt && !x.gone && x.stream:
					x.gone = !x.legacy.write(it.ev.Raw)
				case d == deliverIt && !x.gone:
					if _, err := x.w.Write(it.ev.Raw); err != nil {
						x.gone = true
					} else {
						flush(x.w)
					}
				}
			}
			if it.err != nil {
				detail := "the upstream stream ended before the response"
				switch {
				case errors.Is(it.err, mcpwire.ErrEventTooLarge):
					detail = "the upstream stream carried an event over the gate's limit; abandoned"
				case it.ev.Refusal != nil && it.ev.Refusal.Rule == mcpwire.RuleSSEUnfinished:
					detail = "the upstream stream was cut mid-event"
				case !errors.Is(it.err, io.EOF):
					detail = "the upstream stream was cut: " + it.err.Error()
				}
				if x.call != nil {
					x.call.mu.Lock()
					settled := x.call.settled
					x.call.mu.Unlock()
					if !settled {
						_ = x.b.http(transcript.HTTPEvent{Event: transcript.HTTPFailure, Exchange: x.id, Detail: detail})
					}
				}
				x.noAnswer(detail)
				return
			}
		case <-idle.C():
			// Abandoned: whatever the upstream does next is not observed,
			// so a waiting call's outcome is unknown.
			detail := "the upstream stream was silent for " + x.p.cfg.StreamIdle.String() + "; abandoned"
			_ = x.b.http(transcript.HTTPEvent{Event: transcript.HTTPFailure, Exchange: x.id, Detail: detail})
			if c := x.call; c != nil {
				c.mu.Lock()
				if !c.settled && !c.timedOut {
					c.timedOut = true
					if err := x.b.sink.Timeout(c.ref); err != nil {
						x.failed = err
					}
				}
				c.mu.Unlock()
			}
			cancel()
			return
		case <-clientGone:
			clientGone = nil
			x.gone = true
			// The client closed its request: in 2026-07-28 that is how a
			// call is cancelled, so the upstream request is closed too.
			// What the tool did is unknown.
			_ = x.b.http(transcript.HTTPEvent{Event: transcript.HTTPFailure, Exchange: x.id, Detail: "the client closed the request; the upstream request was closed"})
			x.noAnswer("the client closed the request with the call in flight; the upstream request was closed")
			cancel()
			return
		}
	}
}
