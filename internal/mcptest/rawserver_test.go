package mcptest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
)

const (
	modernMeta  = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	initLegacy  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	rawInfo     = `{"name":"tracectl-rawserver","version":"1.0.0"}`
	rawInfoMeta = `"_meta":{"io.modelcontextprotocol/serverInfo":` + rawInfo + `}`
)

func startRaw(t *testing.T, args ...string) *mcptest.RawClient {
	t.Helper()
	return mcptest.StartRaw(t, mcptest.Build(t, "rawserver"), args...)
}

func listReq(id int, cursor *string, modern bool) string {
	var params []string
	if cursor != nil {
		c, _ := json.Marshal(*cursor)
		params = append(params, `"cursor":`+string(c))
	}
	if modern {
		params = append(params, modernMeta)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{%s}}`, id, strings.Join(params, ","))
}

type page struct {
	line    []byte
	names   []string
	next    *string // nil: no nextCursor member
	members map[string]json.RawMessage
}

func listPage(t *testing.T, c *mcptest.RawClient, id int, cursor *string, modern bool) page {
	t.Helper()
	line, r := roundTrip(t, c, listReq(id, cursor, modern))
	if r.Error != nil {
		t.Fatalf("tools/list cursor %v: error %+v", cursor, r.Error)
	}
	p := page{line: line, members: members(t, r.Result)}
	var tools []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(p.members["tools"], &tools); err != nil {
		t.Fatalf("tools: %v", err)
	}
	for _, tool := range tools {
		p.names = append(p.names, tool.Name)
	}
	if raw, ok := p.members["nextCursor"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("nextCursor: %v", err)
		}
		p.next = &s
	}
	return p
}

func ptr(s string) *string { return &s }

func TestRawPagedBothEras(t *testing.T) {
	t.Parallel()
	for _, modern := range []bool{false, true} {
		t.Run(fmt.Sprintf("modern=%v", modern), func(t *testing.T) {
			c := startRaw(t, "-pages", "3", "-tools-per-page", "2")
			if !modern {
				line, _ := roundTrip(t, c, initLegacy)
				want := `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":` + rawInfo + `}}` + "\n"
				if string(line) != want {
					t.Fatalf("initialize:\n got %s\nwant %s", line, want)
				}
				if err := c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
					t.Fatal(err)
				}
			}
			var names []string
			var cursor *string
			for i := 1; ; i++ {
				p := listPage(t, c, i, cursor, modern)
				names = append(names, p.names...)
				_, hasType := p.members["resultType"]
				_, hasTTL := p.members["ttlMs"]
				if hasType != modern || hasTTL != modern {
					t.Errorf("page %d: resultType present %v, ttlMs present %v; want %v (modern)", i, hasType, hasTTL, modern)
				}
				if p.next == nil {
					if i != 3 {
						t.Fatalf("terminal page is %d, want 3", i)
					}
					break
				}
				if want := fmt.Sprintf("page-%d", i+1); *p.next != want {
					t.Fatalf("page %d nextCursor %q, want %q", i, *p.next, want)
				}
				cursor = p.next
			}
			want := "raw-0000 raw-0001 raw-0002 raw-0003 raw-0004 raw-0005"
			if got := strings.Join(names, " "); got != want {
				t.Errorf("tools: got %s, want %s", got, want)
			}
			_, r := roundTrip(t, c, listReq(9, ptr("bogus"), modern))
			if r.Error == nil || r.Error.Code != -32602 {
				t.Errorf("unknown cursor: got %+v, want -32602", r.Error)
			}
			line, _ := roundTrip(t, c, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"raw-0004","arguments":{}}}`)
			if want := `{"jsonrpc":"2.0","id":10,"result":{"content":[{"type":"text","text":"called raw-0004"}]}}` + "\n"; string(line) != want {
				t.Errorf("tools/call:\n got %s\nwant %s", line, want)
			}
			_, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"nope"}}`)
			if r.Error == nil || r.Error.Code != -32602 {
				t.Errorf("unknown tool: got %+v, want -32602", r.Error)
			}
		})
	}
}

