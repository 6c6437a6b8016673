package session

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"

	"github.com/tracectl/tracectl/mcpwire"
)

// maxInterpretBytes bounds how much of one frame the proxy holds in memory
// to read it: the gate's limit. A longer client frame is refused (read to
// its end, hashed, never forwarded); a longer server frame is spooled and
// hashed as it streams, committed by digest and length, then delivered.
const maxInterpretBytes = mcpwire.MaxFrameBytes

// frame is one line read from a peer: its exact bytes including the
// terminator (if any), or, for a line over the limit, what the streamed
// bytes were (their digest and length without the terminator, and the
// terminator).
type frame struct {
	data     []byte // nil when streamed
	streamed bool
	digest   string // streamed: sha256:<hex> of the bytes without the terminator
	length   int64  // streamed: their length
	term     string // streamed: the terminator
	spool    *spool // streamed: where its bytes are, when they could be spooled
}

// lineReader reads lines of any length. Lines up to the limit are returned
// whole; the bytes of a longer line are handed to `over` as they are read,
// while being hashed.
type lineReader struct {
	r     *bufio.Reader
	limit int
	h     hash.Hash
}

func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit, h: sha256.New()}
}

// next returns the next frame. For a line over the limit it passes the
// bytes to over as they arrive (over may be nil: they are then only
// hashed). io.EOF means no more bytes.
func (lr *lineReader) next(over func([]byte) error) (frame, error) {
	var buf []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(buf)+len(chunk) > lr.limit+2 { // the terminator is not counted
			return lr.stream(buf, chunk, err, over)
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			if body, _ := mcpwire.SplitTerminator(buf); len(body) > lr.limit {
				return lr.streamed(buf, over)
			}
			return frame{data: buf}, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(buf) == 0 {
				return frame{}, io.EOF
			}
			if len(buf) > lr.limit {
				return lr.streamed(buf, over)
			}
			return frame{data: buf}, nil // last line without terminator
		default:
			if len(buf) > 0 {
				return frame{data: buf}, err
			}
			return frame{}, err
		}
	}
}

// streamed reports a whole line already in memory that is over the limit
// (only by the few bytes the terminator allowance let through) the way a
// streamed one is reported.
func (lr *lineReader) streamed(buf []byte, over func([]byte) error) (frame, error) {
	body, term := mcpwire.SplitTerminator(buf)
	if over != nil {
		if err := over(buf); err != nil {
			return frame{}, err
		}
	}
	sum := sha256.Sum256(body)
	return frame{streamed: true, digest: "sha256:" + hex.EncodeToString(sum[:]), length: int64(len(body)), term: term}, nil
}

// stream hashes (and hands to over) a line too long to hold, to its end.
// The hash covers the bytes without the terminator: the last two bytes
// seen are held back until the line ends.
func (lr *lineReader) stream(buf, chunk []byte, err error, over func([]byte) error) (frame, error) {
	lr.h.Reset()
	var n int64
	var tail []byte // at most two bytes not yet hashed
	feed := func(b []byte) error {
		if over != nil {
			if werr := over(b); werr != nil {
				return werr
			}
		}
		all := append(tail, b...)
		if len(all) > 2 {
			lr.h.Write(all[:len(all)-2])
			n += int64(len(all) - 2)
			all = all[len(all)-2:]
		}
		tail = append([]byte(nil), all...)
		return nil
	}
	if werr := feed(buf); werr != nil {
		return frame{}, werr
	}
	for {
		if werr := feed(chunk); werr != nil {
			return frame{}, werr
		}
		if err == nil || !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		chunk, err = lr.r.ReadSlice('\n')
	}
	body, term := mcpwire.SplitTerminator(tail)
	lr.h.Write(body)
	n += int64(len(body))
	f := frame{streamed: true, length: n, term: term, digest: "sha256:" + hex.EncodeToString(lr.h.Sum(nil))}
	if err != nil && !errors.Is(err, io.EOF) {
		return f, err
	}
	return f, nil
}
