package session_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/internal/session"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// listSession is a client's tools/list traffic as the proxy's sink sees it,
// changed by features that each make the collection incomplete in one way.
type listSession struct {
	midStream, listChanged, duplicate, unnamed, firstPageOnly, pageError, repeatCursor, restart bool
	unexpectedCursor, pageLimit, invalidPage                                                    bool
}

var listFeatures = []struct {
	name string
	set  func(*listSession)
}{
	{"joined_mid_stream", func(s *listSession) { s.midStream = true }},
	{"list_changed_during_collection", func(s *listSession) { s.listChanged = true }},
	{"duplicate_tool_names", func(s *listSession) { s.duplicate = true }},
	{"unnamed_tool", func(s *listSession) { s.unnamed = true }},
	{"next_page_not_observed", func(s *listSession) { s.firstPageOnly = true }},
	{"jsonrpc_error", func(s *listSession) { s.pageError = true }},
	{"repeated_cursor", func(s *listSession) { s.repeatCursor = true }},
	{"restarted", func(s *listSession) { s.restart = true }},
	{"unexpected_cursor", func(s *listSession) { s.unexpectedCursor = true }},
	{"page_limit", func(s *listSession) { s.pageLimit = true }},
	{"invalid_page", func(s *listSession) { s.invalidPage = true }},
}

func tool(name string) string {
	return `{"name":"` + name + `","inputSchema":{"type":"object"}}`
}

// record drives a RecordingSink over a real producer journal: the pages,
// a tools/call of tool a with its response, the end of the session, the
// seal. It returns the bundle directory and the trusted key.
func (ls listSession) record(t *testing.T) (string, ed25519.PublicKey) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b.trace")
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	signer, err := sign.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	entropy := bytes.NewReader(bytes.Repeat([]byte{3}, 1<<16))
	rec, err := producer.Open(dir, producer.Options{
		Clock: time.Now, Entropy: entropy, Durability: transcript.DurabilityNone,
		Producer: transcript.Producer{Name: "test", Version: "v0"},
		Server:   transcript.Server{Transport: transcript.TransportStdio, Name: "pages"},
		// The sink commits frames with their indexes, as the proxy does.
		FramesCommitted: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var lim snapshot.Limits
	if ls.pageLimit {
		lim.MaxPages = 1
	}
	sink := session.NewRecordingSink(rec, func() (string, error) { return snapshot.NewCaptureID(entropy) }, lim)
	id := 0
	page := func(cursor, next string, tools ...string) {
		id++
		params := "{}"
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":%s}`+"\n", id, params)
		nc := ""
		if next != "" {
			nc = `,"nextCursor":"` + next + `"`
		}
		resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"tools":[%s]%s}}`+"\n", id, strings.Join(tools, ","), nc)
		if err := sink.ListPage([]byte(req), []byte(resp), false); err != nil {
			t.Fatal(err)
		}
	}
	first := ""
	if ls.midStream {
		first = "c0"
	}
	if ls.restart {
		page(first, "c1", tool("a"), tool("b"))
	}
	page(first, "c1", tool("a"), tool("b"))
	var serverFrames int64 // the server frames this session commits with an index
	if ls.listChanged {
		if err := sink.ListChanged(session.NotificationObs{Line: []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n"), Index: serverFrames}); err != nil {
			t.Fatal(err)
		}
		serverFrames++
	}
	if !ls.firstPageOnly {
		tools := []string{tool("c")}
		if ls.duplicate {
			tools = append(tools, tool("a"))
		}
		if ls.unnamed {
			tools = append(tools, `{"inputSchema":{"type":"object"}}`)
		}
		switch {
		case ls.invalidPage:
			id++
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"cursor":"c1"}}`+"\n", id)
			resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"tools":"not an array"}}`+"\n", id)
			if err := sink.ListPage([]byte(req), []byte(resp), false); err != nil {
				t.Fatal(err)
			}
		case ls.unexpectedCursor:
			page("c9", "", tools...)
		case ls.pageError:
			id++
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"cursor":"c1"}}`+"\n", id)
			resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"boom"}}`+"\n", id)
			if err := sink.ListPage([]byte(req), []byte(resp), true); err != nil {
				t.Fatal(err)
			}
		case ls.repeatCursor:
			page("c1", "c1", tools...)
		default:
			page("c1", "", tools...)
		}
	}
	call := []byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"a","arguments":{}}}` + "\n")
	a, err := sink.Attempt(session.Call{Line: call, Terminator: mcpwire.TermLF})
	if err != nil {
		t.Fatal(err)
	}
	resp := []byte(`{"jsonrpc":"2.0","id":"call-1","result":{"content":[]}}` + "\n")
	if err := sink.Response(a, session.ResponseObs{Line: resp, ResultType: "complete", Index: serverFrames}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Seal(context.Background(), sign.TranscriptSigner{Key: signer, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("reasons test"))}}); err != nil {
		t.Fatal(err)
	}
	return dir, key.Public().(ed25519.PublicKey)
}

