package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/tracectl/tracectl/canon"
)

// Line error codes: stable, documented in spec/transcript.md ("Line
// errors"), never renamed.
const (
	CodeTooLong           = "too_long"           // a line longer than MaxLineBytes
	CodeTornLine          = "torn_line"          // bytes after the last LF: a write cut short
	CodeNotCanonical      = "not_canonical"      // not JSON, or not its own RFC 8785 form under the v0.2 policy
	codeUnknownType       = "unknown_type"       // "type" missing, not a string, or not an event type
	CodeInvalidMember     = "invalid_member"     // a member missing, unknown, of the wrong type, or with a value the format forbids
	CodeUnsupportedFormat = "unsupported_format" // a header naming another format, profile, Merkle algorithm or canonicalization
	CodeSeqGap            = "seq_gap"            // seq is not the line's 0-based position
	CodeHeaderMissing     = "header_missing"     // the first line is not a header, or the transcript is empty
	CodeHeaderRepeated    = "header_repeated"    // a header after line 0
	CodeAfterSeal         = "after_seal"         // a line after the seal line
	codeScopeMismatch     = "scope_mismatch"     // an attempt names another execution scope than the header
)

// LineError reports a transcript line that is not valid. Seq is the line's
// 0-based position when a Reader found it, or the line's own seq member
// from DecodeLine (-1 when unreadable). Offset is the byte offset of the
// line in the stream (Reader only; -1 otherwise).
type LineError struct {
	Seq    int64
	Offset int64
	Code   string
	Detail string
	Err    error // the underlying cause (e.g. a *canon.Error), or nil
}

func (e *LineError) Error() string {
	return fmt.Sprintf("transcript line %d: %s: %s", e.Seq, e.Code, e.Detail)
}

func (e *LineError) Unwrap() error { return e.Err }

func lineErr(seq int64, code, detail string, err error) *LineError {
	return &LineError{Seq: seq, Offset: -1, Code: code, Detail: detail, Err: err}
}

// DecodeLine strictly decodes one transcript line (without its LF) into a
// *Header, *Protocol, *SnapshotEvent, *Notification, *Attempt,
// *Observation, *Resolution, *Recovery, *Seal or *Frame.
//
// The line must be canonical under canon.PolicyV02, of a known type, with
// every required member present, no unknown member, optional members absent
// rather than empty, and member values the format allows. The decoded value
// re-encodes to exactly the given bytes. Errors are *LineError.
func DecodeLine(line []byte) (Event, error) {
	if len(line) > MaxLineBytes {
		return nil, lineErr(-1, CodeTooLong, fmt.Sprintf("%d bytes, limit %d", len(line), MaxLineBytes), nil)
	}
	if ev := decodeFast(line); ev != nil {
		if err := validate(ev); err != nil {
			return nil, err.withSeq(SeqOf(ev))
		}
		return ev, nil
	}
	return decodeStrict(line)
}

// decodeFast accepts a line only when it decodes (decodefast.go, without
// reflection) into the event type its "type" member names and Encode gives
// back exactly its bytes. Encode's
// output is canonical (it equals canon.Marshal), so such a line is
// canonical, has every required member, no unknown or repeated member and
// no empty optional one: decodeStrict would accept it too. Anything else,
// including every invalid line, goes to decodeStrict, which says why.
func decodeFast(line []byte) Event {
	const key = `"type":"`
	// "type" sorts after most members, so a canonical line usually ends
	// with it: look there before scanning the whole line. Which occurrence
	// is found only picks the decoder to try; a line is accepted only when
	// it is exactly what Encode writes for what was decoded.
	var rest []byte
	tail := line[max(0, len(line)-64):]
	if i := bytes.LastIndex(tail, []byte(key)); i >= 0 {
		rest = tail[i+len(key):]
	} else if i := bytes.Index(line, []byte(key)); i >= 0 {
		rest = line[i+len(key):]
	} else {
		return nil
	}
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil
	}
	ev := decodeEvent(string(rest[:j]), line)
	if ev == nil {
		return nil
	}
	if !encodesTo(ev, line) {
		return nil
	}
	return ev
}

// encoders are reused by encodesTo: DecodeLine runs on every verified
// line, and a fresh buffer per line was most of what it allocated.
var encoders = sync.Pool{New: func() any { return &encoder{b: make([]byte, 0, 1024)} }}

// encodesTo says whether Encode(ev) is exactly line, encoding into a
// pooled encoder with the same encode method Encode calls.
func encodesTo(ev Event, line []byte) bool {
	e := encoders.Get().(*encoder)
	e.b, e.first, e.last, e.err = e.b[:0], e.firstA[:0], e.lastA[:0], nil
	ev.encode(e)
	ok := e.err == nil && bytes.Equal(e.b, line)
	clear(e.lastA[:]) // keep no strings of the line alive
	e.last = nil
	if cap(e.b) <= 64<<10 {
		encoders.Put(e)
	}
	return ok
}