func TestRawEmptyCursor(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "empty-cursor")
	p1 := listPage(t, c, 1, nil, false)
	if p1.next == nil || *p1.next != "" {
		t.Fatalf("page 1 nextCursor = %v, want present and empty", p1.next)
	}
	if !bytes.Contains(p1.line, []byte(`"nextCursor":""}`)) {
		t.Errorf("page 1 bytes lack an empty nextCursor: %s", p1.line)
	}
	p2 := listPage(t, c, 2, ptr(""), false)
	if p2.next != nil {
		t.Fatalf("page 2 nextCursor = %q, want none (terminal)", *p2.next)
	}
	if got := strings.Join(append(p1.names, p2.names...), " "); got != "raw-0000 raw-0001 raw-0002 raw-0003 raw-0004 raw-0005" {
		t.Errorf("tools: %s", got)
	}
}

func TestRawRepeatedCursor(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "repeated-cursor")
	p := listPage(t, c, 1, nil, false)
	if p.next == nil || *p.next != "again" {
		t.Fatalf("page 1 nextCursor = %v, want again", p.next)
	}
	var first []byte
	for i := 2; i < 6; i++ {
		p := listPage(t, c, 2, ptr("again"), false)
		if p.next == nil || *p.next != "again" {
			t.Fatalf("request %d: nextCursor = %v, want again", i, p.next)
		}
		if first == nil {
			first = p.line
		} else if !bytes.Equal(first, p.line) {
			t.Fatalf("repeated page differs:\n%s\n%s", first, p.line)
		}
	}
}

func TestRawDupKeys(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "dup-keys")
	p := listPage(t, c, 1, nil, false)
	if got := strings.Join(p.names, " "); got != "raw-0000 raw-dup raw-0002" {
		t.Errorf("tools: %s", got)
	}
	if !bytes.Contains(p.line, []byte(`"properties":{"a":{"type":"string"},"a":{"type":"integer"}}`)) {
		t.Errorf("page lacks the duplicate member: %s", p.line)
	}
	if n := bytes.Count(p.line, []byte(`"a":`)); n != 2 {
		t.Errorf(`"a": appears %d times, want 2 (only the bad tool)`, n)
	}
}

func TestRawDupEnvelope(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "dup-envelope")
	p := listPage(t, c, 1, nil, false)
	if !bytes.Contains(p.line, []byte(`,"nextCursor":"page-2","nextCursor":"page-3"}`)) {
		t.Fatalf("page 1 lacks the two nextCursor members: %s", p.line)
	}
	// encoding/json keeps the last member: a lenient client would skip page 2.
	if p.next == nil || *p.next != "page-3" {
		t.Errorf("encoding/json reads nextCursor %v, want page-3 (last wins)", p.next)
	}
	p2 := listPage(t, c, 2, ptr("page-2"), false)
	p3 := listPage(t, c, 3, ptr("page-3"), false)
	if p2.next == nil || *p2.next != "page-3" || p3.next != nil {
		t.Errorf("page 2 next %v, page 3 next %v; want page-3 and none", p2.next, p3.next)
	}
}

func TestRawCoercedFloat(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "coerced-float")
	p := listPage(t, c, 1, nil, false)
	for _, lit := range []string{`"maximum":0.10000000000000000555}`, `"default":9007199254740993}`} {
		if !bytes.Contains(p.line, []byte(lit)) {
			t.Errorf("page lacks %s: %s", lit, p.line)
		}
	}
	if got := strings.Join(p.names, " "); got != "raw-0000 coerced-maximum coerced-default" || p.next != nil {
		t.Errorf("tools %s, next %v", got, p.next)
	}
}

func TestRawExtraMembers(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "extra-members")
	p := listPage(t, c, 1, nil, false)
	for _, lit := range []string{`"title":null`, `"annotations":{}`, `"_meta":{}`, `"x-vendor":{"rank":1,"tags":["a","b"]}`} {
		if !bytes.Contains(p.line, []byte(lit)) {
			t.Errorf("page lacks %s: %s", lit, p.line)
		}
	}
}

