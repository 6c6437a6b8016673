// Command sdkserver is a stdio MCP server built with the Go SDK
// (github.com/modelcontextprotocol/go-sdk v1.8.0). tracectl's tests run it as
// a real child process and speak to it over stdin/stdout; it logs only to
// stderr.
//
// # Protocol eras (what go-sdk v1.8.0 does, read from its source and checked by
// this package's tests)
//
// The SDK server is dual-era on stdio, decided per request:
//
//   - Modern (2026-07-28): a request whose params._meta carries
//     "io.modelcontextprotocol/protocolVersion" >= "2026-07-28" is handled
//     without any initialize handshake. "io.modelcontextprotocol/clientCapabilities"
//     must then also be present (an object), else -32602; "clientInfo" is
//     optional. A version the server does not list gives -32022 with
//     data {supported, requested}. server/discover answers
//     {resultType:"complete", supportedVersions:[2026-07-28, 2025-11-25,
//     2025-06-18, 2025-03-26, 2024-11-05], capabilities, ttlMs, cacheScope,
//     _meta:{io.modelcontextprotocol/serverInfo}}. Every modern result gets
//     resultType "complete" (unless the handler set one) and
//     _meta["io.modelcontextprotocol/serverInfo"]. initialize, ping,
//     notifications/initialized, logging/setLevel and resources/(un)subscribe
//     sent with the modern _meta give -32601.
//   - Legacy (2025-11-25 and older): initialize then notifications/initialized.
//     A request without the modern _meta before initialize is refused with
//     error code 0 ("method ... is invalid during session initialization").
//     server/discover without the modern _meta gives -32601, which is what a
//     dual-era client's probe falls back on. One process accepts both eras:
//     modern requests after a legacy handshake and vice versa.
//   - The cache fields are always serialised on list results, in both eras:
//     "ttlMs" (0 unless -ttl-ms is set) and "cacheScope" ("public"). Legacy
//     results carry no resultType.
//   - list_changed: legacy sessions get notifications/tools/list_changed
//     (debounced 10 ms) after any AddTool/RemoveTools once connected; modern
//     sessions get it only on an open subscriptions/listen stream that asked
//     for toolsListChanged, tagged with _meta["io.modelcontextprotocol/subscriptionId"].
//     The SDK client opens that stream itself on a modern connection when a
//     ToolListChangedHandler is configured.
//   - Pagination: tools are served sorted by name; the cursor is opaque
//     (base64). The server treats cursor "" exactly like an absent cursor
//     (it restarts at the first page) and never emits nextCursor "" (omitempty).
//     An undecodable cursor gives -32602.
//   - The SDK client (Connect) defaults to 2026-07-28: it probes with
//     server/discover and falls back to initialize with 2025-11-25 on any
//     non-modern error. Pass ClientSessionOptions.ProtocolVersion "2025-11-25"
//     to force the legacy handshake.
//   - JSON-RPC ids go through float64 and int64: 9007199254740993 is answered
//     as 9007199254740992, 1.5 as 1, -0 as 0. A request with id null is
//     treated as a notification and never answered.
//   - A request cancelled with notifications/cancelled is still answered,
//     with an error of code 0 whose message ends in "context canceled".
//   - Strings are re-encoded with HTML escaping: "<&>" in echoed arguments
//     comes back as "\u003c\u0026\u003e"; number text inside raw JSON
//     (1.0, 1e2, 9007199254740993) is kept.
//   - Raw schemas given to (*Server).AddTool as json.RawMessage are written out
//     verbatim (compacted), so number text such as 0.5 or 9007199254740991 and
//     member order survive; typed tools (mcp.AddTool) would not. Tool
//     annotations always serialise readOnlyHint and idempotentHint (false when
//     unset), so "absent" cannot be expressed through the SDK's types.
//
// # Flags
//
//	-tools N               generated tools tool-0000 .. tool-(N-1) (default 8)
//	-page-size P           tools/list page size (0: the SDK default, 1000)
//	-add-tool-after-list K after serving the K-th tools/list request, add the
//	                       tool "late_tool" (sorts between "fail" and "slow"),
//	                       and answer the next tools/list only once the
//	                       list_changed notification has been written (to a
//	                       legacy session, or a modern one with a listen
//	                       stream): a client reading in order sees it
//	                       mid-collection however slow the machine, never
//	                       after the 10 ms debounce happened to lose a race
//	-echo-only             serve only the echo tool (latency benchmarks)
//	-ttl-ms T              ttlMs on list and discover results (default 0)
//	-v                     log SDK activity at info level to stderr
//
// # Tools
//
// Always present unless -echo-only: echo (returns its arguments as text and as
// structuredContent, verbatim), slow (sleeps arguments.ms milliseconds, returns
// early with an error when the request is cancelled), fail (a result with
// isError true), add_tool (adds arguments.name, default "added-N", at runtime
// so list_changed follows), decimals (an inputSchema holding minimum 0.5,
// default 0.7, multipleOf 0.25 and maximum 9007199254740991), structured (has
// an outputSchema and returns matching structuredContent), annotated (title,
// icons, annotations with destructiveHint etc., and vendor _meta keys).
// Generated tools have small schemas with integers and non-ASCII descriptions.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lateToolName is the tool added by -add-tool-after-list. It sorts between
// "fail" and "slow", so with small pages it lands on a page the collector has
// usually already read.
const lateToolName = "late_tool"

