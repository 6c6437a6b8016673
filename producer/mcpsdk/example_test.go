package mcpsdk_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/mcpsdk"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// A Go agent runtime records its SDK client's traffic in process. Here the
// server is a Go SDK server in the same process, over pipes; a stdio server
// process comes from mcpsdk.Command(exec.Command(...), 0).
func Example() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	ctx := context.Background()

	// The server: its input and output are the byte stream tracectl sits on.
	server := mcp.NewServer(&mcp.Implementation{Name: "calculator", Version: "1.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct{ A, B int }) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
	})
	serverInR, serverIn := io.Pipe()
	serverOut, serverOutW := io.Pipe()
	if _, err := server.Connect(ctx, &mcp.IOTransport{Reader: serverInR, Writer: serverOutW}, nil); err != nil {
		panic(err)
	}

	rec, err := producer.Open(filepath.Join(tmp, "run.trace"), producer.Options{
		Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "my-agent", Version: "1.0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess, Name: "calculator"},
	})
	if err != nil {
		panic(err)
	}
	t := &mcpsdk.Transport{Recorder: rec, ServerIn: serverIn, ServerOut: serverOut}
	client := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1.0"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		panic(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil { // recorded: the declarations the call is checked against
		panic(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"A": 1, "B": 2}})
	if err != nil {
		panic(err)
	}
	fmt.Println("add:", res.Content[0].(*mcp.TextContent).Text)
	cs.Close()
	if _, err := t.Wait(ctx); err != nil {
		panic(err)
	}
	// The runtime's key signs record.json; Digest names the runtime's build.
	key, _ := sign.Generate(sign.Ed25519, rand.Reader)
	signer, _ := sign.NewSigner(key)
	sealed, err := rec.Seal(ctx, sign.TranscriptSigner{Key: signer, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("my-agent 1.0"))}})
	if err != nil {
		panic(err)
	}
	fmt.Println("calls", sealed.Seal.Attempts, "responses", sealed.Seal.Responses, "signed", sealed.Signed)

	// An auditor verifies it offline against the runtime's public key.
	v, _ := verify.New(verify.Options{TrustedKey: signer.Public(), At: time.Now()})
	rep, err := v.Bundle(ctx, os.DirFS(rec.Dir()))
	if err != nil {
		panic(err)
	}
	fmt.Println(rep.Verdict)
	// Output:
	// add: 3
	// calls 1 responses 1 signed true
	// verified
}
