package snapshot

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// fuzzPages are seeds for the page parser: real shapes and the hostile ones.
var fuzzPages = []struct{ req, resp string }{
	{listReq("1", nil), page("1", nil, tool("a"))},
	{listReq("1", nil), page("1", ptr(""), tool("a"), `{"name":"b","inputSchema":{"minimum":0.5,"default":0.7},"_meta":{"x/y":1}}`)},
	{listReq("9007199254740993", ptr("c")), page("9007199254740993", ptr("c"))},
	{listReq(`"s"`, nil), `{"jsonrpc":"2.0","id":"s","result":{"tools":[],"nextCursor":"a","nextCursor":"b"}}`},
	{listReq("1", nil), `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"d","inputSchema":{"a":1,"a":2}}],"ttlMs":1e400,"cacheScope":null}}`},
	{listReq("1", nil), `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`},
	{listReq("1", nil), `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","tools":[7]}}`},
	{listReq("1", nil), `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"\ud800"}]}}`},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":7}}`, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
}

// FuzzCollectorAdd feeds one exchange to a collector. Whatever the bytes,
// the snapshot must encode, parse back to itself, and verify against the
// very bytes it was made from.
func FuzzCollectorAdd(f *testing.F) {
	for _, p := range fuzzPages {
		f.Add([]byte(p.req), []byte(p.resp))
	}
	f.Fuzz(func(t *testing.T, req, resp []byte) {
		c, err := NewCollector(Options{CaptureID: "cap-fuzz", Limits: Limits{MaxPageBytes: 1 << 16, MaxTotalBytes: 1 << 17}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Add(req, resp); err != nil {
			return // not a readable tools/list request: nothing recorded
		}
		if raw, ok := c.nextCursor(); ok {
			// Follow the cursor once, echoing the served text exactly.
			next := append(append([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":`), raw...), `}}`...)
			if err := c.Add(next, resp); err != nil && !errors.Is(err, ErrFinished) {
				t.Fatalf("second Add: %v", err)
			}
		}
		s, err := c.Snapshot()
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		checkRoundTrip(t, s)
	})
}

// FuzzParseManifest: whatever ParseManifest accepts re-encodes to exactly
// the bytes it was given.
func FuzzParseManifest(f *testing.F) {
	for _, p := range fuzzPages {
		c, _ := NewCollector(Options{CaptureID: "cap-fuzz"})
		_ = c.Add([]byte(p.req), []byte(p.resp))
		s, err := c.Snapshot()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.Bytes)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if !errors.Is(err, errManifest) {
				t.Fatalf("error without ErrManifest: %v", err)
			}
			return
		}
		b, err := m.Encode()
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("accepted manifest does not re-encode to its bytes: %v", err)
		}
	})
}

// TestWriteFuzzCorpus writes the seeds above as files under testdata/fuzz
// (with -update), so `go test` replays them even where f.Add is edited.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	write := func(name string, i int, vals ...[]byte) {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, v := range vals {
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range fuzzPages {
		write("FuzzCollectorAdd", i, []byte(p.req), []byte(p.resp))
		c, _ := NewCollector(Options{CaptureID: "cap-fuzz"})
		_ = c.Add([]byte(p.req), []byte(p.resp))
		s, _ := c.Snapshot()
		write("FuzzParseManifest", i, s.Bytes)
	}
}