func TestRawDieMidPagination(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "die-mid-pagination")
	p1 := listPage(t, c, 1, nil, false)
	p2 := listPage(t, c, 2, p1.next, false)
	if p2.next == nil || *p2.next != "page-3" {
		t.Fatalf("page 2 nextCursor = %v, want page-3 (4 pages)", p2.next)
	}
	if line, err := c.Recv(lineTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("after page 2: got %q, %v; want EOF", line, err)
	}
	var exit *exec.ExitError
	if err := c.Wait(lineTimeout); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
}

func TestRawHugePage(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "huge-page")
	if err := c.Send(listReq(1, nil, false)); err != nil {
		t.Fatal(err)
	}
	// Checked on the bytes: decoding 20 MiB under -race takes seconds.
	line, err := c.Recv(lineTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if len(line) < 20<<20 {
		t.Errorf("page is %d bytes, want at least 20 MiB", len(line))
	}
	if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"huge-000000",`)) ||
		!bytes.HasSuffix(line, []byte("}}]}}\n")) || bytes.Contains(line, []byte(`"nextCursor"`)) {
		t.Errorf("page starts %.80s and ends %s", line, line[len(line)-40:])
	}
	if n := bytes.Count(line, []byte(`{"name":"huge-`)); n < 10000 {
		t.Errorf("%d tools", n)
	}
}

func TestRawModern(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "modern")
	line, _ := roundTrip(t, c, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	want := `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],` +
		`"capabilities":{"tools":{"listChanged":true}},"ttlMs":60000,"cacheScope":"public",` + rawInfoMeta + `}}` + "\n"
	if string(line) != want {
		t.Errorf("discover:\n got %s\nwant %s", line, want)
	}
	errs := []struct {
		req  string
		code int
	}{
		{`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`, -32602},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, -32602},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, -32602},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022},
		{initLegacy, -32601},
	}
	for _, e := range errs {
		line, r := roundTrip(t, c, e.req)
		if r.Error == nil || r.Error.Code != e.code {
			t.Errorf("%s: got %s, want code %d", e.req, line, e.code)
		}
		if e.code == -32022 && string(r.Error.Data) != `{"supported":["2026-07-28"],"requested":"2025-11-25"}` {
			t.Errorf("-32022 data: %s", r.Error.Data)
		}
	}
	p := listPage(t, c, 6, nil, true)
	if !bytes.HasPrefix(p.line, []byte(`{"jsonrpc":"2.0","id":6,"result":{"resultType":"complete","tools":[`)) ||
		!bytes.HasSuffix(p.line, []byte(`,"nextCursor":"page-2","ttlMs":60000,"cacheScope":"public",`+rawInfoMeta+"}}\n")) {
		t.Errorf("modern page: %s", p.line)
	}
}

func TestRawLegacy(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "legacy")
	_, r := roundTrip(t, c, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	if r.Error == nil || r.Error.Code != -32601 {
		t.Fatalf("discover: got %+v, want -32601", r.Error)
	}
	_, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	if v := members(t, r.Result)["protocolVersion"]; string(v) != `"2025-06-18"` {
		t.Errorf("initialize answered %s, want the requested 2025-06-18", v)
	}
	p := listPage(t, c, 3, nil, true) // modern _meta is ignored
	if _, ok := p.members["resultType"]; ok {
		t.Errorf("legacy page has resultType: %s", p.line)
	}
}

