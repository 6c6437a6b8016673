package session

import (
	"strconv"

	"github.com/tracectl/tracectl/mcpwire"
)

// Mediation of the server's frames (spec/transcript.md, "Server to
// client"): a server frame reaches the client only if every real client
// reads it as the gate did, and an answer the client may already have acted
// on is final. What mediation refuses is committed as refused and never
// delivered; a request a client could have taken the refused frame as the
// answer to is settled by the proxy (a transport failure for a call) and
// answered with an injected error, so the client acts on what the evidence
// says.

// settledSet remembers, by mcpwire.MatchKey, the requests whose answer was
// delivered (or that the proxy answered itself). Bounded: past MaxSettled
// distinct ids, later ones are not remembered (the verifier stops at the
// same bound, counting calls only: spec/transcript.md, "Server to client").
type settledSet struct {
	keys map[string]struct{}
}

// MaxSettled bounds the answered ids one session remembers: about 64 MiB
// at most.
const MaxSettled = 1 << 20

func (s *settledSet) add(k string) {
	if s.keys == nil {
		s.keys = map[string]struct{}{}
	}
	if len(s.keys) < MaxSettled {
		s.keys[k] = struct{}{}
	}
}

func (s *settledSet) hasAny(keys []string) bool {
	for _, k := range keys {
		if _, ok := s.keys[k]; ok {
			return true
		}
	}
	return false
}

// victim is an open request a refused frame could have answered.
type victim struct {
	key string // its exact id text
	p   *pending
}

// takeMatchingLocked removes from the open requests those a client could
// match to any of keys (mcpwire.MatchKey); each is then the proxy's to
// answer. Their p.mu is held: release them with settleVictims. Called with
// s.mu held.
func (s *session) takeMatchingLocked(keys []string) []victim {
	if len(keys) == 0 {
		return nil
	}
	var out []victim
	for k, p := range s.inflight {
		hit := false
		for _, mk := range keys {
			if p.match == mk {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		delete(s.inflight, k)
		if p.timer != nil {
			p.timer.Stop()
		}
		if p.token != "" && s.progress[p.token] == p.ref {
			delete(s.progress, p.token)
		}
		s.answered[k] = true
		s.settled.add(p.match)
		p.mu.Lock()
		out = append(out, victim{key: k, p: p})
	}
	return out
}

// settleVictims records a transport failure for each call among vs (the
// server's answer to it was refused, so what the client receives is the
// proxy's error) and returns the error lines the client gets, in place of
// the answer, for the requests it still waits on.
func (s *session) settleVictims(vs []victim, index int64, rule mcpwire.Rule) [][]byte {
	var synth [][]byte
	detail := "the server's frame " + strconv.FormatInt(index, 10) + ", which a client could take as the answer, was refused by the recorder's gate (" + string(rule) + ") and not delivered"
	for _, v := range vs {
		if v.p.what == reqCall {
			for _, ref := range append([]AttemptRef{v.p.ref}, v.p.conflict...) {
				s.noteSinkErr(s.cfg.Sink.TransportFailure(ref, detail))
			}
		}
		canceled := v.p.canceled
		v.p.mu.Unlock()
		if !canceled {
			synth = append(synth, errorLine(v.key, codeResponseRefused, "tracectl: "+detail+"; the outcome is unknown"))
		}
	}
	if len(vs) > 0 {
		s.wake()
	}
	return synth
}

// sessionOpen is the session's table as Rule sees it; s.mu is held.
type sessionOpen struct{ s *session }

func (o sessionOpen) Exact(id string) bool {
	_, ok := o.s.inflight[id]
	return ok
}

func (o sessionOpen) Matches(keys []string) bool {
	for _, p := range o.s.inflight {
		for _, k := range keys {
			if p.match == k {
				return true
			}
		}
	}
	return false
}

func (o sessionOpen) Settled(keys []string) bool     { return o.s.settled.hasAny(keys) }
func (o sessionOpen) AnsweredByProxy(id string) bool { return o.s.answered[id] }

// boundedID is an id's text for a detail: at most 64 bytes.
func boundedID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
