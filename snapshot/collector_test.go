package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// ex is one tools/list exchange as raw lines.
type ex struct{ req, resp string }

func listReq(id string, cursor *string) string {
	if cursor == nil {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{}}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"cursor":` + quote(*cursor) + `}}`
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

func ptr[T any](v T) *T { return &v }

func tool(name string) string {
	return `{"name":"` + name + `","inputSchema":{"type":"object"}}`
}

func page(id string, next *string, tools ...string) string {
	r := `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[` + strings.Join(tools, ",") + `]`
	if next != nil {
		r += `,"nextCursor":` + quote(*next)
	}
	return r + `,"ttlMs":60000,"cacheScope":"public"}}`
}

func collect(t *testing.T, lim Limits, exs ...ex) (*Snapshot, []error) {
	t.Helper()
	c, err := NewCollector(Options{CaptureID: "cap-1", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, e := range exs {
		errs = append(errs, c.Add([]byte(e.req), []byte(e.resp)))
	}
	s, err := c.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	checkRoundTrip(t, s)
	return s, errs
}

// checkRoundTrip asserts the invariants every snapshot must keep: its bytes
// parse back to the same manifest, and its pages verify.
func checkRoundTrip(t testing.TB, s *Snapshot) {
	t.Helper()
	m, err := ParseManifest(s.Bytes)
	if err != nil {
		t.Fatalf("ParseManifest(own bytes): %v\n%s", err, s.Bytes)
	}
	if b, _ := m.Encode(); string(b) != string(s.Bytes) || canon.SHA256(b) != s.Digest {
		t.Fatal("manifest does not re-encode to its bytes")
	}
	if probs := VerifyPages(m, snapshotLoader(s)); len(probs) != 0 {
		t.Fatalf("VerifyPages on fresh snapshot: %v", probs)
	}
}

func snapshotLoader(s *Snapshot) LoadFunc {
	blobs := map[string][]byte{}
	for _, p := range s.Pages {
		blobs[canon.SHA256(p.Request)] = p.Request
		blobs[canon.SHA256(p.Response)] = p.Response
	}
	return func(d string) ([]byte, error) {
		if b, ok := blobs[d]; ok {
			return b, nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestCollectorFacts(t *testing.T) {
	empty := ""
	c2, c3 := "c2", "c3"
	tests := []struct {
		name        string
		lim         Limits
		exs         []ex
		listChanged int // NotifyListChanged after this many exchanges (-1 never)
		want        []string
		pages       int
		tools       int
		terminal    bool
	}{
		{name: "single page", exs: []ex{{listReq("1", nil), page("1", nil, tool("a"), tool("b"))}},
			want: []string{}, pages: 1, tools: 2, terminal: true},
		{name: "empty string cursor is a cursor", exs: []ex{
			{listReq("1", nil), page("1", &empty, tool("a"))},
			{listReq("2", &empty), page("2", nil, tool("b"))}},
			want: []string{}, pages: 2, tools: 2, terminal: true},
		{name: "repeated cursor", exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), page("2", &c2, tool("b"))},
			{listReq("3", &c2), page("3", &c2, tool("b"))}},
			want: []string{stopRepeatedCursor}, pages: 2, tools: 2},
		{name: "joined mid-stream", exs: []ex{
			{listReq("7", &c2), page("7", nil, tool("b"))}},
			want: []string{reasonJoinedMidStream}, pages: 1, tools: 1, terminal: true},
		{name: "no pages", want: []string{reasonNoPages}},
		{name: "not terminal yet", exs: []ex{{listReq("1", nil), page("1", &c2, tool("a"))}},
			want: []string{reasonTerminalNotReached}, pages: 1, tools: 1},
		{name: "page limit exactly reached", lim: Limits{MaxPages: 2}, exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), page("2", nil, tool("b"))}},
			want: []string{}, pages: 2, tools: 2, terminal: true},
		{name: "page limit exceeded", lim: Limits{MaxPages: 2}, exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), page("2", &c3, tool("b"))},
			{listReq("3", &c3), page("3", nil, tool("c"))}},
			want: []string{stopPageLimit}, pages: 2, tools: 2},
		{name: "page bytes at limit", lim: Limits{MaxPageBytes: int64(len(page("1", nil, tool("a"))))}, exs: []ex{
			{listReq("1", nil), page("1", nil, tool("a"))}},
			want: []string{}, pages: 1, tools: 1, terminal: true},
		{name: "page bytes over limit", lim: Limits{MaxPageBytes: int64(len(page("1", nil, tool("a")))) - 1}, exs: []ex{
			{listReq("1", nil), page("1", nil, tool("a"))}},
			want: []string{reasonNoPages, StopPageBytesLimit}},
		{name: "total bytes over limit", lim: Limits{MaxTotalBytes: int64(len(listReq("1", nil)) + len(page("1", &c2, tool("a"))) + 10)}, exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), page("2", nil, tool("b"))}},
			want: []string{stopTotalBytesLimit}, pages: 1, tools: 1},
		{name: "jsonrpc error", exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad cursor"}}`}},
			want: []string{stopJSONRPCError}, pages: 2, tools: 1},
		{name: "list_changed during", exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), page("2", nil, tool("b"))}}, listChanged: 1,
			want: []string{reasonListChangedDuring}, pages: 2, tools: 2, terminal: true},
		{name: "list_changed after collection", exs: []ex{
			{listReq("1", nil), page("1", nil, tool("a"))}}, listChanged: 1,
			want: []string{reasonListChangedBeforeDispatch}, pages: 1, tools: 1, terminal: true},
		{name: "duplicate names across pages", exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c2), page("2", nil, tool("a"))}},
			want: []string{reasonDuplicateToolNames}, pages: 2, tools: 2, terminal: true},
		{name: "unnamed tool", exs: []ex{{listReq("1", nil), page("1", nil, `{"inputSchema":{}}`, `{"name":7}`)}},
			want: []string{reasonUnnamedTool}, pages: 1, tools: 2, terminal: true},
		{name: "unsupported declaration stays complete", exs: []ex{{listReq("1", nil), page("1", nil,
			`{"name":"dup","inputSchema":{"a":1,"a":2}}`, `{"name":"f","inputSchema":{"maximum":0.10000000000000000555}}`)}},
			want: []string{}, pages: 1, tools: 2, terminal: true},
		{name: "restart", exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", nil), page("2", nil, tool("a"))}},
			want: []string{stopRestarted}, pages: 1, tools: 1},
		{name: "unexpected cursor", exs: []ex{
			{listReq("1", nil), page("1", &c2, tool("a"))},
			{listReq("2", &c3), page("2", nil, tool("a"))}},
			want: []string{stopUnexpectedCursor}, pages: 1, tools: 1},
		{name: "huge integer ids match exactly", exs: []ex{
			{listReq("9007199254740993", nil), page("9007199254740993", nil, tool("a"))}},
			want: []string{}, pages: 1, tools: 1, terminal: true},
		{name: "id rounded through float64 is a mismatch", exs: []ex{
			{listReq("9007199254740993", nil), page("9007199254740992", nil, tool("a"))}},
			want: []string{StopInvalidPage}, pages: 1, tools: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCollector(Options{CaptureID: "cap-1", Limits: tt.lim})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tt.exs {
				if i == tt.listChanged && tt.listChanged > 0 {
					c.NotifyListChanged()
				}
				if err := c.Add([]byte(e.req), []byte(e.resp)); err != nil && !errors.Is(err, ErrFinished) {
					t.Fatalf("Add %d: %v", i, err)
				}
			}
			if tt.listChanged > 0 && tt.listChanged == len(tt.exs) {
				c.NotifyListChanged()
			}
			s, err := c.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, s)
			m := s.Manifest
			if got := m.IncompleteReasons; !slices.Equal(got, tt.want) {
				t.Errorf("incomplete reasons %q, want %q (stop %+v)", got, tt.want, m.Collection.Stop)
			}
			if m.Complete != (len(tt.want) == 0) {
				t.Errorf("complete %v with reasons %q", m.Complete, tt.want)
			}
			if got := len(m.Pages); got != tt.pages {
				t.Errorf("pages %d, want %d", got, tt.pages)
			}
			if got := len(m.Tools); got != tt.tools {
				t.Errorf("tools %d, want %d", got, tt.tools)
			}
			if m.Collection.TerminalReached != tt.terminal {
				t.Errorf("terminal %v, want %v", m.Collection.TerminalReached, tt.terminal)
			}
		})
	}
}