func TestRawNeverAnswer(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "never-answer")
	if err := c.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raw-0000"}}`); err != nil {
		t.Fatal(err)
	}
	_, r := roundTrip(t, c, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if string(r.ID) != "6" {
		t.Fatalf("first answer is for id %s, want 6 (the call must stay unanswered)", r.ID)
	}
	if line, err := c.Recv(200 * time.Millisecond); !errors.Is(err, mcptest.ErrTimeout) {
		t.Fatalf("got %q, %v; want silence", line, err)
	}
	if err := c.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(lineTimeout); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestRawCloseStdout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script   string
		answered bool
	}{{"close-stdout", true}, {"close-stdout-unanswered", false}} {
		t.Run(tc.script, func(t *testing.T) {
			c := startRaw(t, "-script", tc.script)
			if err := c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"raw-0000"}}`); err != nil {
				t.Fatal(err)
			}
			if tc.answered {
				if _, r := recv(t, c); string(r.ID) != "1" || r.Result == nil {
					t.Fatalf("first call not answered: %+v", r)
				}
			}
			if line, err := c.Recv(lineTimeout); !errors.Is(err, io.EOF) {
				t.Fatalf("got %q, %v; want EOF on stdout", line, err)
			}
			if err := c.Wait(200 * time.Millisecond); !errors.Is(err, mcptest.ErrTimeout) {
				t.Fatalf("server exited with stdin still open: %v", err)
			}
			if err := c.Send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); err != nil {
				t.Fatalf("stdin closed early: %v", err)
			}
			if err := c.CloseStdin(); err != nil {
				t.Fatal(err)
			}
			if err := c.Wait(lineTimeout); err != nil {
				t.Fatalf("exit after stdin closed: %v", err)
			}
		})
	}
}

func TestRawEchoIDs(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "echo-ids")
	for _, id := range []string{`9007199254740993`, `-0`, `1.5`, `""`, `null`, `1e2`, `-9223372036854775809`, `"\u0041\ud83d\ude00"`} {
		line, _ := roundTrip(t, c, `{"jsonrpc":"2.0","id":`+id+`,"method":"vendor/unknown"}`)
		if want := `{"jsonrpc":"2.0","id":` + id + `,"result":{}}` + "\n"; string(line) != want {
			t.Errorf("id %s:\n got %s\nwant %s", id, line, want)
		}
	}
	line, _ := roundTrip(t, c, `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"raw-0000"}}`)
	if want := `{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":[{"type":"text","text":"9007199254740993"}]}}` + "\n"; string(line) != want {
		t.Errorf("tools/call:\n got %s\nwant %s", line, want)
	}

	// Outside echo-ids a null id is refused, but odd numbers are still echoed.
	d := startRaw(t)
	if line, _ := roundTrip(t, d, `{"jsonrpc":"2.0","id":null,"method":"ping"}`); string(line) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request id"}}`+"\n" {
		t.Errorf("null id: %s", line)
	}
	if line, _ := roundTrip(t, d, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`); string(line) != `{"jsonrpc":"2.0","id":1.5,"result":{}}`+"\n" {
		t.Errorf("1.5 id: %s", line)
	}
}

func TestRawInputRequired(t *testing.T) {
	t.Parallel()
	c := startRaw(t, "-script", "input-required")
	line, r := roundTrip(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"raw-0000","arguments":{}}}`)
	m := members(t, r.Result)
	if string(m["resultType"]) != `"input_required"` || string(m["requestState"]) != `"step=1"` || m["inputRequests"] == nil || m["content"] != nil {
		t.Fatalf("first call: %s", line)
	}
	_, r = roundTrip(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+modernMeta+`,"name":"raw-0000","arguments":{},"requestState":"step=0","inputResponses":{"who":{"action":"accept","content":{"name":"x"}}}}}`)
	if r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("wrong requestState: %+v, want -32602", r.Error)
	}
	line, _ = roundTrip(t, c, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{`+modernMeta+`,"name":"raw-0000","arguments":{},"requestState":"step=1","inputResponses":{"who":{"action":"accept","content":{"name":"MCP Go"}}}}}`)
	want := `{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[{"type":"text","text":"hello MCP Go"}],` + rawInfoMeta + `}}` + "\n"
	if string(line) != want {
		t.Errorf("continuation:\n got %s\nwant %s", line, want)
	}
}
