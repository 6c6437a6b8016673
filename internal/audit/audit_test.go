//go:build !windows

package audit

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/tessera/client"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/tlog"
	"github.com/tracectl/tracectl/sign"
)

const zeros = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

type fixture struct {
	l      *tlog.Log
	f      client.FileFetcher
	keys   anchor.Keys
	signer sign.Signer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := tlog.Open(ctx, tlog.Config{Dir: dir, Origin: "test.tracectl/audit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(ctx) })
	k, err := anchor.ParseKeys(l.Verifier, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{l: l, f: client.FileFetcher{Root: filepath.Join(dir, tlog.StaticDir)}, keys: k, signer: s}
}

// record signs a record of session scope over calls calls and anchors it.
func (x *fixture) record(t *testing.T, scope string, calls int64, iat int64) []byte {
	t.Helper()
	rec, err := sign.Build(sign.RecordOptions{IssuedAt: time.Unix(1_780_000_000+iat, 0), Key: x.signer.Public(), Digest: zeros,
		TranscriptHash: zeros, CallCount: calls, TranscriptURI: "urn:uuid:" + scope})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sign.Sign(rec, x.signer)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := anchor.Leaf(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.l.Add(context.Background(), leaf); err != nil {
		t.Fatal(err)
	}
	return b
}

func bundleDir(t *testing.T, scope string, files map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), scope+".trace")
	files["transcript.jsonl"] = []byte(`{"execution_scope":"` + scope + `","type":"header"}` + "\n")
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func codes(r *Result) string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Code)
	}
	return strings.Join(out, ",")
}

// TestFindings: a session whose statements go backward is non_increasing;
// a bundle with receipts the log does not know is unlogged; statements
// signed by an untrusted key are not attributed.
func TestFindings(t *testing.T) {
	x := newFixture(t)
	a1 := x.record(t, "a", 2, 1000)
	a2 := x.record(t, "a", 1, 1001) // fewer calls after more
	ctx := context.Background()
	a := bundleDir(t, "a", map[string][]byte{"checkpoints/5.json": a1, "checkpoints/9.json": a2})
	b := bundleDir(t, "b", map[string][]byte{"anchors/1.json": []byte("{}")})
	res, err := Run(ctx, Options{Log: x.f, Keys: x.keys, Trusted: []crypto.PublicKey{x.signer.Public()}, Bundles: []string{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	if got := codes(res); got != "non_increasing,unlogged" || res.Entries != 2 || res.Sessions != 1 || res.State == nil {
		t.Fatalf("findings %s, %+v", got, res)
	}
	res, err = Run(ctx, Options{Log: x.f, Keys: x.keys, Trusted: nil, Bundles: []string{a}})
	if err != nil || res.Entries != 0 || res.Foreign != 2 {
		t.Fatalf("untrusted: %+v %v", res, err)
	}
}

// tampered serves a log whose entry bundles were changed after the
// checkpoint was signed (a fault: the mirror lies).
type tampered struct{ client.FileFetcher }

func (f tampered) ReadEntryBundle(ctx context.Context, i uint64, p uint8) ([]byte, error) {
	b, err := f.FileFetcher.ReadEntryBundle(ctx, i, p)
	return bytes.Replace(b, []byte(`"call_count":3`), []byte(`"call_count":4`), 1), err
}

// TestForked: entries that do not make the checkpoint's root, and a
// checkpoint not consistent with the one remembered, are log_forked, and
// nothing is remembered.
func TestForked(t *testing.T) {
	x := newFixture(t)
	x.record(t, "a", 3, 1000)
	ctx := context.Background()
	res, err := Run(ctx, Options{Log: tampered{x.f}, Keys: x.keys, Trusted: []crypto.PublicKey{x.signer.Public()}})
	if err != nil || codes(res) != "log_forked" || res.State != nil {
		t.Fatalf("tampered entries: %+v %v", res, err)
	}
	res, err = Run(ctx, Options{Log: x.f, Keys: x.keys, Trusted: []crypto.PublicKey{x.signer.Public()}, Last: &State{Size: 1, Root: zeros}})
	if err != nil || codes(res) != "log_forked" || res.State != nil || !strings.Contains(res.Findings[0].Detail, "two roots for size 1") {
		t.Fatalf("inconsistent with the last: %+v %v", res, err)
	}
	good, err := Run(ctx, Options{Log: x.f, Keys: x.keys, Trusted: []crypto.PublicKey{x.signer.Public()}})
	if err != nil || good.State == nil {
		t.Fatal(err)
	}
	x.record(t, "a", 5, 1001)
	res, err = Run(ctx, Options{Log: x.f, Keys: x.keys, Trusted: []crypto.PublicKey{x.signer.Public()}, Last: good.State})
	if err != nil || res.State == nil || res.State.Size != 2 {
		t.Fatalf("a consistent extension: %+v %v", res, err)
	}
}
