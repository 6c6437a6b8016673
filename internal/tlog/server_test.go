//go:build !windows

package tlog

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogServes: the key is created once (0600, log.pub next to it) and
// kept across restarts; additions are answered with a checkpoint that
// covers them; the tlog-tiles files and /entries/<N> are served, Tessera's
// private state is not.
func TestLogServes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := Open(ctx, Config{Dir: dir, Origin: "test.tracectl/serve"})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()
	for i, e := range []string{`{"a":1}`, `{"b":2}`} {
		res, err := http.Post(srv.URL+"/add", "application/json", strings.NewReader(e))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"leaf_index":`+string(rune('0'+i))+`}` {
			t.Fatalf("add %d: %d %s", i, res.StatusCode, body)
		}
	}
	get := func(p string) (int, string) {
		res, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/await/2"); code != 200 || !strings.HasPrefix(body, "test.tracectl/serve\n2\n") {
		t.Fatalf("/await/2: %d %q", code, body)
	}
	if code, body := get("/entries/1"); code != 200 || body != `{"b":2}` {
		t.Errorf("/entries/1: %d %q", code, body)
	}
	if code, _ := get("/entries/2"); code != http.StatusNotFound {
		t.Errorf("/entries/2 beyond the log: %d", code)
	}
	if code, body := get("/checkpoint"); code != 200 || !strings.HasPrefix(body, "test.tracectl/serve\n2\n") {
		t.Errorf("/checkpoint: %d %q", code, body)
	}
	for _, p := range []string{"/.state/treeState", "/log.key", "/../log.key"} {
		if code, _ := get(p); code == 200 {
			t.Errorf("%s served", p)
		}
	}
	res, err := http.Post(srv.URL+"/add", "application/json", strings.NewReader(""))
	if err != nil || res.StatusCode != http.StatusBadRequest {
		t.Errorf("empty entry: %v %v", res, err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(ctx, Config{Dir: dir, Origin: "other.origin/ignored"})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close(ctx)
	if l2.Verifier != l.Verifier || l2.Origin != "test.tracectl/serve" {
		t.Errorf("restart: key %q origin %q, want %q", l2.Verifier, l2.Origin, l.Verifier)
	}
}