type config struct {
	tools            int
	pageSize         int
	addToolAfterList int
	echoOnly         bool
	ttlMs            int
	verbose          bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdkserver: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet("sdkserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.tools, "tools", 8, "number of generated tools")
	fs.IntVar(&cfg.pageSize, "page-size", 0, "tools/list page size (0: SDK default)")
	fs.IntVar(&cfg.addToolAfterList, "add-tool-after-list", 0, "add "+lateToolName+" after serving the K-th tools/list (0: never)")
	fs.BoolVar(&cfg.echoOnly, "echo-only", false, "serve only the echo tool")
	fs.IntVar(&cfg.ttlMs, "ttl-ms", 0, "ttlMs on cacheable results")
	fs.BoolVar(&cfg.verbose, "v", false, "log SDK activity to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.tools < 0 || cfg.pageSize < 0 || cfg.addToolAfterList < 0 || cfg.ttlMs < 0 {
		return errors.New("negative flag value")
	}
	level := slog.LevelWarn
	if cfg.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	s := newServer(cfg, logger)
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

func newServer(cfg config, logger *slog.Logger) *mcp.Server {
	opts := &mcp.ServerOptions{PageSize: cfg.pageSize, Logger: logger}
	if cfg.ttlMs > 0 {
		opts.SetCacheable = func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = cfg.ttlMs }
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "tracectl-sdkserver", Title: "tracectl test server (go-sdk)", Version: "1.0.0"}, opts)

	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Returns its arguments unchanged, as text and as structuredContent.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":true}`),
	}, echo)
	if cfg.echoOnly {
		return s
	}

	s.AddTool(&mcp.Tool{
		Name:        "slow",
		Description: "Sleeps for arguments.ms milliseconds; honours cancellation.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			MS int64 `json:"ms"`
		}
		if err := unmarshalArgs(req, &args); err != nil {
			return nil, err
		}
		t := time.NewTimer(time.Duration(args.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return textResult(fmt.Sprintf("slept %d ms", args.MS)), nil
		case <-ctx.Done():
			logger.Warn("slow: cancelled", "ms", args.MS)
			return nil, fmt.Errorf("slow: %w", ctx.Err())
		}
	})

	s.AddTool(&mcp.Tool{
		Name:        "fail",
		Description: "Always fails with a tool error (isError: true).",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := textResult("fail: this tool always fails")
		res.IsError = true
		return res, nil
	})

	var added atomic.Int64
	s.AddTool(&mcp.Tool{
		Name:        "add_tool",
		Description: "Adds a tool at runtime (arguments.name, default added-N); the server then sends list_changed.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Name string `json:"name"`
		}
		if err := unmarshalArgs(req, &args); err != nil {
			return nil, err
		}
		if args.Name == "" {
			args.Name = fmt.Sprintf("added-%d", added.Add(1))
		}
		s.AddTool(addedTool(args.Name), echo)
		return textResult("added " + args.Name), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "decimals",
		Description: "Declares non-integer numbers and a large safe integer in its schema.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"ratio":{"type":"number","minimum":0.5,"maximum":1,"default":0.7,"multipleOf":0.25},` +
			`"count":{"type":"integer","minimum":0,"maximum":9007199254740991}},"required":["ratio"]}`),
	}, echo)

	s.AddTool(&mcp.Tool{
		Name:         "structured",
		Description:  "Returns structuredContent that matches its outputSchema.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			City string `json:"city"`
		}
		if err := unmarshalArgs(req, &args); err != nil {
			return nil, err
		}
		out := json.RawMessage(fmt.Sprintf(`{"city":%q,"celsius":21.5}`, args.City))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: out}, nil
	})

	yes, no := true, false
	s.AddTool(&mcp.Tool{
		Name:        "annotated",
		Title:       "Annotated tool",
		Description: "Carries a title, icons, annotations and vendor _meta keys.",
		Icons: []mcp.Icon{
			{Source: "https://example.com/icon.png", MIMEType: "image/png", Sizes: []string{"48x48"}},
			{Source: "data:image/svg+xml;base64,PHN2Zy8+", MIMEType: "image/svg+xml", Theme: "dark"},
		},
		Annotations: &mcp.ToolAnnotations{
			Title:           "Deletes things (not really)",
			DestructiveHint: &yes,
			IdempotentHint:  true,
			OpenWorldHint:   &no,
			ReadOnlyHint:    false,
		},
		Meta: mcp.Meta{
			"com.example.vendor/owner":  "team-tools",
			"com.example.vendor/limits": map[string]any{"rps": 5, "burst": 10},
		},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`),
	}, echo)

	for i := range cfg.tools {
		s.AddTool(generatedTool(i), echo)
	}

	if cfg.addToolAfterList > 0 {
		addToolAfterList(s, cfg.addToolAfterList)
	}
	return s
}

// addToolAfterList adds lateToolName after the k-th tools/list is served,
// and holds the next tools/list until the SDK has written the list_changed
// that the addition causes. The SDK sends it from a 10 ms debounce timer,
// so without the hold its place among the pages depends on scheduling.
// Only sessions that will get the notification are held: legacy ones, and
// modern ones that opened a listen stream (modern sessions without one are
// never notified).
func addToolAfterList(s *mcp.Server, k int) {
	var (
		mu       sync.Mutex
		lists    int
		notified bool // a session that gets list_changed has shown itself
	)
	sent := make(chan struct{})
	var sentOnce sync.Once
	s.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "notifications/tools/list_changed" {
				sentOnce.Do(func() { close(sent) })
			}
			return res, err
		}
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize", "subscriptions/listen":
				mu.Lock()
				notified = true
				mu.Unlock()
			}
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			mu.Lock()
			lists++
			n, hold := lists, notified
			mu.Unlock()
			if n == k+1 && hold {
				select {
				case <-sent:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			res, err := next(ctx, method, req)
			if n == k {
				// The response is written after this returns; the SDK
				// writes the notification when its debounce fires.
				s.AddTool(addedTool(lateToolName), echo)
			}
			return res, err
		}
	})
}

func addedTool(name string) *mcp.Tool {
	return &mcp.Tool{
		Name:        name,
		Description: "Added at runtime.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`),
	}
}

