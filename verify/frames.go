package verify

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// Frame-sequence codes (spec/verification.md, "Frames").
const (
	// CodeFrameSequence: in a transcript whose header says
	// frames_committed, the frames of one direction are not numbered
	// 0, 1, 2, ... in journal order (a gap, a repeat, a line without its
	// index), or frame lines appear where the header does not commit to
	// frames. A gap is a frame the transcript cannot account for: the
	// proxy passed bytes the evidence does not commit to.
	CodeFrameSequence Code = "frame_sequence"
	// CodeFramesAccounted is the pass finding: every frame in both
	// directions has exactly one committing line, in order.
	CodeFramesAccounted Code = "frames_accounted"
	// CodeFramesRefused is info: client frames the producer's gate refused
	// (committed, never forwarded to the server).
	CodeFramesRefused Code = "frames_refused"
	// CodeFrameMisrecorded: a frame line the format forbids for what it
	// commits to: a client tools/call committed as a plain frame (it
	// reached the server, or was turned away, without an attempt), a client
	// frame the gate cannot read marked forwarded, a readable one marked
	// refused, frame_too_large on a frame within the gate's limit, a
	// withheld frame that is not a server response.
	CodeFrameMisrecorded Code = "frame_misrecorded"
	// CodeClientGone is info: the client went away mid-session; what the
	// server sent after it was committed, not delivered.
	CodeClientGone Code = "client_gone"
	// CodeResponseAfterSettlement: a server response delivered (committed
	// forwarded) whose id a real client matches (mcpwire.ResponseKeys) to
	// a call that already had its answer. The client may have acted on
	// either answer, and the evidence binds only one: settlement is final,
	// and a producer that mediates refuses such a frame.
	CodeResponseAfterSettlement Code = "response_after_settlement"
	// CodeServerFramesRefused is info: server frames the producer refused
	// (spec/transcript.md, "Server to client"): committed, never delivered.
	CodeServerFramesRefused Code = "server_frames_refused"
)

// onSession reports a session event.
func (b *bundleCheck) onSession(e *transcript.SessionEvent) {
	if e.Event == transcript.SessionClientGone {
		b.r.add(CodeClientGone, checkTranscript, StatusInfo, lineSubject(e.Seq),
			"the client went away (a write to it failed): the frames after this line were committed as the server sent them, not delivered")
	}
}

// frameState follows the frame numbering of both directions.
type frameState struct {
	next    map[string]int64 // per direction: the index expected next
	bad     int64            // frame_sequence findings
	refused int64
	lines   int64 // frame lines

	// Who a server response can answer, for the transcripts that commit
	// to frames: calls still waiting for their response (by attempt id:
	// their JSON-RPC id text; and per id text, how many), and the other
	// client requests still unanswered (per id text). Only what is open is
	// kept.
	openCall  map[string]string // attempt id -> id text
	openByID  map[string]int    // id text -> calls waiting under it
	openOther map[string]int    // id text -> other requests waiting under it
	shared    map[string]bool   // id texts a call and another request waited under at once: their responses are not judged

	// By mcpwire.MatchKey: the calls waiting (how many) and the calls
	// answered (by attempt id), so a response delivered under another
	// spelling of their id is seen (mediation, v4).
	openByMatch map[string]int
	settledBy   map[string]string
	refusedS2C  int64 // server frames refused
}

