package clientread

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// GoSDKVersion is the Go MCP SDK release whose readers this file copies; a
// test checks that go.mod requires that version, so an upgrade cannot leave
// a stale copy behind.
const GoSDKVersion = "v1.8.0"

// GoSDK returns the events that the Go MCP SDK's SSE reader yields for
// stream, and the error that ends its iteration, if any. The Go SDK's
// streamable and SSE clients fail the connection on that error, after acting
// on the events before it.
//
// The reader is unexported in the SDK, so goSDKScanEvents is a copy of it.
// Unlike [WHATWG] it reads no BOM and no lone CR as a line end, trims all
// white space (Unicode's, not only one space) around every value, fails on a
// line that has no colon, dispatches a final event that has no blank line,
// skips events with no field at all, and reports each event's own id (not
// one carried over).
func GoSDK(stream []byte) ([]Event, error) {
	var events []Event
	// The streamable client passes its MaxEventSize, 0 unless set, which
	// v1.8.0's scanEventsLimited reads as "no cap" (its doc says 0 selects
	// DefaultMaxEventSize; only the SSE client does that).
	for evt, err := range goSDKScanEvents(bytes.NewReader(stream), 0) {
		if err != nil {
			return events, err
		}
		events = append(events, Event{Type: evt.Name, Data: string(evt.Data), ID: evt.ID})
	}
	return events, nil
}

// GoSDKMessages returns the data of the events that the Go SDK's streamable
// client (mcp/streamable.go, processStream, v1.8.0) hands to
// jsonrpc.DecodeMessage: it skips events whose data is empty and events whose
// name is neither "" nor "message". The error is GoSDK's. A data the decoder
// rejects fails the whole connection in the client, so the messages after it
// are never read; see [GoSDKDecode].
func GoSDKMessages(stream []byte) ([][]byte, error) {
	events, err := GoSDK(stream)
	var msgs [][]byte
	for _, e := range events {
		if len(e.Data) == 0 {
			continue
		}
		if e.Type != "" && e.Type != "message" {
			continue
		}
		msgs = append(msgs, []byte(e.Data))
	}
	return msgs, err
}

// GoSDKDecode is the Go SDK's own jsonrpc.DecodeMessage, what both its HTTP
// client transports and its stdio transport use on one message, followed by
// jsonrpc.EncodeMessage, so that what the SDK understood can be compared as
// bytes. The Go SDK decodes with a json.Decoder: bytes after the first JSON
// value are ignored, not refused.
func GoSDKDecode(data []byte) (jsonrpc.Message, []byte, error) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, nil, err
	}
	enc, err := jsonrpc.EncodeMessage(msg)
	return msg, enc, err
}

// goSDKEvent is mcp.Event from go-sdk v1.8.0 mcp/event.go.
type goSDKEvent struct {
	Name  string // the "event" field
	ID    string // the "id" field
	Data  []byte // the "data" field
	Retry string // the "retry" field
}

func (e goSDKEvent) Empty() bool {
	return e.Name == "" && e.ID == "" && len(e.Data) == 0 && e.Retry == ""
}

var (
	errGoSDKMalformedEvent = errors.New("malformed event")
	errGoSDKEventTooLarge  = errors.New("SSE event exceeded maximum size")
)

