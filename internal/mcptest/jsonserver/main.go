// Command jsonserver is a minimal stdio MCP server (legacy era, 2025-11-25)
// written the way a typical hand-written Go server is: each LF-terminated
// line, a trailing "\r" trimmed, is decoded with encoding/json into a struct.
// It is deliberately lenient, as such servers are:
//
//   - member names match case-insensitively ("METHOD", "Params", "Name" ...);
//   - the last of repeated members wins;
//   - invalid UTF-8 in strings becomes U+FFFD;
//   - nesting up to encoding/json's own limit (10000) is accepted;
//   - a JSON-RPC batch (an array) is accepted and each element handled;
//   - a tools/call without an id is still executed (and not answered);
//   - a last line without LF is handled when stdin ends.
//
// tracectl's tests run it behind the recording proxy to show that no frame
// such a server would act on reaches it unrecorded.
//
// # Tools
//
// echo answers its arguments (canonically re-encoded) as text. big answers
// a text of arguments.bytes (default 70 MiB) "x" characters. Any other name
// is answered with a JSON-RPC error, after being logged.
//
// # Logs
//
// The call log ($MCPTEST_CALL_LOG, or -call-log, which takes precedence)
// gets one line per tools/call the server dispatches (known tool or not),
// appended and fsynced before the response is written:
// {"name":<params.name>,"arguments":<params.arguments decoded with UseNumber
// and re-encoded with json.Marshal, or null>}.
//
// The line log ($MCPTEST_LINE_LOG, or -line-log) gets one line per line read
// from stdin, fsynced before the line is handled, {"in":<bytes, LF
// excluded>}, and one per line written to stdout, fsynced before it is
// written, {"out":<bytes, LF excluded>,"sha256":"sha256:<hex of those
// bytes>"}.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Environment variables naming the logs.
const (
	CallLogEnv = "MCPTEST_CALL_LOG"
	LineLogEnv = "MCPTEST_LINE_LOG"
)

// defaultBig is the size of big's text when arguments.bytes is absent.
const defaultBig = 70 << 20

type request struct {
	JSONRPC string
	Method  string
	ID      json.RawMessage
	Params  struct {
		Name      string
		Arguments json.RawMessage
	}
}

type rpcError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type server struct {
	out     *bufio.Writer
	callLog *os.File
	lineLog *os.File
}

func main() {
	callLog := flag.String("call-log", os.Getenv(CallLogEnv), "append each dispatched tools/call to this file")
	lineLog := flag.String("line-log", os.Getenv(LineLogEnv), "append each line's length to this file")
	flag.Parse()
	s := &server{out: bufio.NewWriterSize(os.Stdout, 64<<10)}
	var err error
	if s.callLog, err = openLog(*callLog); err == nil {
		s.lineLog, err = openLog(*lineLog)
	}
	if err == nil {
		err = s.serve(os.Stdin)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "jsonserver: %v\n", err)
		os.Exit(1)
	}
}

func openLog(name string) (*os.File, error) {
	if name == "" {
		return nil, nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func appendLog(f *os.File, v any) error {
	if f == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

func (s *server) serve(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte("\n"))
			if lerr := appendLog(s.lineLog, map[string]int{"in": len(line)}); lerr != nil {
				return lerr
			}
			line = bytes.TrimSuffix(line, []byte("\r"))
			if herr := s.handleLine(line); herr != nil {
				return herr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (s *server) handleLine(line []byte) error {
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil {
			return s.write(response{ID: json.RawMessage("null"), Error: &rpcError{-32700, "parse error: " + err.Error()}})
		}
		for _, m := range batch {
			if err := s.handle(m); err != nil {
				return err
			}
		}
		return nil
	}
	return s.handle(line)
}

func (s *server) handle(msg []byte) error {
	var req request
	if err := json.Unmarshal(msg, &req); err != nil {
		return s.write(response{ID: json.RawMessage("null"), Error: &rpcError{-32700, "parse error: " + err.Error()}})
	}
	hasID := len(req.ID) > 0 && string(req.ID) != "null"
	reply := func(result any, e *rpcError) error {
		if !hasID {
			return nil
		}
		return s.write(response{ID: req.ID, Result: result, Error: e})
	}
	switch req.Method {
	case "initialize":
		return reply(map[string]any{
			"protocolVersion": "2025-11-25",
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "tracectl-jsonserver", "version": "1.0.0"},
		}, nil)
	case "ping":
		return reply(map[string]any{}, nil)
	case "tools/list":
		schema := json.RawMessage(`{"type":"object"}`)
		return reply(map[string]any{"tools": []any{
			map[string]any{"name": "echo", "description": "Answers its arguments as text.", "inputSchema": schema},
			map[string]any{"name": "big", "description": "Answers arguments.bytes (default 70 MiB) of text.", "inputSchema": schema},
		}}, nil)
	case "tools/call":
		args, err := canonical(req.Params.Arguments)
		if err != nil {
			return reply(nil, &rpcError{-32602, "arguments: " + err.Error()})
		}
		if err := appendLog(s.callLog, struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{req.Params.Name, args}); err != nil {
			return err
		}
		switch req.Params.Name {
		case "echo":
			return reply(textResult(string(args)), nil)
		case "big":
			var a struct{ Bytes *int }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			n := defaultBig
			if a.Bytes != nil && *a.Bytes >= 0 {
				n = *a.Bytes
			}
			return reply(textResult(strings.Repeat("x", n)), nil)
		}
		return reply(nil, &rpcError{-32602, "unknown tool " + req.Params.Name})
	}
	if strings.HasPrefix(req.Method, "notifications/") {
		return nil
	}
	return reply(nil, &rpcError{-32601, "method not found: " + req.Method})
}

// canonical decodes raw with UseNumber and re-encodes it with json.Marshal;
// absent arguments are null.
func canonical(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}

func (s *server) write(r response) error {
	r.JSONRPC = "2.0"
	if r.Error == nil && r.Result == nil {
		r.Result = map[string]any{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if err := appendLog(s.lineLog, map[string]any{"out": len(b), "sha256": "sha256:" + hex.EncodeToString(sum[:])}); err != nil {
		return err
	}
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		return err
	}
	return s.out.Flush()
}
