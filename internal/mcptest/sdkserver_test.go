package mcptest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/internal/mcptest"
)

const (
	legacyVersion = "2025-11-25"
	modernVersion = "2026-07-28"
)

// fixedTools are the sdkserver tools present unless -echo-only, in the
// server's (name-sorted) order.
var fixedTools = []string{"add_tool", "annotated", "decimals", "echo", "fail", "slow", "structured"}

// connectSDK starts sdkserver with args and connects the Go SDK client to it.
// version "" lets the client choose (it probes with server/discover). Every
// list_changed notification is sent on the returned channel.
func connectSDK(t *testing.T, version string, args ...string) (*mcp.ClientSession, <-chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	// Built first: the build (seconds under a loaded -race run) is not
	// part of the connection, which the deadline only guards against a
	// hang (the handshake itself is awaited as an event).
	cmd := exec.Command(mcptest.Build(t, "sdkserver"), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 6*lineTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, changed
}

// collect lists every page, following nextCursor; it returns the names and
// the number of pages.
func collect(t *testing.T, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	var names []string
	cursor := ""
	for pages := 1; ; pages++ {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list page %d: %v", pages, err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == "" {
			return names, pages
		}
		if pages > 100 {
			t.Fatal("more than 100 pages")
		}
		cursor = res.NextCursor
	}
}

func generatedNames(n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("tool-%04d", i))
	}
	return names
}

func waitChanged(t *testing.T, changed <-chan struct{}) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(lineTimeout):
		t.Fatal("no notifications/tools/list_changed")
	}
}

func TestSDKServerBothEras(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ask, want string
	}{
		{"legacy", legacyVersion, legacyVersion},
		{"modern", "", modernVersion}, // the SDK's default: server/discover first
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, changed := connectSDK(t, tc.ask, "-tools", "8", "-page-size", "4")
			if got := cs.InitializeResult().ProtocolVersion; got != tc.want {
				t.Fatalf("negotiated %q, want %q", got, tc.want)
			}
			names, pages := collect(t, cs)
			want := append(slices.Clone(fixedTools), generatedNames(8)...)
			if !slices.Equal(names, want) || pages != 4 {
				t.Fatalf("got %d pages %v, want 4 pages %v", pages, names, want)
			}
			ctx := context.Background()

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"a": 1}})
			if err != nil || res.IsError {
				t.Fatalf("echo: %v %+v", err, res)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; text != `{"a":1}` {
				t.Errorf("echo text %q", text)
			}
			if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"a":1}` {
				t.Errorf("echo structuredContent %s", sc)
			}
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail"}); err != nil || !res.IsError {
				t.Errorf("fail: %v, isError %v", err, res != nil && res.IsError)
			}
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "structured", Arguments: map[string]any{"city": "Oslo"}}); err != nil {
				t.Errorf("structured: %v", err)
			} else if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"celsius":21.5,"city":"Oslo"}` {
				t.Errorf("structured: %s", sc)
			}

			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_tool", Arguments: map[string]any{"name": "zz-new"}}); err != nil {
				t.Fatalf("add_tool: %v", err)
			}
			waitChanged(t, changed)
			names, _ = collect(t, cs)
			if len(names) != 16 || names[15] != "zz-new" {
				t.Errorf("after add_tool: %v", names)
			}
		})
	}
}

func TestSDKServerAddToolAfterList(t *testing.T) {
	t.Parallel()
	cs, changed := connectSDK(t, legacyVersion, "-tools", "8", "-page-size", "4", "-add-tool-after-list", "2")
	ctx := context.Background()
	p1, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Fatal("list_changed after the first page")
	case <-time.After(100 * time.Millisecond):
	}
	p2, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: p1.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	waitChanged(t, changed) // mid-collection
	var names []string
	for _, tool := range append(p1.Tools, p2.Tools...) {
		names = append(names, tool.Name)
	}
	for cursor := p2.NextCursor; cursor != ""; {
		p, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range p.Tools {
			names = append(names, tool.Name)
		}
		cursor = p.NextCursor
	}
	// late_tool sorts before the cursor, so this collection misses it.
	if slices.Contains(names, "late_tool") || len(names) != 15 {
		t.Errorf("collection across the change: %v", names)
	}
	if names, _ := collect(t, cs); !slices.Contains(names, "late_tool") || len(names) != 16 {
		t.Errorf("fresh collection: %v", names)
	}
}

