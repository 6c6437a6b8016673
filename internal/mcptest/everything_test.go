package mcptest_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest"
)

// TestEverythingSDKClient connects the Go SDK client to npm's server-everything
// the way a dual-era client does (server/discover first) and lists its tools.
func TestEverythingSDKClient(t *testing.T) {
	t.Parallel()
	bin := mcptest.EverythingBin(t)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	era := cs.InitializeResult().ProtocolVersion
	if era != legacyVersion {
		t.Errorf("negotiated %q, want %q (server-everything is legacy-only: the discover probe falls back)", era, legacyVersion)
	}
	// server-everything registers one more tool when notifications/initialized
	// arrives and announces it with list_changed.
	select {
	case <-changed:
	case <-time.After(lineTimeout):
		t.Error("no list_changed after initialization")
	}
	names, pages := collect(t, cs)
	t.Logf("server-everything %s: era %s, %d tools in %d page(s): %v", cs.InitializeResult().ServerInfo.Version, era, len(names), pages, names)
	if pages != 1 || len(names) < 10 {
		t.Errorf("got %d tools in %d pages; want one page of at least 10", len(names), pages)
	}
}

// TestEverythingRaw pins the wire behaviour of server-everything that the
// recorder's tests rely on, over raw lines.
func TestEverythingRaw(t *testing.T) {
	t.Parallel()
	c := mcptest.StartRaw(t, mcptest.EverythingBin(t))
	if _, r := roundTrip(t, c, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("server/discover: %+v, want -32601", r.Error)
	}
	if _, r := roundTrip(t, c, initLegacy); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	before := listPage(t, c, 2, nil, false)
	if err := c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		t.Fatal(err)
	}
	if _, r := recv(t, c); r.Method != "notifications/tools/list_changed" {
		t.Fatalf("after initialized: got %+v, want list_changed", r)
	}
	after := listPage(t, c, 3, nil, false)
	t.Logf("tools before initialized: %d, after: %d", len(before.names), len(after.names))
	if before.next != nil || after.next != nil || len(after.names) != len(before.names)+1 {
		t.Errorf("before %d tools (next %v), after %d (next %v)", len(before.names), before.next, len(after.names), after.next)
	}
	// It does not paginate: an unknown cursor returns the whole list again.
	if p := listPage(t, c, 4, ptr("no-such-cursor"), false); len(p.names) != len(after.names) {
		t.Errorf("unknown cursor: %d tools", len(p.names))
	}
	// Ids the TypeScript SDK cannot represent exactly get no answer at all.
	for _, id := range []string{"9007199254740993", "1.5"} {
		if err := c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`); err != nil {
			t.Fatal(err)
		}
	}
	if _, r := roundTrip(t, c, `{"jsonrpc":"2.0","id":-0,"method":"ping"}`); string(r.ID) != "0" {
		t.Errorf("the first answer after pings with ids 9007199254740993 and 1.5 is for id %s, want 0 (-0 re-encoded)", r.ID)
	}
	if err := c.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(lineTimeout); err != nil && !errors.Is(err, mcptest.ErrTimeout) {
		t.Logf("server-everything exit: %v", err)
	}
}
