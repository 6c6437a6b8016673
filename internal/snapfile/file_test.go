package snapfile

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/snapshot"
)

func listReq(id, cursor string) string {
	if cursor == "" {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{}}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"cursor":"` + cursor + `"}}`
}

func page(id, next string, tools ...string) string {
	r := `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[` + strings.Join(tools, ",") + `]`
	if next != "" {
		r += `,"nextCursor":"` + next + `"`
	}
	return r + `,"ttlMs":60000,"cacheScope":"public"}}`
}

func tool(name string) string { return `{"name":"` + name + `","inputSchema":{"type":"object"}}` }

// collect returns the snapshot of the given request and response lines.
func collect(t testing.TB, lines ...string) *snapshot.Snapshot {
	t.Helper()
	c, err := snapshot.NewCollector(snapshot.Options{CaptureID: "cap-1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(lines); i += 2 {
		if err := c.Add([]byte(lines[i]), []byte(lines[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func twoPages(t testing.TB) *snapshot.Snapshot {
	return collect(t,
		listReq("1", ""), page("1", "c2", tool("a"), tool("b")),
		listReq("2", "c2"), page("2", "", `{"name":"c","description":"third","inputSchema":{"type":"object","minimum":0.5}}`))
}

func TestFileRoundTrip(t *testing.T) {
	s := twoPages(t)
	data, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Digest != s.Digest || !bytes.Equal(f.ManifestBytes, s.Bytes) || len(f.Blobs) != 4 {
		t.Fatalf("file: digest %s blobs %d", f.Digest, len(f.Blobs))
	}
	if p := snapshot.VerifyPages(f.Manifest, f.Load); len(p) != 0 {
		t.Fatal(p)
	}
	bad := []struct{ name, data string }{
		{"trailing newline", string(data) + "\n"},
		{"format", strings.Replace(string(data), Format, "x", 1)},
		{"non-canonical base64 position", strings.Replace(string(data), `{"blobs":{`, `{"blobs":{"sha256:`+strings.Repeat("f", 64)+`":"",`, 1)},
		{"bad base64", strings.Replace(string(data), `":"`, `":"*`, 1)},
	}
	for _, b := range bad {
		if _, err := Parse([]byte(b.data)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", b.name, err)
		}
	}
}

// FuzzParse: whatever Parse accepts is exactly the file Encode would write
// for its contents. The corpus under testdata/fuzz/FuzzParse holds the
// files of the snapshot package's fuzz seeds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(nil))
	data, _ := Encode(twoPages(f))
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if !bytes.Equal(encodeFile(fl.Blobs, fl.ManifestBytes), data) {
			t.Fatal("accepted file is not its own encoding")
		}
		_ = snapshot.VerifyPages(fl.Manifest, fl.Load)
	})
}