// frames checks the frame index a line carries against the sequence of its
// direction. It runs for every decoded line, before interpretation.
func (b *bundleCheck) frames(idx int64, ev any) {
	if b.header == nil || b.partial {
		return
	}
	if b.header.FramesCommitted {
		b.trackOpen(ev)
	}
	dir, index, framed := frameOf(ev)
	if !framed {
		return
	}
	subject := lineSubject(idx)
	if !b.header.FramesCommitted {
		if index != nil || isFrameLine(ev) {
			b.fr.bad++
			b.r.add(CodeFrameSequence, checkTranscript, StatusFail, subject,
				"a frame index or frame line in a transcript whose header does not commit to frames")
		}
		return
	}
	if index == nil {
		b.fr.bad++
		b.r.add(CodeFrameSequence, checkTranscript, StatusFail, subject,
			"the header commits to every frame, and this line commits to a frame without its index")
		return
	}
	if b.fr.next == nil {
		b.fr.next = map[string]int64{}
	}
	want := b.fr.next[dir]
	if *index != want {
		b.fr.bad++
		what := "a gap: frames the transcript cannot account for"
		if *index < want {
			what = "a frame committed twice or out of order"
		}
		b.r.add(CodeFrameSequence, checkTranscript, StatusFail, subject,
			fmt.Sprintf("%s frame %d where frame %d comes next: %s", dir, *index, want, what))
	}
	b.fr.next[dir] = max(want, *index+1)
}

func isFrameLine(ev any) bool { _, ok := ev.(*transcript.Frame); return ok }

// frameOf says which direction's frame a line commits to, and its index.
// framed is false for lines that commit to no frame.
func frameOf(ev any) (dir string, index *int64, framed bool) {
	switch e := ev.(type) {
	case *transcript.Attempt:
		return transcript.ClientToServer, e.Frame, true
	case *transcript.Observation:
		if e.Kind != transcript.ObsResponse && e.Kind != transcript.ObsLateResponse {
			return "", nil, false
		}
		return transcript.ServerToClient, e.Frame, true
	case *transcript.Notification:
		return e.Direction, e.Frame, true
	case *transcript.Frame:
		i := e.Index
		return e.Direction, &i, true
	}
	return "", nil, false
}

// trackOpen follows which requests are waiting for a response.
func (b *bundleCheck) trackOpen(ev any) {
	fr := &b.fr
	if fr.openCall == nil {
		fr.openCall, fr.openByID, fr.openOther, fr.shared = map[string]string{}, map[string]int{}, map[string]int{}, map[string]bool{}
		fr.openByMatch, fr.settledBy = map[string]int{}, map[string]string{}
	}
	forget := func(t string) {
		if fr.openByID[t] == 0 && fr.openOther[t] == 0 {
			delete(fr.shared, t)
		}
	}
	settle := func(attempt string, answered bool) {
		if t, ok := fr.openCall[attempt]; ok {
			mk := matchKey(t)
			if fr.openByMatch[mk]--; fr.openByMatch[mk] <= 0 {
				delete(fr.openByMatch, mk)
			}
			if answered && len(fr.settledBy) < maxSettledTracked {
				fr.settledBy[mk] = attempt
			}
			delete(fr.openCall, attempt)
			if fr.openByID[t]--; fr.openByID[t] <= 0 {
				delete(fr.openByID, t)
			}
			forget(t)
		}
	}
	switch e := ev.(type) {
	case *transcript.Attempt:
		if e.RPCID.Present && e.RPCID.Text != "" {
			if _, dup := fr.openCall[e.AttemptID]; !dup {
				fr.openCall[e.AttemptID] = e.RPCID.Text
				fr.openByID[e.RPCID.Text]++
				mk := matchKey(e.RPCID.Text)
				fr.openByMatch[mk]++
				delete(fr.settledBy, mk) // the id is in use again
				if fr.openOther[e.RPCID.Text] > 0 {
					fr.shared[e.RPCID.Text] = true
				}
			}
		}
	case *transcript.Observation:
		switch e.Kind {
		case transcript.ObsResponse, transcript.ObsLateResponse, transcript.ObsTransportFailure:
			settle(e.AttemptID, true)
		}
	case *transcript.Resolution:
		settle(e.AttemptID, false)
	case *transcript.Frame:
		if e.RPCID == nil || e.RPCID.Text == "" || e.Disposition == transcript.FrameRefused {
			return
		}
		t := e.RPCID.Text
		switch {
		case e.Direction == transcript.ClientToServer && e.Kind == transcript.FrameRequest:
			fr.openOther[t]++
			if fr.openByID[t] > 0 {
				fr.shared[t] = true
			}
		case e.Direction == transcript.ServerToClient && e.Kind == transcript.FrameResponse:
			if fr.openOther[t] > 0 {
				if fr.openOther[t]--; fr.openOther[t] == 0 {
					delete(fr.openOther, t)
				}
				forget(t)
				return
			}
			subject := fmt.Sprintf("frame %s %d (seq %d)", e.Direction, e.Index, e.Seq)
			if fr.openByID[t] == 1 && !fr.shared[t] && e.Disposition == transcript.FrameForwarded {
				fr.bad++
				b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, subject,
					"a response to the one call waiting under id "+quote(t)+", committed as a plain frame: a call's response is committed by its observation, so its outcome cannot be hidden as unknown")
				return
			}
			if e.Disposition != transcript.FrameForwarded || fr.openByID[t] > 0 {
				return
			}
			for _, k := range responseKeys(t) {
				if fr.openByMatch[k] > 0 {
					fr.bad++
					b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, subject,
						"a response under id "+quote(t)+", which a client matches to a call waiting under another spelling of it, delivered as a plain frame: the client may have taken it as the call's answer, which the evidence does not bind")
					return
				}
				if a, ok := fr.settledBy[k]; ok {
					fr.bad++
					b.r.add(CodeResponseAfterSettlement, checkTranscript, StatusFail, subject,
						"a response under id "+quote(t)+" delivered after attempt "+a+" had its answer under that id (as a client matches ids): the client may have acted on this one, which the evidence does not bind")
					return
				}
			}
			if b.header.Format == transcript.Format {
				fr.bad++
				b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, subject,
					"a response under id "+quote(t)+", which names no open request, delivered: a mediating producer refuses it (unsolicited_response), since a client whose request the producer had not read yet would take it as the answer")
			}
		}
	}
}