// generatedTool returns tool-%04d with a small schema holding integers and a
// description outside ASCII (accents, CJK, an emoji outside the BMP).
func generatedTool(i int) *mcp.Tool {
	schema := fmt.Sprintf(`{"type":"object","properties":{`+
		`"id":{"type":"integer","minimum":0,"maximum":%d},`+
		`"label":{"type":"string","maxLength":%d,"description":"étiquette n°%d"},`+
		`"tags":{"type":"array","items":{"type":"string"},"maxItems":%d}},`+
		`"required":["id"],"additionalProperties":false}`, 1000+i, 16+i%16, i, 1+i%5)
	return &mcp.Tool{
		Name:        fmt.Sprintf("tool-%04d", i),
		Description: fmt.Sprintf("Outil généré n°%d — 生成されたツール 🔧", i),
		InputSchema: json.RawMessage(schema),
	}
}

// echo returns the raw arguments as text and as structuredContent. It is also
// the handler of every tool that has no behaviour of its own.
func echo(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(args)}},
		StructuredContent: args,
	}, nil
}

func unmarshalArgs(req *mcp.CallToolRequest, v any) error {
	if len(req.Params.Arguments) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Params.Arguments, v); err != nil {
		return fmt.Errorf("%s: arguments: %w", req.Params.Name, err)
	}
	return nil
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
