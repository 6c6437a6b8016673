package proxy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// MaxInterpretBytes bounds how much of one line the proxy holds in memory to
// read it. A longer line is still forwarded unchanged, streamed, and
// committed by digest and length only; it is not interpreted.
const MaxInterpretBytes = 64 << 20

// frame is one line read from a peer: the exact bytes including the
// terminator (if any), or, for a line over MaxInterpretBytes, only its
// digest and length (the bytes were streamed to the other side already).
type frame struct {
	data     []byte // nil when streamed
	streamed bool
	digest   string
	length   int64
}

// lineReader reads lines of any length. Lines up to the interpret limit are
// returned whole; longer lines are written through to `through` as they are
// read, while being hashed.
type lineReader struct {
	r     *bufio.Reader
	limit int
	h     hash.Hash
}

func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit, h: sha256.New()}
}

// next returns the next frame. For a line over the limit it forwards the
// bytes to through (under lock) as they arrive. io.EOF means no more bytes.
func (lr *lineReader) next(through func([]byte) error) (frame, error) {
	var buf []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(buf)+len(chunk) > lr.limit {
			return lr.stream(buf, chunk, err, through)
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return frame{data: buf, length: int64(len(buf))}, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(buf) == 0 {
				return frame{}, io.EOF
			}
			return frame{data: buf, length: int64(len(buf))}, nil // last line without terminator
		default:
			if len(buf) > 0 {
				return frame{data: buf, length: int64(len(buf))}, err
			}
			return frame{}, err
		}
	}
}

func (lr *lineReader) stream(buf, chunk []byte, err error, through func([]byte) error) (frame, error) {
	lr.h.Reset()
	n := int64(0)
	write := func(b []byte) error {
		lr.h.Write(b)
		n += int64(len(b))
		return through(b)
	}
	if werr := write(buf); werr != nil {
		return frame{}, werr
	}
	for {
		if werr := write(chunk); werr != nil {
			return frame{}, werr
		}
		if err == nil || !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		chunk, err = lr.r.ReadSlice('\n')
	}
	f := frame{streamed: true, length: n, digest: "sha256:" + hex.EncodeToString(lr.h.Sum(nil))}
	if err != nil && !errors.Is(err, io.EOF) {
		return f, err
	}
	return f, nil
}
