package producer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

type fixedEntropy struct{}

func (fixedEntropy) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

// A Go runtime records each tools/call: the attempt is durable before the
// request is dispatched, the response before it is delivered.
func Example() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	start := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	r, err := producer.Open(filepath.Join(tmp, "run.trace"), producer.Options{
		Clock:    func() time.Time { return start }, // time.Now in production
		Entropy:  fixedEntropy{},                    // crypto/rand.Reader in production
		Producer: transcript.Producer{Name: "my-agent", Version: "1.0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess, Name: "calculator"},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}` + "\n"
	h, err := r.Attempt(ctx, producer.Call{Line: []byte(req)})
	if err != nil {
		panic(err) // fail closed: do not dispatch
	}
	// ... dispatch req, read the response ...
	if err := h.Response([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}` + "\n")); err != nil {
		panic(err) // do not deliver as a recorded result
	}
	sealed, err := r.Seal(ctx, nil) // with a sign.TranscriptSigner, record.json is written and signed
	if err != nil {
		panic(err)
	}
	fmt.Println("scope", r.Scope())
	fmt.Println("attempt", h.ID(), "lines", sealed.Lines, "calls", sealed.Seal.Attempts, "responses", sealed.Seal.Responses)
	fmt.Println(strings.HasPrefix(sealed.Root, "sha256:"))
	// Output:
	// scope 00010203-0405-4607-8809-0a0b0c0d0e0f
	// attempt a1 lines 4 calls 1 responses 1
	// true
}