// expected returns the reasons the session's snapshots must name. Page-2
// features exclude each other (a first-page-only client never sees page 2;
// an error page carries no tools), and a restart after a mid-stream join
// repeats the joined cursor, which is unexpected_cursor instead.
func (ls listSession) expected() []string {
	var r []string
	if ls.midStream {
		r = append(r, "joined_mid_stream")
	}
	if ls.listChanged {
		r = append(r, "list_changed_during_collection")
	}
	switch {
	case ls.pageLimit:
		// One page allowed, a next one offered: collection stops at the
		// first page, so what follows (a list_changed, page 2) belongs to
		// no collection or a new one, joined mid-stream.
		r = []string{"page_limit"}
		if ls.midStream {
			r = append(r, "joined_mid_stream")
		}
		return r
	case ls.firstPageOnly:
		r = append(r, snapshot.StopNextPageNotObserved)
	case ls.invalidPage:
		r = append(r, snapshot.StopInvalidPage)
	case ls.unexpectedCursor:
		r = append(r, "unexpected_cursor")
	case ls.pageError:
		r = append(r, "jsonrpc_error")
	default:
		if ls.repeatCursor {
			r = append(r, "repeated_cursor")
		}
		if ls.duplicate {
			r = append(r, "duplicate_tool_names")
		}
		if ls.unnamed {
			r = append(r, "unnamed_tool")
		}
	}
	if ls.restart && !ls.midStream {
		r = append(r, "restarted")
	}
	return r
}

// snapshotReasons returns the incomplete reasons of the snapshot lines of
// a bundle's transcript.
func snapshotReasons(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		ev, err := transcript.DecodeLine(l)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := ev.(*transcript.SnapshotEvent); ok {
			out = append(out, s.IncompleteReason)
		}
	}
	return out
}

// TestIncompleteReasonPairs: honest sessions through the proxy's recording
// sink with every single and every pair of incomplete-collection features
// are never failed (the producer's joined reasons agree with the verifier),
// and the reasons the snapshot lines name include each feature's.
func TestIncompleteReasonPairs(t *testing.T) {
	type combo struct {
		name string
		ls   listSession
	}
	var combos []combo
	for i, f := range listFeatures {
		var ls listSession
		f.set(&ls)
		combos = append(combos, combo{f.name, ls})
		for _, g := range listFeatures[i+1:] {
			var ls2 listSession
			f.set(&ls2)
			g.set(&ls2)
			combos = append(combos, combo{f.name + "+" + g.name, ls2})
		}
	}
	for _, c := range combos {
		t.Run(c.name, func(t *testing.T) {
			dir, pub := c.ls.record(t)
			v, err := verify.New(verify.Options{TrustedKey: pub, At: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			rep, _ := v.Bundle(context.Background(), verify.DirFS(dir))
			if rep == nil {
				t.Fatal("no report")
			}
			if rep.Verdict == verify.Failed {
				var b strings.Builder
				for _, f := range rep.Findings {
					if f.Status == verify.StatusFail {
						fmt.Fprintf(&b, "  %s [%s] %s\n", f.Code, f.Subject, f.Detail)
					}
				}
				t.Fatalf("an honest session is failed:\n%s", b.String())
			}
			all := strings.Join(snapshotReasons(t, dir), ",")
			for _, w := range c.ls.expected() {
				if !strings.Contains(all, w) {
					t.Errorf("snapshot reasons %q lack %s", all, w)
				}
			}
			if strings.Contains(all, snapshot.StopTransportClosed) {
				t.Errorf("snapshot reasons %q name transport_closed: the session ended normally", all)
			}
		})
	}
}
