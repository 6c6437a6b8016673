package vectors

import (
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// A proxy's session (frames_committed): every frame in either direction has
// one committing line, numbered per direction. The client sends a frame the
// gate refuses (a tools/call in a JSON-RPC batch) between its tools/list
// pages and its call; the server sends a line it cannot read (not JSON)
// before the call's response. Both are committed; the refused one never
// reached the server.
const (
	refusedBatch = `[{"jsonrpc":"2.0","id":90,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"x@example.com","subject":"s","body":"b"}}}]` + "\n"
	unreadServer = `server log line that is not JSON-RPC` + "\n"
)

// framedBundle records that session through the producer, as the proxy does.
func (g *generator) framedBundle(id string) (*bundle, error) {
	return g.framedSession(id, nil)
}

// framedSession is framedBundle with after, when set, recording more server
// frames once the call has its response (given the call's request line and
// the next server frame index).
func (g *generator) framedSession(id string, after func(rec *producer.Recorder, req []byte, s2c int64) error) (*bundle, error) {
	s, err := g.open(id, func(o *producer.Options) { o.FramesCommitted = true })
	if err != nil {
		return nil, err
	}
	var c2s, s2c int64
	frame := func(dir string, index *int64, line []byte, disp string) error {
		err := s.rec.RecordFrame(producer.FrameRecord{Line: line, Direction: dir, Index: *index, Disposition: disp})
		*index++
		return err
	}
	if err := s.discover(); err != nil {
		return nil, err
	}
	var ex [][2][]byte
	for _, p := range standardPages() {
		req, resp := s.pageBytes(p)
		ex = append(ex, [2][]byte{req, resp})
		if err := frame(transcript.ClientToServer, &c2s, append(req, '\n'), transcript.FrameForwarded); err != nil {
			return nil, err
		}
		if err := frame(transcript.ServerToClient, &s2c, append(resp, '\n'), transcript.FrameForwarded); err != nil {
			return nil, err
		}
	}
	capID, err := snapshot.NewCaptureID(s.ent)
	if err != nil {
		return nil, err
	}
	snap, err := collectBytes(capID, ex, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	if _, err := s.record(snap); err != nil {
		return nil, err
	}
	if err := frame(transcript.ClientToServer, &c2s, []byte(refusedBatch), transcript.FrameRefused); err != nil {
		return nil, err
	}
	req := s.callLine("get_weather", weatherArgs, "")
	msg, ref := mcpwire.Read(req)
	if ref != nil {
		return nil, ref
	}
	i := c2s
	c2s++
	h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req, Message: msg, Frame: &i})
	if err != nil {
		return nil, err
	}
	if err := frame(transcript.ServerToClient, &s2c, []byte(unreadServer), transcript.FrameRefused); err != nil {
		return nil, err
	}
	if err := h.ResponseFrame(producer.Framed{Line: result(req, weatherOK), Index: s2c}); err != nil {
		return nil, err
	}
	if after != nil {
		if err := after(s.rec, req, s2c+1); err != nil {
			return nil, err
		}
	}
	return s.seal()
}