// onFrame checks a frame line's claims against its retained bytes: the
// gate's reading of them (transcript.DeriveFrame) must be what the line
// says.
func (b *bundleCheck) onFrame(f *transcript.Frame) {
	b.fr.lines++
	if f.Disposition == transcript.FrameRefused {
		if f.Direction == transcript.ServerToClient {
			b.fr.refusedS2C++
		} else {
			b.fr.refused++
		}
	}
	if f.AttemptID != "" && !b.partial {
		if _, ok := b.attempts.get(f.AttemptID); !ok {
			b.conflict(CodeHistoryConflict, "attempt "+f.AttemptID, fmt.Sprintf("frame %s %d at seq %d names no earlier attempt", f.Direction, f.Index, f.Seq))
		}
	}
	subject := fmt.Sprintf("frame %s %d (seq %d)", f.Direction, f.Index, f.Seq)
	b.frameRules(f, f.Kind, f.Method, subject)
	if f.Rule == "frame_too_large" {
		// Longer than the producer's gate reads (a limit of the producer,
		// not of the bytes): the line claims nothing else, and only the
		// bytes' digest and length are checked.
		b.payload(f.Payload, subject, false)
		return
	}
	body, ok := b.payload(f.Payload, subject, true)
	if !ok {
		return
	}
	var d diffs
	var got transcript.FrameFacts
	if body == nil {
		// Longer than any gate reads: the gate's reading is "too large".
		got = transcript.FrameFacts{Kind: transcript.FrameUnread, Rule: "frame_too_large"}
	} else {
		line := append(body, terminatorBytes(f.Terminator)...)
		got = transcript.DeriveFrame(line)
		b.body = line[:len(body)]
	}
	d.str("kind", f.Kind, got.Kind)
	if got.Kind != transcript.FrameUnread && f.Direction == transcript.ServerToClient && f.Disposition == transcript.FrameRefused && isServerRule(f.Rule) {
		got.Rule = f.Rule // a mediation rule: the bytes are read, and refused for where they came
	}
	d.str("rule", f.Rule, got.Rule)
	d.str("method", f.Method, got.Method)
	switch {
	case f.RPCID == nil && got.RPCID == nil:
	case f.RPCID == nil:
		d.text("jsonrpc_id", "absent", "present")
	case got.RPCID == nil:
		d.text("jsonrpc_id", "present", "absent")
	default:
		idClaims(&d, "jsonrpc_id", *f.RPCID, *got.RPCID)
	}
	if len(d) == 0 && (got.Kind != f.Kind || got.Method != f.Method) {
		b.frameRules(f, got.Kind, got.Method, subject)
	}
	if body != nil && f.Direction == transcript.ServerToClient && b.header != nil && b.header.Format == transcript.Format {
		b.clientReadable(f, b.body, subject)
	}
	b.mismatchClaims(subject, "the frame line", d)
}

