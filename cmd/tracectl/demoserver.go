package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// demoServerCmd is the embedded MCP server `tracectl demo` runs through the
// proxy, as a real child process speaking stdio (the Go SDK's server).
// Hidden: it exists so the demo needs nothing but this binary.
const demoServerCmd = "__demo-server"

func init() {
	commands = append(commands, func(s streams) *cobra.Command {
		return &cobra.Command{
			Use:    demoServerCmd,
			Hidden: true,
			Args:   cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return newDemoServer().Run(ctx, &mcp.StdioTransport{})
			},
		}
	})
}

// demoPageSize makes the demo's tools/list span several pages.
const demoPageSize = 3

func newDemoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tracectl-demo-server", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: demoPageSize})
	text := func(format string, a ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
	}
	args := func(req *mcp.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Returns its text argument.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("%v", args(req)["text"]), nil
	})
	s.AddTool(&mcp.Tool{
		Name:         "temperature",
		Description:  "Sets a sampling temperature (its schema holds non-integer numbers).",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"value":{"type":"number","minimum":0,"maximum":2,"default":0.7,"multipleOf":0.05}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"applied":{"type":"number"}}}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v, ok := args(req)["value"].(float64)
		if !ok {
			v = 0.7
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(v)}}, StructuredContent: map[string]any{"applied": v}}, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "slow",
		Description: "Sleeps for ms milliseconds, then answers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":60000}}}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ms, _ := args(req)["ms"].(float64)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return text("slept %vms", ms), nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "fail",
		Description: "Always fails as a tool (isError: true).",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{Title: "Always fails"},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text("this tool always fails")
		r.IsError = true
		return r, nil
	})
	var added atomic.Int64
	s.AddTool(&mcp.Tool{
		Name:        "add_tool",
		Description: "Adds a new tool at run time (the server then sends list_changed).",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Meta:        mcp.Meta{"dev.tracectl/demo": "changes the declaration set"},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name := fmt.Sprintf("added_%d", added.Add(1))
		s.AddTool(&mcp.Tool{Name: name, Description: "Added at run time.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("%s ran", name), nil
			})
		return text("added %s", name), nil
	})
	for i, d := range []string{"Résumé de l'outil", "ツールの説明", "Описание инструмента"} {
		s.AddTool(&mcp.Tool{
			Name:        fmt.Sprintf("lookup_%d", i),
			Description: d,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","maxLength":64}}}`),
		}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("value for %v", args(req)["key"]), nil
		})
	}
	return s
}
