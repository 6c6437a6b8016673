package transcript

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Reader streams a transcript line by line in memory bounded by
// MaxLineBytes, whatever the transcript's length. Besides DecodeLine's
// checks on each line it checks what one line of state allows: line 0 is
// the header, seq is contiguous, no header after line 0, nothing after the
// seal, and every attempt names the header's execution scope. Checks that
// need the whole history (attempt ids unique, observations naming known
// attempts) are the verifier's.
type Reader struct {
	r      *bufio.Reader
	seq    int64 // position of the next line
	off    int64 // byte offset of the next line
	scope  string
	sealed bool
	err    error // sticky
}

// NewReader returns a Reader of the transcript in r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, MaxLineBytes+1)}
}

// Next returns the next line's exact bytes (without the LF; a fresh copy)
// and its decoded event. At the end of a valid transcript it returns io.EOF.
// Any other error is a *LineError (or the underlying read error) and is
// returned again by every later call. On a torn_line error raw holds the
// torn bytes (at most MaxLineBytes of them).
func (t *Reader) Next() (raw []byte, ev Event, err error) {
	if t.err != nil {
		return nil, nil, t.err
	}
	raw, ev, err = t.next()
	if err != nil {
		t.err = err
	}
	return raw, ev, err
}

// Offset returns the byte offset just past the last line Next returned
// successfully: the length of the valid prefix of the stream.
func (t *Reader) Offset() int64 { return t.off }

// Lines returns the number of lines Next returned successfully.
func (t *Reader) Lines() int64 { return t.seq }

func (t *Reader) fail(code, detail string, cause error) *LineError {
	return &LineError{Seq: t.seq, Offset: t.off, Code: code, Detail: detail, Err: cause}
}

func (t *Reader) next() ([]byte, Event, error) {
	line, err := t.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, nil, t.fail(CodeTooLong, fmt.Sprintf("no LF within %d bytes", MaxLineBytes), nil)
	case errors.Is(err, io.EOF):
		if len(line) == 0 {
			if t.seq == 0 {
				return nil, nil, t.fail(CodeHeaderMissing, "empty transcript: the header line is required", nil)
			}
			return nil, nil, io.EOF
		}
		return bytes.Clone(line), nil, t.fail(CodeTornLine, fmt.Sprintf("%d bytes after the last LF", len(line)), nil)
	case err != nil:
		return nil, nil, fmt.Errorf("read transcript line %d: %w", t.seq, err)
	}
	raw := bytes.Clone(line[:len(line)-1])
	ev, derr := DecodeLine(raw)
	if derr != nil {
		var le *LineError
		if errors.As(derr, &le) {
			return nil, nil, t.fail(le.Code, le.Detail, le.Err)
		}
		return nil, nil, t.fail(CodeInvalidMember, derr.Error(), derr)
	}
	if _, ok := ev.(*Header); t.seq == 0 && !ok {
		return nil, nil, t.fail(CodeHeaderMissing, "line 0 is not a header", nil)
	}
	if t.sealed {
		return nil, nil, t.fail(CodeAfterSeal, "a line after the seal line", nil)
	}
	if seq := SeqOf(ev); seq != t.seq {
		return nil, nil, t.fail(CodeSeqGap, fmt.Sprintf("seq %d at line %d", seq, t.seq), nil)
	}
	switch e := ev.(type) {
	case *Header:
		if t.seq != 0 {
			return nil, nil, t.fail(CodeHeaderRepeated, "a header after line 0", nil)
		}
		t.scope = e.ExecutionScope
	case *Attempt:
		if e.ExecutionScope != t.scope {
			return nil, nil, t.fail(codeScopeMismatch, fmt.Sprintf("attempt %s names scope %q, the header %q", e.AttemptID, bounded(e.ExecutionScope), t.scope), nil)
		}
	case *Seal:
		t.sealed = true
	}
	t.seq++
	t.off += int64(len(line))
	return raw, ev, nil
}

// SeqOf returns the seq member of a decoded event.
func SeqOf(ev Event) int64 {
	if ev == nil {
		return -1
	}
	return ev.lineSeq()
}
