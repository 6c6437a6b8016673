package inspect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// Load reads what a bundle recorded: one entry per attempt with its
// outcome. (Pass Options.Verifier to attach verify's Report.)
func ExampleLoad() {
	tmp, _ := os.MkdirTemp("", "inspect-example")
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "run.trace")
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	r, _ := producer.Open(dir, producer.Options{
		Clock: func() time.Time { at = at.Add(5 * time.Millisecond); return at }, Entropy: zeroEntropy{},
		Producer: transcript.Producer{Name: "my-agent", Version: "1.0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess, Name: "calculator"},
	})
	ctx := context.Background()
	h, _ := r.Attempt(ctx, producer.Call{Line: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}` + "\n")})
	h.Response([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}` + "\n"))
	r.Attempt(ctx, producer.Call{Line: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":3}}}` + "\n")})
	r.Seal(ctx, nil)

	b, err := inspect.Load(ctx, verify.DirFS(dir), inspect.Options{})
	if err != nil {
		panic(err)
	}
	for _, a := range b.Attempts {
		fmt.Println(a.AttemptID, a.Tool, a.Outcome.Label(), a.Duration())
	}
	// Output:
	// a1 add error -32602 5ms
	// a2 add unknown (sealed_in_flight) 5ms
}