// decodeStrict is DecodeLine's reference path: canonical check, type,
// strict decoding, re-encoding with canon.Marshal, validation.
func decodeStrict(line []byte) (Event, error) {
	doc, err := canon.Parse(line, canon.ParseOptions{})
	if err != nil {
		return nil, lineErr(-1, CodeNotCanonical, err.Error(), err)
	}
	root := doc.Root()
	// One parse serves the canonical check (canon.Check without reparsing)
	// and the type lookup.
	if c, err := root.Canonical(canon.PolicyV02); err != nil {
		return nil, lineErr(-1, CodeNotCanonical, err.Error(), err)
	} else if !bytes.Equal(c, line) {
		off := 0
		for off < len(c) && off < len(line) && c[off] == line[off] {
			off++
		}
		err := fmt.Errorf("%w: first difference at byte %d", canon.ErrNotCanonical, off)
		return nil, lineErr(-1, CodeNotCanonical, err.Error(), err)
	}
	if root.Kind() != canon.KindObject {
		return nil, lineErr(-1, codeUnknownType, "a line is a JSON object, got "+root.Kind().String(), nil)
	}
	seq := int64(-1)
	if sv, ok := root.Get("seq"); ok && sv.Kind() == canon.KindNumber {
		if n, err := strconv.ParseInt(string(sv.Raw()), 10, 64); err == nil {
			seq = n
		}
	}
	tv, ok := root.Get("type")
	if !ok {
		return nil, lineErr(seq, codeUnknownType, `no "type" member`, nil)
	}
	typ, ok := tv.Str()
	if !ok {
		return nil, lineErr(seq, codeUnknownType, `"type" is not a string`, nil)
	}
	ev := newEvent(typ)
	if ev == nil {
		return nil, lineErr(seq, codeUnknownType, "unknown event type "+strconv.QuoteToASCII(bounded(typ)), nil)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ev); err != nil {
		return nil, lineErr(seq, CodeInvalidMember, err.Error(), err)
	}
	// encoding/json matches member names case-insensitively and fills
	// missing members with zero values; re-encoding and comparing bytes
	// catches both, and empty optional members that should be absent.
	again, err := canon.Marshal(ev)
	if err != nil {
		return nil, lineErr(seq, CodeInvalidMember, err.Error(), err)
	}
	if !bytes.Equal(again, line) {
		return nil, lineErr(seq, CodeInvalidMember, describeDiff(line, again), nil)
	}
	if err := validate(ev); err != nil {
		return nil, err.withSeq(seq)
	}
	return ev, nil
}

func newEvent(typ string) Event {
	switch typ {
	case typeHeader:
		return new(Header)
	case typeProtocol:
		return new(Protocol)
	case typeSnapshot:
		return new(SnapshotEvent)
	case typeNotification:
		return new(Notification)
	case typeAttempt:
		return new(Attempt)
	case typeObservation:
		return new(Observation)
	case typeResolution:
		return new(Resolution)
	case typeRecovery:
		return new(Recovery)
	case typeSeal:
		return new(Seal)
	case typeFrame:
		return new(Frame)
	case typeSession:
		return new(SessionEvent)
	case typeHTTP:
		return new(HTTPEvent)
	}
	return nil
}

// describeDiff names the first member where the line and its re-encoding
// differ: a member the line lacks (required), one it has that the format
// does not (unknown, misspelt, or empty where it must be absent).
func describeDiff(line, again []byte) string {
	a, err1 := canon.Parse(line, canon.ParseOptions{})
	b, err2 := canon.Parse(again, canon.ParseOptions{})
	if err1 != nil || err2 != nil {
		return "does not re-encode to the same bytes"
	}
	if d := diffValues(a.Root(), b.Root(), ""); d != "" {
		return d
	}
	return "does not re-encode to the same bytes"
}

func diffValues(got, want canon.Value, ptr string) string {
	if got.Kind() != want.Kind() {
		return fmt.Sprintf("member %s: unexpected %s", ptrOrRoot(ptr), got.Kind())
	}
	switch got.Kind() {
	case canon.KindObject:
		for _, m := range want.Members() {
			g, ok := got.Get(m.Name)
			if !ok {
				return fmt.Sprintf("required member %s/%s is missing", ptr, m.Name)
			}
			if d := diffValues(g, m.Value, ptr+"/"+m.Name); d != "" {
				return d
			}
		}
		for _, m := range got.Members() {
			if _, ok := want.Get(m.Name); !ok {
				return fmt.Sprintf("member %s/%s is not allowed here (unknown, or empty where it must be absent)", ptr, m.Name)
			}
		}
	case canon.KindArray:
		ge, we := got.Elems(), want.Elems()
		for i := 0; i < len(ge) && i < len(we); i++ {
			if d := diffValues(ge[i], we[i], ptr+"/"+strconv.Itoa(i)); d != "" {
				return d
			}
		}
		if len(ge) != len(we) {
			return fmt.Sprintf("member %s: %d elements, want %d", ptrOrRoot(ptr), len(ge), len(we))
		}
	default:
		if !bytes.Equal(got.Raw(), want.Raw()) {
			return fmt.Sprintf("member %s: value does not round-trip", ptrOrRoot(ptr))
		}
	}
	return ""
}

func ptrOrRoot(p string) string {
	if p == "" {
		return `""`
	}
	return p
}

func bounded(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