// goSDKScanEvents is scanEventsLimited from
// github.com/modelcontextprotocol/go-sdk@v1.8.0/mcp/event.go, copied line for
// line (only names changed) because the SDK does not export it.
// TestGoSDKCopyMatchesClient checks it against the SDK's streamable client.
func goSDKScanEvents(r io.Reader, maxEventSize int) iter.Seq2[goSDKEvent, error] {
	reader := bufio.NewReader(r)

	var (
		eventKey = []byte("event")
		idKey    = []byte("id")
		dataKey  = []byte("data")
		retryKey = []byte("retry")
	)

	return func(yield func(goSDKEvent, error) bool) {
		var (
			evt        goSDKEvent
			dataBuf    *bytes.Buffer // if non-nil, preceding field was also data
			eventBytes int           // bytes read for the current, in-progress event
		)
		yieldEvent := func() bool {
			if dataBuf != nil {
				evt.Data = dataBuf.Bytes()
				dataBuf = nil
			}
			if evt.Empty() {
				return true
			}
			if !yield(evt, nil) {
				return false
			}
			evt = goSDKEvent{}
			return true
		}
		for {
			budget := -1
			if maxEventSize > 0 {
				budget = maxEventSize - eventBytes
			}
			line, err := goSDKReadEventLine(reader, budget)
			if errors.Is(err, errGoSDKEventTooLarge) {
				yield(goSDKEvent{}, fmt.Errorf("%w: SSE event exceeded %d bytes without terminating", errGoSDKMalformedEvent, maxEventSize))
				return
			}
			if err != nil && !errors.Is(err, io.EOF) {
				yield(goSDKEvent{}, fmt.Errorf("error reading event: %v", err))
				return
			}
			eventBytes += len(line)
			line = bytes.TrimRight(line, "\r\n")
			isEOF := errors.Is(err, io.EOF)

			if len(line) == 0 {
				if !yieldEvent() {
					return
				}
				eventBytes = 0 // reset the budget between events
				if isEOF {
					return
				}
				continue
			}
			before, after, found := bytes.Cut(line, []byte{':'})
			if !found {
				yield(goSDKEvent{}, fmt.Errorf("%w: malformed line in SSE stream: %q", errGoSDKMalformedEvent, string(line)))
				return
			}
			switch {
			case bytes.Equal(before, eventKey):
				evt.Name = strings.TrimSpace(string(after))
			case bytes.Equal(before, idKey):
				evt.ID = strings.TrimSpace(string(after))
			case bytes.Equal(before, retryKey):
				evt.Retry = strings.TrimSpace(string(after))
			case bytes.Equal(before, dataKey):
				data := bytes.TrimSpace(after)
				if dataBuf == nil {
					dataBuf = new(bytes.Buffer)
				} else {
					dataBuf.WriteByte('\n')
				}
				dataBuf.Write(data)
			}

			if isEOF {
				yieldEvent()
				return
			}
		}
	}
}

// goSDKReadEventLine is readEventLine from go-sdk v1.8.0 mcp/event.go.
func goSDKReadEventLine(r *bufio.Reader, budget int) ([]byte, error) {
	if budget < 0 {
		return r.ReadBytes('\n')
	}
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > budget {
			return nil, errGoSDKEventTooLarge
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // looking for delim
		}
		return line, err
	}
}

// goSDKMaxLineLength is mcp.DefaultMaxLineLength, the stdio frame cap that
// IOTransport and the command transport use unless told otherwise.
const goSDKMaxLineLength = 16 * 1024 * 1024

// GoStdio returns the JSON values that the Go SDK's stdio transport (ioConn,
// go-sdk v1.8.0 mcp/transport.go, newIOConnLimited) frames from stream, and
// the error that ends its reading. It is not line based: an encoding/json
// Decoder reads one value after another, and after each value one byte is
// taken from the decoder's buffer, if there is one, and must be LF or CR.
// The first error ends the connection for good. GoStdio returns the frames
// undecoded: the SDK then reads each as a batch (a JSON array) or as one
// message with [GoSDKDecode], and a frame it cannot decode also ends the
// connection.
//
// The trailing-byte check looks only at bytes already buffered, so the
// SDK's result for "{...}{...}" depends on how the pipe's reads split the
// bytes; this copy reads stream as one reader whose reads return everything
// asked for, the same as the SDK reading from a bytes.Reader.
func GoStdio(stream []byte) ([][]byte, error) {
	limiter := &goSDKFrameLimitReader{r: bytes.NewReader(stream), limit: goSDKMaxLineLength}
	dec := json.NewDecoder(limiter)
	var frames [][]byte
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == nil {
			var tr [1]byte
			if n, readErr := dec.Buffered().Read(tr[:]); n > 0 {
				if tr[0] != '\n' && tr[0] != '\r' {
					err = fmt.Errorf("invalid trailing data at the end of stream")
				}
			} else if readErr != nil && readErr != io.EOF {
				err = readErr
			}
		}
		if err == io.EOF {
			return frames, nil // the stream ended between values: a clean close
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, raw)
		limiter.count = 0
	}
}

// goSDKFrameLimitReader is frameLimitReader from go-sdk v1.8.0
// mcp/transport.go.
type goSDKFrameLimitReader struct {
	r     io.Reader
	limit int
	count int
}

var errGoSDKFrameTooLarge = errors.New("inbound JSON-RPC frame exceeded the configured maximum line length")

func (r *goSDKFrameLimitReader) Read(p []byte) (int, error) {
	if r.count >= r.limit {
		return 0, errGoSDKFrameTooLarge
	}
	if len(p) > r.limit-r.count {
		p = p[:r.limit-r.count]
	}
	n, err := r.r.Read(p)
	r.count += n
	return n, err
}