func TestSDKServerSlowHonoursCancellation(t *testing.T) {
	t.Parallel()
	cs, _ := connectSDK(t, legacyVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 60000}})
	if err == nil {
		t.Fatal("slow returned without error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled call took %v", d)
	}
	// The session is still usable.
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 1}}); err != nil || res.IsError {
		t.Fatalf("slow 1 ms: %v", err)
	}
}

func TestSDKServerEchoOnly(t *testing.T) {
	t.Parallel()
	cs, _ := connectSDK(t, legacyVersion, "-echo-only")
	if names, _ := collect(t, cs); !slices.Equal(names, []string{"echo"}) {
		t.Errorf("tools: %v", names)
	}
}

// TestSDKServerWireFacts pins what go-sdk v1.8.0 puts on the wire, as the
// package doc of sdkserver describes; tracectl's recorder must cope with it.
func TestSDKServerWireFacts(t *testing.T) {
	t.Parallel()
	c := mcptest.StartRaw(t, mcptest.Build(t, "sdkserver"), "-tools", "2", "-page-size", "3")

	// Legacy requests before initialize are refused, with code 0.
	_, r := roundTrip(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.Error == nil || r.Error.Code != 0 || !strings.Contains(r.Error.Message, "invalid during session initialization") {
		t.Errorf("tools/list before initialize: %+v", r.Error)
	}
	// server/discover without the modern _meta: -32601 (a dual-era client's fallback signal).
	if _, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("discover without _meta: %+v", r.Error)
	}
	line, _ := roundTrip(t, c, `{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{`+modernMeta+`}}`)
	want := `{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` +
		`{"name":"tracectl-sdkserver","title":"tracectl test server (go-sdk)","version":"1.0.0"}},"ttlMs":0,"cacheScope":"public",` +
		`"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"capabilities":{"logging":{},"tools":{"listChanged":true}}}}` + "\n"
	if string(line) != want {
		t.Errorf("discover:\n got %s\nwant %s", line, want)
	}
	for _, e := range []struct {
		req  string
		code int
	}{
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, -32602},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022},
		{`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{` + modernMeta + `}}`, -32601},
	} {
		if line, r := roundTrip(t, c, e.req); r.Error == nil || r.Error.Code != e.code {
			t.Errorf("%s: got %s, want %d", e.req, line, e.code)
		}
	}
	// Modern results: resultType and serverInfo; ids go through float64.
	line, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list","params":{`+modernMeta+`}}`)
	if string(r.ID) != "9007199254740992" {
		t.Errorf("id 9007199254740993 answered as %s", r.ID)
	}
	m := members(t, r.Result)
	if string(m["resultType"]) != `"complete"` || string(m["ttlMs"]) != "0" || m["_meta"] == nil {
		t.Errorf("modern page: %s", line)
	}
	if _, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{`+modernMeta+`}}`); string(r.ID) != "1" {
		t.Errorf("id 1.5 answered as %s", r.ID)
	}
	// Cursor "" restarts at the first page.
	_, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"",`+modernMeta+`}}`)
	if got := members(t, r.Result)["tools"]; !bytes.Contains(got, []byte(`"name":"add_tool"`)) {
		t.Errorf(`cursor "" did not restart: %s`, got)
	}

	// Legacy handshake on the same process; legacy results still carry the
	// cache fields but no resultType.
	roundTrip(t, c, initLegacy)
	if err := c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		t.Fatal(err)
	}
	var pages [][]byte
	cursor := ""
	for {
		req := `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
		if cursor != "" {
			req = `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"cursor":` + cursor + `}}`
		}
		line, r := roundTrip(t, c, req)
		pages = append(pages, line)
		m := members(t, r.Result)
		if m["resultType"] != nil || string(m["ttlMs"]) != "0" || string(m["cacheScope"]) != `"public"` {
			t.Errorf("legacy page: %s", line)
		}
		if m["nextCursor"] == nil {
			break
		}
		cursor = string(m["nextCursor"])
	}
	all := bytes.Join(pages, nil)
	// Raw schemas keep their number text and member order.
	for _, lit := range []string{
		`"ratio":{"type":"number","minimum":0.5,"maximum":1,"default":0.7,"multipleOf":0.25}`,
		`"count":{"type":"integer","minimum":0,"maximum":9007199254740991}`,
		`"description":"Outil généré n°1 — 生成されたツール 🔧"`,
		`"outputSchema":{"type":"object"`,
		`"annotations":{"destructiveHint":true,"idempotentHint":true,"openWorldHint":false,"readOnlyHint":false,"title":"Deletes things (not really)"}`,
		`"_meta":{"com.example.vendor/limits":{"burst":10,"rps":5},"com.example.vendor/owner":"team-tools"}`,
		`"icons":[{"src":"https://example.com/icon.png","mimeType":"image/png","sizes":["48x48"]}`,
		`"title":"Annotated tool"`,
	} {
		if !bytes.Contains(all, []byte(lit)) {
			t.Errorf("pages lack %s", lit)
		}
	}
	if n := len(pages); n != 3 { // 9 tools, 3 per page
		t.Errorf("%d pages, want 3", n)
	}

	// Arguments are echoed with their number text, but <, & and > in
	// strings are re-escaped as \u003c, \u0026, \u003e.
	line, _ = roundTrip(t, c, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"s":"<&>","x":1.0,"y":9007199254740993}}}`)
	if !bytes.Contains(line, []byte(`"structuredContent":{"s":"\u003c\u0026\u003e","x":1.0,"y":9007199254740993}`)) {
		t.Errorf("echo: %s", line)
	}

	// A cancelled request is still answered, with an error (code 0).
	if err := c.Send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10}}`); err != nil {
		t.Fatal(err)
	}
	if _, r = recv(t, c); string(r.ID) != "10" || r.Error == nil || r.Error.Code != 0 || !strings.Contains(r.Error.Message, "context canceled") {
		t.Errorf("cancelled call: id %s error %+v", r.ID, r.Error)
	}
	// A request with id null is treated as a notification: no answer.
	if err := c.Send(`{"jsonrpc":"2.0","id":null,"method":"ping"}`); err != nil {
		t.Fatal(err)
	}
	if _, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":11,"method":"ping"}`); string(r.ID) != "11" {
		t.Errorf("after an id-null ping the next answer is for %s, want 11", r.ID)
	}
	if err := c.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(lineTimeout); err != nil && !errors.Is(err, mcptest.ErrTimeout) {
		t.Errorf("exit: %v", err)
	}
}

// TestSDKClientAgainstRawServer checks that the Go SDK client can drive
// rawserver in each era, so other packages may use either peer with it.
func TestSDKClientAgainstRawServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script, ask, want string
	}{
		{"paged", "", modernVersion},
		{"paged", legacyVersion, legacyVersion},
		{"modern", "", modernVersion},
		{"legacy", "", legacyVersion}, // discover probe gets -32601: falls back
	} {
		t.Run(tc.script+"/"+tc.want, func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
			})
			ctx, cancel := context.WithTimeout(context.Background(), lineTimeout)
			defer cancel()
			cmd := exec.Command(mcptest.Build(t, "rawserver"), "-script", tc.script, "-pages", "3")
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: tc.ask})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.want {
				t.Errorf("negotiated %q, want %q", got, tc.want)
			}
			if names, pages := collect(t, cs); len(names) != 9 || pages != 3 {
				t.Errorf("%d pages: %v", pages, names)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw-0008"})
			if err != nil || res.Content[0].(*mcp.TextContent).Text != "called raw-0008" {
				t.Errorf("call: %v", err)
			}
		})
	}
}
