package clientread

import (
	"strings"
	"unicode/utf8"
)

// WHATWG returns the events that the HTML standard's event stream
// interpretation dispatches for stream, read to its end
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
//
// The stream is decoded by the Encoding standard's "UTF-8 decode": one leading
// BOM is stripped and each maximal invalid subpart becomes one U+FFFD. Lines
// end at CRLF, LF or a lone CR; a CR that is the stream's last byte ends its
// line. Event.Type is the event type buffer ("" where a browser would say
// "message"); Event.ID is the last event ID string at dispatch, which carries
// over from earlier events until an id field changes it (an empty id field
// resets it to ""). A final event without its blank line is not dispatched;
// the retry field changes no event and is not reported.
func WHATWG(stream []byte) []Event {
	text := utf8DecodeWHATWG(stream)
	var (
		events                     []Event
		data, eventType            strings.Builder
		lastIDBuffer, lastIDString string
	)
	dispatch := func() {
		lastIDString = lastIDBuffer
		if data.Len() == 0 {
			eventType.Reset()
			return
		}
		d := strings.TrimSuffix(data.String(), "\n")
		events = append(events, Event{Type: eventType.String(), Data: d, ID: lastIDString})
		data.Reset()
		eventType.Reset()
	}
	process := func(line string) {
		if line == "" {
			dispatch()
			return
		}
		if line[0] == ':' {
			return
		}
		field, value := line, ""
		if i := strings.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			eventType.Reset()
			eventType.WriteString(value)
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				lastIDBuffer = value
			}
		case "retry":
			// Sets the reconnection time only; no event changes.
		}
	}
	for len(text) > 0 {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			break // pending data at the end of the stream is discarded
		}
		process(text[:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
	return events
}

// utf8DecodeWHATWG is the Encoding standard's "UTF-8 decode": strip one
// leading BOM, then decode with replacement, one U+FFFD per maximal subpart
// (Go's own decoding yields one per byte, and strings.ToValidUTF8 one per
// run, so neither matches a browser's or Node's TextDecoder).
func utf8DecodeWHATWG(b []byte) string {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	return utf8DecodeReplace(b)
}

// utf8DecodeReplace is the Encoding standard's UTF-8 decoder without the BOM
// step, as Node's Buffer.toString("utf8") decodes.
func utf8DecodeReplace(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	var (
		needed, seen int
		cp           rune
		lower, upper byte = 0x80, 0xBF
	)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if needed == 0 {
			switch {
			case c <= 0x7F:
				out.WriteByte(c)
			case c >= 0xC2 && c <= 0xDF:
				needed, cp = 1, rune(c&0x1F)
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				}
				if c == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(c&0x0F)
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				}
				if c == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(c&0x07)
			default:
				out.WriteRune(utf8.RuneError)
			}
			continue
		}
		if c < lower || c > upper {
			needed, seen, cp, lower, upper = 0, 0, 0, 0x80, 0xBF
			out.WriteRune(utf8.RuneError)
			i-- // the byte is read again as the start of a sequence
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(c&0x3F)
		seen++
		if seen == needed {
			out.WriteRune(cp)
			needed, seen, cp = 0, 0, 0
		}
	}
	if needed != 0 {
		out.WriteRune(utf8.RuneError)
	}
	return out.String()
}
