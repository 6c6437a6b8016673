package httpproxy_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/httpproxy"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// A recording proxy in front of a Streamable HTTP MCP server: the client
// is pointed at the proxy, and every bundle is sealed when the proxy is
// closed (here unsigned; pass a producer.RecordSigner to Seal to sign).
func Example() {
	server := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "hello"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer upstream.Close()

	dir, _ := os.MkdirTemp("", "bundles")
	defer os.RemoveAll(dir)
	u, _ := url.Parse(upstream.URL)
	srv, _ := producer.HTTPServer(u, "")
	n := 0
	p, err := httpproxy.New(httpproxy.Config{
		Upstream: u,
		Open: func(kind string) (*producer.Recorder, error) {
			n++
			return producer.Open(filepath.Join(dir, fmt.Sprintf("%s-%d.trace", kind, n)), producer.Options{
				Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true, Server: srv,
				Producer: transcript.Producer{Name: "example", Version: "1"},
			})
		},
		Seal: func(r *producer.Recorder) error {
			s, err := r.Seal(context.Background(), nil)
			if err == nil {
				fmt.Printf("sealed: %d attempts, %d responses\n", s.Seal.Attempts, s.Seal.Responses)
			}
			return err
		},
		CaptureID: func() (string, error) { return snapshot.NewCaptureID(rand.Reader) },
	})
	if err != nil {
		log.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()

	c := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: front.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		log.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hello"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result:", res.Content[0].(*mcp.TextContent).Text)
	cs.Close()
	if err := p.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// result: hi
	// sealed: 1 attempts, 1 responses
}
