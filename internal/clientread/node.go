package clientread

import (
	"bufio"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"sync"
)

//go:embed tsread.mjs
var tsreadScript string

// Node is one Node.js process running tsread.mjs: the TypeScript MCP SDK v1
// client's own readers, answering many inputs in turn so that a fuzz target
// pays for the process once. A Node is safe for concurrent use; inputs are
// answered one at a time.
type Node struct {
	// Versions names what the process runs: keys "sdk",
	// "eventsourceParser" and "node".
	Versions map[string]string

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	err   error // sticky: the process is no longer usable
}

// ErrNodeSetup is wrapped by StartNode's error when the process started but
// could not load the SDK or eventsource-parser.
var ErrNodeSetup = errors.New("tsread: SDK readers not loaded")

// StartNode starts bin (a node executable) on tsread.mjs with sdkDir, the
// @modelcontextprotocol/sdk v1 package directory; eventsource-parser is
// resolved from there as the SDK's own import resolves it.
func StartNode(bin, sdkDir string) (*Node, error) {
	cmd := exec.Command(bin, "--input-type=module", "-e", tsreadScript, sdkDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	n := &Node{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<16)}
	var hello struct {
		Ready map[string]string `json:"ready"`
		Fatal string            `json:"fatal"`
	}
	if err := n.readLine(&hello); err != nil {
		n.Close()
		return nil, fmt.Errorf("%w: %v", ErrNodeSetup, err)
	}
	if hello.Ready == nil {
		n.Close()
		return nil, fmt.Errorf("%w: %s", ErrNodeSetup, hello.Fatal)
	}
	n.Versions = hello.Ready
	return n, nil
}

// Close ends the process.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stdin.Close()
	err := n.cmd.Wait()
	if n.err == nil {
		n.err = errors.New("tsread: closed")
	}
	return err
}

func (n *Node) readLine(v any) error {
	line, err := n.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("tsread: read: %w", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("tsread: decode %q: %w", line, err)
	}
	return nil
}

func (n *Node) ask(op string, input []byte, v any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	req := make([]byte, 0, len(op)+2+base64.StdEncoding.EncodedLen(len(input)))
	req = append(req, op...)
	req = append(req, ' ')
	req = base64.StdEncoding.AppendEncode(req, input)
	req = append(req, '\n')
	if _, err := n.stdin.Write(req); err != nil {
		n.err = fmt.Errorf("tsread: write: %w", err)
		return n.err
	}
	if err := n.readLine(v); err != nil {
		n.err = err
		return err
	}
	return nil
}

// TSMessage is one message the TypeScript client's transport accepted (OK)
// and hands to Protocol, or the error it reported for one event or line.
type TSMessage struct {
	OK bool `json:"ok"`
	// JSON is JSON.stringify of what JSONRPCMessageSchema.parse returned.
	JSON string `json:"json"`
	// Kind is how Protocol routes it: "response", "error", "request",
	// "notification" or "unknown".
	Kind string `json:"kind"`
	// NumID is String(Number(id)) for a response or error ("-0" for
	// negative zero): the key Protocol._onresponse looks the request up by.
	NumID string `json:"numId"`
	Err   string `json:"err"`
}

// TSEvent is an event as eventsource-parser dispatched it.
type TSEvent struct {
	Type  string `json:"type"`
	Data  string `json:"data"`
	ID    string `json:"id"`
	IDSet bool   `json:"idSet"` // the event had an id field of its own
}

// TSSSE is what the TypeScript SDK v1's streamable HTTP client reads from an
// SSE response body (given whole as one chunk, unless cut: SSEChunks).
type TSSSE struct {
	Events   []TSEvent   `json:"events"`
	Messages []TSMessage `json:"msgs"`
	Retry    []int64     `json:"retry"`
	Err      string      `json:"err"`    // the stream failed
	Chunks   int         `json:"chunks"` // how many chunks the body reached the reader in
}

// SSE runs the TypeScript SDK v1 client's SSE reading on stream.
func (n *Node) SSE(stream []byte) (TSSSE, error) {
	var r TSSSE
	err := n.ask("sse", stream, &r)
	return r, err
}

// TSJSON is what the TypeScript SDK v1's streamable HTTP client reads from
// an application/json response body.
type TSJSON struct {
	Batch    bool        `json:"batch"`
	Messages []TSMessage `json:"msgs"`
	Err      string      `json:"err"` // the body was refused whole
}

// SSEChunks is SSE with the body handed to the reader in chunks, as a
// network delivers it: cuts are ascending offsets into stream where one
// chunk ends and the next begins (a CR and its LF, or a UTF-8 sequence,
// may straddle a cut).
func (n *Node) SSEChunks(stream []byte, cuts []int) (TSSSE, error) {
	var r TSSSE
	err := n.ask("ssecut", withCuts(stream, cuts), &r)
	return r, err
}

// StdioChunks is Stdio with the stream arriving in chunks (one 'data'
// event each), cut as for SSEChunks.
func (n *Node) StdioChunks(stream []byte, cuts []int) ([]TSMessage, error) {
	var r struct {
		Msgs []TSMessage `json:"msgs"`
	}
	err := n.ask("stdiocut", withCuts(stream, cuts), &r)
	return r.Msgs, err
}

// withCuts encodes a "cut" input for tsread.mjs: a big-endian uint16
// count, that many big-endian uint32 offsets, then the bytes. Offsets past
// the stream, out of order or beyond the 65,535th are dropped.
func withCuts(stream []byte, cuts []int) []byte {
	var keep []uint32
	last := 0
	for _, c := range cuts {
		if c > last && c < len(stream) && len(keep) < 65535 {
			keep = append(keep, uint32(c))
			last = c
		}
	}
	out := make([]byte, 2, 2+4*len(keep)+len(stream))
	binary.BigEndian.PutUint16(out, uint16(len(keep)))
	for _, c := range keep {
		out = binary.BigEndian.AppendUint32(out, c)
	}
	return append(out, stream...)
}

// JSON runs the TypeScript SDK v1 client's application/json reading on body.
func (n *Node) JSON(body []byte) (TSJSON, error) {
	var r TSJSON
	err := n.ask("json", body, &r)
	return r, err
}

// Stdio runs the TypeScript SDK v1's stdio ReadBuffer on stream as the
// client transport does: one entry per complete line, failures included.
func (n *Node) Stdio(stream []byte) ([]TSMessage, error) {
	var r struct {
		Msgs []TSMessage `json:"msgs"`
	}
	err := n.ask("stdio", stream, &r)
	return r.Msgs, err
}

// Number is JavaScript's Number(s); ok is false for NaN.
func (n *Node) Number(s string) (f float64, ok bool, err error) {
	var r struct {
		N string `json:"n"`
	}
	if err := n.ask("number", []byte(s), &r); err != nil {
		return 0, false, err
	}
	return parseNumRepr(r.N)
}

// parseNumRepr reads String(n) for a JavaScript number, or "-0".
func parseNumRepr(s string) (float64, bool, error) {
	switch s {
	case "NaN":
		return 0, false, nil
	case "-0":
		return math.Copysign(0, -1), true, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("tsread: number %q: %w", s, err)
	}
	return f, true, nil
}

// Decode is new TextDecoder().decode(b): UTF-8 with replacement, one
// leading BOM stripped.
func (n *Node) Decode(b []byte) (string, error) {
	var r struct {
		S string `json:"s"`
	}
	err := n.ask("decode", b, &r)
	return r.S, err
}
