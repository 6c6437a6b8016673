package verify

import (
	"fmt"

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
)

// frameState follows the frame numbering of both directions.
type frameState struct {
	next    map[string]int64 // per direction: the index expected next
	bad     int64            // frame_sequence findings
	refused int64
	lines   int64 // frame lines
}

// frames checks the frame index a line carries against the sequence of its
// direction. It runs for every decoded line, before interpretation.
func (b *bundleCheck) frames(idx int64, ev any) {
	if b.header == nil || b.partial {
		return
	}
	dir, index, framed := frameOf(ev)
	if !framed {
		return
	}
	subject := lineSubject(idx)
	if !b.header.FramesCommitted {
		if index != nil || isFrameLine(ev) {
			b.fr.bad++
			b.r.add(CodeFrameSequence, CheckTranscript, StatusFail, subject,
				"a frame index or frame line in a transcript whose header does not commit to frames")
		}
		return
	}
	if index == nil {
		b.fr.bad++
		b.r.add(CodeFrameSequence, CheckTranscript, StatusFail, subject,
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
		b.r.add(CodeFrameSequence, CheckTranscript, StatusFail, subject,
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

// onFrame checks a frame line's claims against its retained bytes: the
// gate's reading of them (transcript.DeriveFrame) must be what the line
// says.
func (b *bundleCheck) onFrame(f *transcript.Frame) {
	b.fr.lines++
	if f.Disposition == transcript.FrameRefused {
		b.fr.refused++
	}
	if f.AttemptID != "" && !b.partial {
		if _, ok := b.attempts[f.AttemptID]; !ok {
			b.conflict(CodeHistoryConflict, "attempt "+f.AttemptID, fmt.Sprintf("frame %s %d at seq %d names no earlier attempt", f.Direction, f.Index, f.Seq))
		}
	}
	subject := fmt.Sprintf("frame %s %d (seq %d)", f.Direction, f.Index, f.Seq)
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
	b.mismatchClaims(subject, "the frame line", d)
}

func terminatorBytes(t string) []byte {
	switch t {
	case transcript.TermLF:
		return []byte{'\n'}
	case transcript.TermCRLF:
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
		b.r.add(CodeFramesRefused, CheckTranscript, StatusInfo, "frames",
			fmt.Sprintf("%d client frames were refused by the producer's gate: committed, answered with an error, never forwarded to the server", b.fr.refused))
	}
	if b.fr.bad == 0 && b.malformedAt < 0 {
		b.r.add(CodeFramesAccounted, CheckTranscript, StatusPass, "frames",
			fmt.Sprintf("%d client and %d server frames, each committed once, in order", b.fr.next[transcript.ClientToServer], b.fr.next[transcript.ServerToClient]))
	}
}
