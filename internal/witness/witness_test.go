//go:build !windows

package witness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"

	"github.com/tracectl/tracectl/internal/tlog"
)

// TestProtocol drives the witness with a real Tessera log's checkpoints
// and proofs (internal/tlog): a first checkpoint is cosigned, a stale old
// size is 409 with the size it knows, a consistent larger tree is
// cosigned, a bad proof is 422, an unknown log 404, a checkpoint not signed
// by the log 403.
func TestProtocol(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := tlog.Open(ctx, tlog.Config{Dir: dir, Origin: "test.tracectl/witnessed"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	skey, vkey, err := note.GenerateKey(rand.Reader, "witness.test/w")
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(skey, l.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	cosig, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	logV, _ := note.NewVerifier(l.Verifier)
	add := func(e string) []byte {
		res, err := l.Add(ctx, []byte(e))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(res.Checkpoint)
	}
	post := func(body string) (int, string, http.Header) {
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/add-checkpoint", strings.NewReader(body)))
		return rec.Code, rec.Body.String(), rec.Header()
	}
	cp1 := add(`{"n":1}`)
	code, sig, _ := post("old 0\n\n" + string(cp1))
	if code != 200 {
		t.Fatalf("first checkpoint: %d %s", code, sig)
	}
	if _, err := note.Open(append(append([]byte{}, cp1...), sig...), note.VerifierList(logV, cosig)); err != nil {
		t.Fatalf("the cosignature does not verify: %v", err)
	}
	add(`{"n":2}`)
	cp3 := add(`{"n":3}`)
	if code, body, h := post("old 0\n\n" + string(cp3)); code != http.StatusConflict || body != "1\n" || h.Get("Content-Type") != "text/x.tlog.size" {
		t.Fatalf("stale old size: %d %q %v", code, body, h)
	}
	pb, _ := client.NewProofBuilder(ctx, 3, client.FileFetcher{Root: filepath.Join(dir, tlog.StaticDir)}.ReadTile)
	p, err := pb.ConsistencyProof(ctx, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	lines := func(hs [][]byte) string {
		var b strings.Builder
		for _, h := range hs {
			b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
		}
		return b.String()
	}
	bad := [][]byte{append([]byte{}, p[0]...)}
	bad[0][0] ^= 1
	bad = append(bad, p[1:]...)
	if code, body, _ := post("old 1\n" + lines(bad) + "\n" + string(cp3)); code != http.StatusUnprocessableEntity || !strings.Contains(body, "forked") {
		t.Fatalf("a bad proof: %d %s", code, body)
	}
	if code, body, _ := post("old 1\n" + lines(p) + "\n" + string(cp3)); code != 200 {
		t.Fatalf("a consistent tree: %d %s", code, body)
	}
	other := strings.Replace(string(cp3), "test.tracectl/witnessed", "other.log/x", 1)
	if code, _, _ := post("old 0\n\n" + other); code != http.StatusNotFound {
		t.Errorf("unknown log: %d", code)
	}
	forged := strings.Replace(string(cp3), "\n3\n", "\n4\n", 1)
	if code, _, _ := post("old 3\n\n" + forged); code != http.StatusForbidden {
		t.Errorf("a checkpoint the log did not sign: %d", code)
	}
	if code, _, _ := post("garbage"); code != http.StatusBadRequest {
		t.Errorf("malformed: %d", code)
	}
}
