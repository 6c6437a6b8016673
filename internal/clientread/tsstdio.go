package clientread

import "bytes"

// TSStdioLines returns the lines that the TypeScript SDK v1's stdio
// ReadBuffer (dist/esm/shared/stdio.js, readMessage) hands to JSON.parse:
// the stream is cut at each LF, each line is decoded as UTF-8 with
// replacement and without stripping a BOM (Buffer.toString), and one
// trailing CR is removed. Bytes after the last LF are never read. The SDK's
// client transport reports a line that JSON.parse or its schema rejects and
// goes on with the next line (client/stdio.js, processReadBuffer), unlike
// the Go SDK, whose stdio reading stops at the first error ([GoStdio]).
func TSStdioLines(stream []byte) [][]byte {
	var lines [][]byte
	for {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			return lines
		}
		line := []byte(utf8DecodeReplace(stream[:i]))
		line = bytes.TrimSuffix(line, []byte("\r"))
		lines = append(lines, line)
		stream = stream[i+1:]
	}
}
