package mcpsdk_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// calculator starts a Go SDK server with one tool, add, over pipes: what
// its caller writes to in reaches it, its frames come out of out, and ran
// counts the calls it executed.
func calculator(t *testing.T, ctx context.Context) (ran *atomic.Int64, in io.WriteCloser, out io.ReadCloser) {
	t.Helper()
	ran = new(atomic.Int64)
	server := mcp.NewServer(&mcp.Implementation{Name: "calculator", Version: "1.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct{ A, B int }) (*mcp.CallToolResult, any, error) {
		ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
	})
	serverInR, serverIn := io.Pipe()
	serverOut, serverOutW := io.Pipe()
	if _, err := server.Connect(ctx, &mcp.IOTransport{Reader: serverInR, Writer: serverOutW}, nil); err != nil {
		t.Fatal(err)
	}
	return ran, serverIn, serverOut
}