// frameRules judges what a frame line says it did with a frame of this
// kind and method (spec/transcript.md, "frame"): the rules a reference
// monitor's transcript keeps whatever its bytes.
func (b *bundleCheck) frameRules(f *transcript.Frame, kind, method, subject string) {
	bad := func(why string) {
		b.fr.bad++
		b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, subject, why)
	}
	c2s := f.Direction == transcript.ClientToServer
	if b.headerRefused(f) {
		return // refused for its HTTP headers, which the gate reads besides the bytes (http.go)
	}
	mediated := b.header != nil && b.header.Format == transcript.Format // v4: server frames are mediated
	switch {
	case !c2s && f.Disposition == transcript.FrameRefused && !mediated:
		bad("a server frame marked refused in a transcript before " + transcript.Format + ", which never refuses server frames")
	case !c2s && kind == transcript.FrameUnread && f.Disposition == transcript.FrameForwarded && mediated:
		bad("a server frame the gate cannot read (" + f.Rule + ") marked forwarded: a mediating producer never delivers it")
	case !c2s && f.Disposition == transcript.FrameRefused && kind != transcript.FrameUnread && !isServerRule(f.Rule):
		bad("a server frame the gate reads as a " + kind + " marked refused without a mediation rule (" + boundedQuote(f.Rule) + ")")
	case c2s && method == mcpwire.MethodToolsCall:
		bad("a client tools/call committed as a plain frame (" + f.Disposition + "): a call is committed by an attempt line, before it is forwarded")
	case c2s && kind == transcript.FrameUnread && f.Disposition != transcript.FrameRefused:
		bad("a client frame the gate cannot read (" + f.Rule + ") marked " + f.Disposition + ": it is never forwarded")
	case c2s && f.Disposition == transcript.FrameRefused && kind != transcript.FrameUnread:
		bad("a client frame the gate reads as a " + kind + " marked refused")
	case f.Rule == string(mcpwire.RuleTooLarge) && f.Payload.Length <= mcpwire.MaxFrameBytes:
		bad(fmt.Sprintf("frame_too_large on %d bytes, within the gate's limit of %d", f.Payload.Length, mcpwire.MaxFrameBytes))
	case f.Disposition == transcript.FrameWithheld && kind != transcript.FrameResponse && f.Rule != string(mcpwire.RuleTooLarge):
		bad("a withheld frame that is neither a response nor too large to spool: the proxy withholds only a response to an id it answered itself, or a frame it cannot hold whole")
	case c2s && f.Disposition == transcript.FrameWithheld && !recorderElicitID(f.RPCID):
		bad("a client response withheld under an id not of the recorder's own elicitation requests (\"" + approval.ElicitIDPrefix + "...\"): a client's answer is withheld only when it answers the recorder's own request, any other is forwarded")
	}
}

// recorderElicitID says whether a frame's id is a JSON string in the
// recorder's namespace of elicitation request ids (approval.ElicitIDPrefix),
// as the producer reads it (decoded).
func recorderElicitID(id *transcript.JSONRPCID) bool {
	if id == nil {
		return false
	}
	var s string
	if err := json.Unmarshal([]byte(id.Text), &s); err != nil {
		return false
	}
	return strings.HasPrefix(s, approval.ElicitIDPrefix)
}

