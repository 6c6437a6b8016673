package clientread

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKCopyMatchesClient serves each SSE case as the response to a POST
// from the Go SDK's own streamable client and checks that the client acts on
// exactly the messages GoSDKMessages names (up to the first it cannot
// decode, where it fails the connection).
func TestGoSDKCopyMatchesClient(t *testing.T) {
	for _, tc := range sseCases {
		body := []byte(expand(tc.in))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				http.Error(w, "no", http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(body)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1}
		conn, err := tr.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A call whose id no case answers: the client reads the whole body.
		call := &jsonrpc.Request{ID: mustID(t, "never"), Method: "ping"}
		if err := conn.Write(ctx, call); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		var got []string
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				break
			}
			if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == call.ID {
				break // the client's "request terminated without response"
			}
			if req, ok := msg.(*jsonrpc.Request); ok {
				got = append(got, req.Method)
			}
		}
		conn.Close()
		cancel()
		srv.Close()

		datas, _ := GoSDKMessages(body)
		var want []string
		for _, d := range datas {
			m, _, err := GoSDKDecode(d)
			if err != nil {
				break
			}
			if req, ok := m.(*jsonrpc.Request); ok {
				want = append(want, req.Method)
			}
		}
		if tc.name == "plain" && len(got) != 1 {
			t.Errorf("plain: Go SDK client acted on %q: the harness reads nothing", got)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: Go SDK client acted on %q, copy says %q", tc.name, got, want)
		}
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