func TestCollectorRecordsFields(t *testing.T) {
	empty := ""
	s, _ := collect(t, Limits{},
		ex{listReq("1", nil), `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[],"nextCursor":"","ttlMs":1.5,"cacheScope":7}}`},
		ex{listReq("2", &empty), `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`},
	)
	p0, p1 := s.Manifest.Pages[0], s.Manifest.Pages[1]
	checks := []struct {
		name      string
		got, want Field
	}{
		{"page 0 cursor", p0.Cursor, Field{State: stateAbsent}},
		{"page 0 next", p0.NextCursor, Field{State: statePresent, Value: &empty}},
		{"page 0 ttl", p0.TTLMs, Field{State: stateUnsupported, Kind: "number"}},
		{"page 0 scope", p0.CacheScope, Field{State: stateInvalid, Kind: "number"}},
		{"page 0 resultType", p0.ResultType, Field{State: statePresent, Value: ptr("complete")}},
		{"page 1 cursor", p1.Cursor, Field{State: statePresent, Value: &empty}},
		{"page 1 ttl", p1.TTLMs, Field{State: stateAbsent}},
		{"page 1 scope", p1.CacheScope, Field{State: stateAbsent}},
		{"page 1 resultType", p1.ResultType, Field{State: stateAbsent}},
	}
	for _, c := range checks {
		if !sameJSON(c.got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if !s.Manifest.Complete {
		t.Errorf("incomplete: %q", s.Manifest.IncompleteReasons)
	}
}

func TestCollectorInvalidPages(t *testing.T) {
	tests := []struct {
		name, resp, invalid string
	}{
		{"not json", `{"jsonrpc":"2.0",`, invalidNotJSON},
		{"not an object", `[1]`, invalidNotResponse},
		{"no jsonrpc", `{"id":1,"result":{"tools":[]}}`, invalidNotResponse},
		{"both result and error", `{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"error":{"code":1}}`, invalidNotResponse},
		{"duplicate nextCursor", `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":"a","nextCursor":"b"}}`, invalidAmbiguous},
		{"duplicate result", `{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":{"tools":[]}}`, invalidAmbiguous},
		{"id mismatch", `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`, invalidIDMismatch},
		{"string id for integer request", `{"jsonrpc":"2.0","id":"1","result":{"tools":[]}}`, invalidIDMismatch},
		{"tools missing", `{"jsonrpc":"2.0","id":1,"result":{}}`, invalidToolsNotArray},
		{"tool not an object", `{"jsonrpc":"2.0","id":1,"result":{"tools":[1]}}`, invalidToolNotObject},
		{"nextCursor null", `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":null}}`, invalidNextCursor},
		{"input_required", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","tools":[]}}`, invalidResultType},
		{"error code not integer", `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`, invalidErrorNotReadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := collect(t, Limits{}, ex{listReq("1", nil), tt.resp})
			m := s.Manifest
			if len(m.Pages) != 1 || m.Pages[0].Outcome != outcomeInvalid || m.Pages[0].Invalid != tt.invalid {
				t.Fatalf("page %+v, want invalid %s", m.Pages, tt.invalid)
			}
			if m.Complete || m.Collection.Stop == nil || m.Collection.Stop.Reason != StopInvalidPage {
				t.Fatalf("complete %v stop %+v", m.Complete, m.Collection.Stop)
			}
		})
	}
}

func TestCollectorRejectsNonListRequests(t *testing.T) {
	c, _ := NewCollector(Options{CaptureID: "cap-1"})
	if err := c.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`), []byte(`{}`)); !errors.Is(err, ErrNotToolsList) {
		t.Errorf("tools/call: got %v, want ErrNotToolsList", err)
	}
	var ce *canon.Error
	if err := c.Add([]byte(`{"jsonrpc":`), []byte(`{}`)); !errors.As(err, &ce) {
		t.Errorf("broken request: got %v, want a canon error", err)
	}
	if err := c.Add([]byte(listReq("1", nil)), []byte(page("1", nil))); err != nil {
		t.Fatal(err)
	}
	if err := c.Add([]byte(listReq("2", nil)), []byte(page("2", nil))); !errors.Is(err, ErrFinished) {
		t.Errorf("after terminal: got %v, want ErrFinished", err)
	}
}

func TestUnsupportedDeclarations(t *testing.T) {
	s, _ := collect(t, Limits{}, ex{listReq("1", nil), page("1", nil,
		`{"name":"dup","inputSchema":{"properties":{"a":{},"a":{}}}}`,
		`{"name":"coerced","inputSchema":{"default":9007199254740993}}`,
		`{"name":"fine","inputSchema":{"minimum":0.5,"default":0.7}}`)})
	want := []Declaration{
		{Status: DeclUnsupported, Code: string(canon.CodeDuplicateKey), Pointer: ptr("/inputSchema/properties/a")},
		{Status: DeclUnsupported, Code: string(canon.CodeUnsupportedNumber), Pointer: ptr("/inputSchema/default")},
	}
	for i, w := range want {
		if got := s.Manifest.Tools[i].Declaration; !sameJSON(got, w) {
			t.Errorf("tool %d: %+v, want %+v", i, got, w)
		}
	}
	if d := s.Manifest.Tools[2].Declaration; d.Status != DeclOK {
		t.Errorf("0.5/0.7 tool: %+v", d)
	}
	if !s.Manifest.Complete {
		t.Errorf("unsupported tools made the collection incomplete: %q", s.Manifest.IncompleteReasons)
	}
}

// The digest covers the tool object exactly as served, every member
// included, under the mcp-decl policy: key order and whitespace do not
// matter, any member does.
func TestDeclarationDigestIsWholeObject(t *testing.T) {
	a := `{"name":"t","inputSchema":{"type":"object"},"_meta":{"x.y/z":1},"x-unknown":[1,2]}`
	b := `{ "x-unknown" : [1, 2], "_meta": {"x.y/z": 1.0}, "inputSchema": {"type":"object"}, "name": "t" }`
	c := `{"name":"t","inputSchema":{"type":"object"},"_meta":{"x.y/z":1}}`
	d := func(tool string) string {
		s, _ := collect(t, Limits{}, ex{listReq("1", nil), page("1", nil, tool)})
		return s.Manifest.Tools[0].Declaration.Digest
	}
	if d(a) != d(b) {
		t.Error("key order, whitespace or 1.0 vs 1 changed the digest")
	}
	if d(a) == d(c) {
		t.Error("dropping an unknown member did not change the digest")
	}
	want, err := canon.Digest([]byte(a), canon.PolicyMCPDecl)
	if err != nil || d(a) != want {
		t.Errorf("digest %s, want canon.Digest %s (%v)", d(a), want, err)
	}
}
