// Command sdklogserver is a stdio MCP server built with the Go SDK
// (github.com/modelcontextprotocol/go-sdk v1.8.0), like ./sdkserver, with one
// tool, echo (inputSchema {"type":"object"}), and a call log: every
// tools/call the SDK dispatches to its tools/call handler (known tool or not)
// is appended to the file named by $MCPTEST_CALL_LOG (or -call-log, which
// takes precedence), and fsynced, before the handler runs, as
// {"name":<params.name>,"arguments":<params.arguments decoded with UseNumber
// and re-encoded with json.Marshal, or null>}.
//
// tracectl's tests (producer/stdio/gate_peers_test.go) run it behind the
// recording proxy to compare what the server executed with what the
// transcript recorded. It logs only to stderr.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallLogEnv names the call log's environment variable.
const CallLogEnv = "MCPTEST_CALL_LOG"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	callLog := flag.String("call-log", os.Getenv(CallLogEnv), "append each dispatched tools/call to this file")
	desc := flag.String("echo-description", defaultDescription, "echo's description (a test of pinned declarations changes it: a rug pull)")
	flag.Parse()
	err := run(ctx, *callLog, *desc)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdklogserver: %v\n", err)
		os.Exit(1)
	}
}

const defaultDescription = "Returns its arguments, canonically re-encoded, as text."

func run(ctx context.Context, logName, description string) error {
	var log *callLog
	if logName != "" {
		f, err := os.OpenFile(logName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("call log: %w", err)
		}
		defer f.Close()
		log = &callLog{f: f}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := mcp.NewServer(&mcp.Implementation{Name: "tracectl-sdklogserver", Version: "1.0.0"}, &mcp.ServerOptions{Logger: logger})
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: description,
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := canonical(req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(args)}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && log != nil {
				if err := log.add(r.Params); err != nil {
					return nil, fmt.Errorf("call log: %w", err)
				}
			}
			return next(ctx, method, req)
		}
	})
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

// callLog appends one fsynced line per call; the SDK may dispatch calls
// concurrently.
type callLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *callLog) add(p *mcp.CallToolParamsRaw) error {
	var name string
	var raw json.RawMessage
	if p != nil {
		name, raw = p.Name, p.Arguments
	}
	args, err := canonical(raw)
	if err != nil {
		// Still a dispatched call: log the arguments as a JSON string, which
		// matches no recorded object.
		args, _ = json.Marshal("undecodable: " + string(raw))
	}
	b, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{name, args})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return l.f.Sync()
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