// frameVectors: row 6 (every frame committed, the refused and the unread
// ones included, matches its bytes) and row 5 (a frame line taken out of
// the signed transcript: a gap the verifier reports).
func (g *generator) frameVectors() ([]*vec, error) {
	vs, err := g.settlementVectors()
	if err != nil {
		return nil, err
	}
	b, err := g.framedBundle("r6-frames-committed")
	if err != nil {
		return nil, err
	}
	out := []*vec{g.bundleVec("r6-frames-committed", 6, CasePositive,
		"A proxy's session (frames_committed): every frame in both directions is committed once, in order, and matches its retained bytes, including a client tools/call batch the gate refused (never forwarded) and a server line that is not JSON-RPC (refused: committed, never delivered to the client).",
		string(verify.Verified), codes(verifiedBase, cs(verify.CodeFramesAccounted, verify.CodeFramesRefused, verify.CodeServerFramesRefused, verify.CodePayloadsVerified)),
		codes(cs(verify.CodeFrameSequence, verify.CodeEvidenceMismatch, verify.CodeEvidenceUnavailable)), b)}

	b, err = g.framedBundle("r5-frame-removed")
	if err != nil {
		return nil, err
	}
	i := b.find(is("frame", "disposition", transcript.FrameRefused))
	if err := b.remove(i); err != nil {
		return nil, err
	}
	if err := b.renumber(); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r5-frame-removed", 5, CaseNegative,
		"The refused client frame's line is removed and the record re-signed: the client frames then skip an index, a frame the signed transcript cannot account for.",
		string(verify.Failed), codes(cs(verify.CodeFrameSequence)), codes(signedOK, cs(verify.CodeFramesAccounted)), b))

	b, err = g.framedBundle("r6-frame-claim-changed")
	if err != nil {
		return nil, err
	}
	if err := b.editWhere(is("frame", "disposition", transcript.FrameRefused), func(e event) {
		e["rule"] = "invalid_json"
	}); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r6-frame-claim-changed", 6, CaseNegative,
		"The refused frame's line claims rule invalid_json while the gate reads its retained bytes as a batch; the record is re-signed, so only the claim contradicts the bytes.",
		string(verify.Failed), codes(cs(verify.CodeEvidenceMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable)), b))
	return append(out, vs...), nil
}

// secondAnswer is a second answer to the settled call, under the string twin
// of its id ("3" for 3: the TypeScript SDK matches Number(id)), saying what
// the evidence does not.
func secondAnswer(req []byte) []byte {
	return []byte(`{"jsonrpc":"2.0","id":"3","result":` + weatherError + "}\n")
}

// settlementVectors: settlement is final. A mediating producer refuses a
// second answer a client could match to an answered call (committed,
// never delivered: verified); a transcript that says it delivered one is
// evidence the client may have acted on an answer the bundle does not bind
// (failed), whatever the key holder signed.
func (g *generator) settlementVectors() ([]*vec, error) {
	refused, err := g.framedSession("r6-second-answer-refused", func(rec *producer.Recorder, req []byte, s2c int64) error {
		line := secondAnswer(req)
		m, ref := mcpwire.Read(line)
		if ref != nil {
			return ref
		}
		return rec.RecordFrame(producer.FrameRecord{Line: line, Direction: transcript.ServerToClient, Index: s2c, Disposition: transcript.FrameRefused,
			Message: m, Refusal: &mcpwire.Refusal{Rule: mcpwire.RuleSettledResponse, ID: "null"}})
	})
	if err != nil {
		return nil, err
	}
	delivered, err := g.framedSession("r6-second-answer-delivered", func(rec *producer.Recorder, req []byte, s2c int64) error {
		return rec.RecordFrame(producer.FrameRecord{Line: secondAnswer(req), Direction: transcript.ServerToClient, Index: s2c, Disposition: transcript.FrameForwarded})
	})
	if err != nil {
		return nil, err
	}
	return []*vec{
		g.bundleVec("r6-second-answer-refused", 6, CasePositive,
			"After the call has its answer, the server sends a second one under the string twin of its id (\"3\" for 3, which the TypeScript SDK matches by Number(id)). The producer commits it refused (settled_response) and never delivers it: what the client acted on is the answer the attempt binds.",
			string(verify.Verified), codes(verifiedBase, cs(verify.CodeFramesAccounted, verify.CodeServerFramesRefused, verify.CodePayloadsVerified)),
			codes(cs(verify.CodeResponseAfterSettlement, verify.CodeFrameMisrecorded)), refused),
		g.bundleVec("r6-second-answer-delivered", 6, CaseNegative,
			"The same second answer committed as delivered (forwarded) and signed: a client may have acted on it, and the bundle binds the other answer. Settlement is final: response_after_settlement, whoever holds the key.",
			string(verify.Failed), codes(cs(verify.CodeResponseAfterSettlement)), codes(cs(verify.CodeFramesAccounted)), delivered),
	}, nil
}