func terminatorBytes(t string) []byte {
	switch t {
	case mcpwire.TermLF:
		return []byte{'\n'}
	case mcpwire.TermCRLF:
		return []byte{'\r', '\n'}
	}
	return nil
}

// finishFrames reports the frame accounting of a transcript that commits
// to every frame.
func (b *bundleCheck) finishFrames() {
	if b.header == nil || !b.header.FramesCommitted || b.partial {
		return
	}
	if b.fr.refused > 0 {
		b.r.add(CodeFramesRefused, checkTranscript, StatusInfo, "frames",
			fmt.Sprintf("%d client frames were refused by the producer's gate: committed, answered with an error, never forwarded to the server", b.fr.refused))
	}
	if b.fr.refusedS2C > 0 {
		b.r.add(CodeServerFramesRefused, checkTranscript, StatusInfo, "frames",
			fmt.Sprintf("%d server frames were refused (by the gate, or as answers a client could misattribute): committed, never delivered to the client", b.fr.refusedS2C))
	}
	if b.fr.bad == 0 && b.malformedAt < 0 {
		b.r.add(CodeFramesAccounted, checkTranscript, StatusPass, "frames",
			fmt.Sprintf("%d client and %d server frames, each committed once, in order", b.fr.next[transcript.ClientToServer], b.fr.next[transcript.ServerToClient]))
	}
}

// notificationRules: a client tools/call is committed by an attempt line,
// never by a notification line, id or no id.
func (b *bundleCheck) notificationRules(n *transcript.Notification) {
	if n.Direction == transcript.ClientToServer && n.Method == mcpwire.MethodToolsCall {
		b.fr.bad++
		b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, fmt.Sprintf("notification %s (seq %d)", n.Method, n.Seq),
			"a client tools/call committed as a notification line: a call is committed by an attempt line, before it is forwarded")
	}
}

// maxSettledTracked bounds the answered calls remembered by id: the
// producer's bound (session.MaxSettled), which a verifier must not import.
const maxSettledTracked = 1 << 20

// matchKey is mcpwire.MatchKey of an id's exact JSON text.
func matchKey(text string) string {
	doc, err := canon.Parse([]byte(text), canon.ParseOptions{})
	if err != nil {
		return "t:" + text
	}
	return mcpwire.MatchKey(doc.Root())
}

// responseKeys is mcpwire.ResponseKeys of an id's exact JSON text.
func responseKeys(text string) []string {
	doc, err := canon.Parse([]byte(text), canon.ParseOptions{})
	if err != nil {
		return []string{"t:" + text}
	}
	return mcpwire.ResponseKeys(doc.Root())
}

// isServerRule reports whether a rule is one of mediation's
// (mcpwire.ServerRules).
func isServerRule(r string) bool {
	for _, x := range mcpwire.ServerRules {
		if string(x) == r {
			return true
		}
	}
	return false
}

// clientReadable re-derives mediation's reading of a v4 server frame the
// gate reads: one that real clients read differently (mcpwire's
// ClientReadable, or white space after the object) is never delivered, and
// one refused for that reason must be one.
func (b *bundleCheck) clientReadable(f *transcript.Frame, body []byte, subject string) {
	m, ref := mcpwire.Read(append(append([]byte(nil), body...), '\n'))
	if ref != nil {
		return
	}
	differs := m.ClientReadable() != nil || len(body) > 0 && body[len(body)-1] != '}'
	switch {
	case differs && f.Disposition == transcript.FrameForwarded:
		b.fr.bad++
		b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, subject,
			"a server frame real clients read differently ("+string(mcpwire.RuleClientSchema)+" or "+string(mcpwire.RulePadded)+") marked forwarded: a mediating producer never delivers it")
	case !differs && f.Disposition == transcript.FrameRefused && (f.Rule == string(mcpwire.RuleClientSchema) || f.Rule == string(mcpwire.RulePadded)):
		b.fr.bad++
		b.r.add(CodeFrameMisrecorded, checkTranscript, StatusFail, subject,
			"a server frame refused as "+f.Rule+" that every client reads as the gate does")
	}
}
