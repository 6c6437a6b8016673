package snapdiff

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/snapshot"
)

// The helpers below build snapshots through the collector, as the snapshot
// package's own tests do.

type ex struct{ req, resp string }

func listReq(id string, cursor *string) string {
	if cursor == nil {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{}}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"cursor":` + fmt.Sprintf("%q", *cursor) + `}}`
}

func tool(name string) string {
	return `{"name":"` + name + `","inputSchema":{"type":"object"}}`
}

func page(id string, next *string, tools ...string) string {
	r := `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[` + strings.Join(tools, ",") + `]`
	if next != nil {
		r += `,"nextCursor":` + fmt.Sprintf("%q", *next)
	}
	return r + `,"ttlMs":60000,"cacheScope":"public"}}`
}

func collect(t *testing.T, lim snapshot.Limits, exs ...ex) (*snapshot.Snapshot, []error) {
	t.Helper()
	c, err := snapshot.NewCollector(snapshot.Options{CaptureID: "cap-1", Limits: lim})
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
	if probs := snapshot.VerifyPages(s.Manifest, snapshotLoader(s)); len(probs) != 0 {
		t.Fatalf("VerifyPages on fresh snapshot: %v", probs)
	}
	return s, errs
}

func snapshotLoader(s *snapshot.Snapshot) snapshot.LoadFunc {
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
