package mcpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// Event is one server-sent event as the gate reads it from an upstream
// stream (spec/http.md, "SSE").
type Event struct {
	// Raw is the event's exact bytes through the blank line that ends it,
	// blank lines before it excluded: what is delivered when it is.
	Raw []byte
	// Data is the event's one data line's value (one leading space
	// removed); nil when it has none. It is the frame the gate reads.
	Data []byte
	// Refusal, when set, says why not every reader reads the event as the
	// gate does: it is committed and not delivered.
	Refusal *Refusal
	// Name is the value of the event's one event line ("" when it has
	// none or several): the deprecated HTTP+SSE transport's first event
	// is named "endpoint".
	Name string
}

// EventReader reads an SSE stream one event at a time. An event is
// delivered only if WHATWG's event stream interpretation, the
// eventsource-parser package (the TypeScript SDK's) and the Go SDK's
// reader all read exactly one message event with the same data from it:
// LF or CRLF line ends only, no byte order mark, only data, event, id and
// retry fields and comments, at most one data line and one event line, and
// an event name that is absent or exactly "message".
type EventReader struct {
	br    *bufio.Reader
	first bool
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, 64<<10), first: true}
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// with a last event refused as RuleSSEUnfinished when the stream ended
// inside one. Other errors are the stream's; an event over MaxFrameBytes
// is returned refused (ruleSSETooLarge) with Raw cut at the limit, and
// the stream cannot be read further (ErrEventTooLarge).
func (r *EventReader) Next() (Event, error) {
	var ev Event
	refuse := func(rule Rule, detail string) {
		if ev.Refusal == nil {
			ev.Refusal = &Refusal{Rule: rule, Detail: detail, ID: "null"}
		}
	}
	dataLines, eventLines := 0, 0
	for {
		line, err := r.readLine(int64(len(ev.Raw)))
		if errors.Is(err, ErrEventTooLarge) {
			ev.Raw = append(ev.Raw, line...)
			ev.Data = nil
			ev.Refusal = &Refusal{Rule: ruleSSETooLarge, Detail: "an event over the gate's limit of " + strconv.FormatInt(MaxFrameBytes, 10) + " bytes", ID: "null"}
			return ev, err
		}
		if r.first && len(line) > 0 {
			r.first = false
			if bytes.HasPrefix(line, bom) {
				refuse(ruleSSEBOM, "a UTF-8 byte order mark before the first event")
				ev.Raw = append(ev.Raw, bom...)
				line = line[len(bom):] // read on as WHATWG does, to know what it carried
			}
		}
		if err != nil {
			if len(line) > 0 || len(ev.Raw) > 0 {
				ev.Raw = append(ev.Raw, line...)
				ev.Data = nil
				ev.Refusal = &Refusal{Rule: RuleSSEUnfinished, Detail: "the stream ended inside an event", ID: "null"}
			}
			return ev, err
		}
		body := line[:len(line)-1] // without the LF
		if n := len(body); n > 0 && body[n-1] == '\r' {
			body = body[:n-1]
		}
		if i := bytes.IndexByte(body, '\r'); i >= 0 {
			refuse(ruleSSEBareCR, "a CR not followed by LF at byte "+strconv.Itoa(len(ev.Raw)+i)+" of the event")
		}
		if len(body) == 0 {
			if len(ev.Raw) == 0 {
				continue // a blank line between events: no event
			}
			ev.Raw = append(ev.Raw, line...)
			return ev, nil
		}
		ev.Raw = append(ev.Raw, line...)
		if body[0] == ':' {
			continue // a comment
		}
		name, value, ok := bytes.Cut(body, []byte{':'})
		if !ok {
			refuse(ruleSSEField, "a line without a colon")
			continue
		}
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(name) {
		case "data":
			dataLines++
			if dataLines > 1 {
				refuse(ruleSSEDataLines, "more than one data line")
				continue
			}
			ev.Data = append([]byte{}, value...)
		case "event":
			eventLines++
			ev.Name = ""
			if eventLines == 1 {
				ev.Name = string(value)
			}
			switch {
			case eventLines > 1:
				refuse(ruleSSEEventName, "more than one event line")
			case string(value) != "message":
				refuse(ruleSSEEventName, "event name "+bounded(string(value))+", not \"message\"")
			}
		case "id", "retry":
		default:
			refuse(ruleSSEField, "field "+bounded(string(name)))
		}
	}
}

// ErrEventTooLarge: an SSE event over MaxFrameBytes; the stream is not
// read further.
var ErrEventTooLarge = errors.New("an SSE event over the gate's limit")

// readLine reads one line through its LF; have is how much of the event
// is read already (the bound covers the whole event).
func (r *EventReader) readLine(have int64) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if have+int64(len(buf)+len(chunk)) > MaxFrameBytes {
			return append(buf, chunk...), ErrEventTooLarge
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		}
		return buf, err
	}
}
