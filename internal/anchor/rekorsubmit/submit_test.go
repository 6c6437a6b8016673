package rekorsubmit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pbs "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	pb "github.com/sigstore/rekor-tiles/v2/pkg/generated/protobuf"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/internal/anchor/rekor/rekortest"
	"github.com/tracectl/tracectl/internal/anchor/rekorsubmit"
	"github.com/tracectl/tracectl/sign"
)

func key(t *testing.T, b byte) sign.Signer {
	t.Helper()
	s, err := sign.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAdd(t *testing.T) {
	// The origin is the host, as Rekor's (Add checks it).
	l, err := rekortest.New("http://127.0.0.1", "127.0.0.1", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(l)
	defer hs.Close()
	c, err := rekorsubmit.New(hs.URL, "tracectl/test")
	if err != nil {
		t.Fatal(err)
	}
	p := key(t, 2)
	stmt := []byte(`{"record":1}`)
	e, err := c.Add(context.Background(), stmt, p.Public(), p)
	if err != nil {
		t.Fatal(err)
	}
	if e.GetLogIndex() != 0 || e.GetKindVersion().GetKind() != "hashedrekord" || rekor.Matches(e, stmt, p.Public()) != nil {
		t.Fatalf("entry %v", e)
	}

	// A signer that signs only records cannot make the entry.
	type recordOnly struct{ sign.Signer }
	if _, err := c.Add(context.Background(), stmt, p.Public(), recordOnly{p}); !errors.Is(err, rekor.ErrNoDigestSigner) {
		t.Fatalf("record-only signer: %v", err)
	}
}

// TestAddChecksAnswer: an entry the log answers for another record, or a
// refusal, is an error, never kept.
func TestAddChecksAnswer(t *testing.T) {
	l, err := rekortest.New("http://rekor.test", "rekor.test", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	p := key(t, 2)
	wrong, err := rekor.Request(context.Background(), []byte(`{"other":1}`), p.Public(), p.(rekor.DigestSigner))
	if err != nil {
		t.Fatal(err)
	}
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e, err := l.Add(wrong)
		if err != nil {
			t.Error(err)
			return
		}
		b, _ := protojson.Marshal(e)
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	}))
	defer liar.Close()
	c, err := rekorsubmit.New(liar.URL, "tracectl/test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(context.Background(), []byte(`{"record":1}`), p.Public(), p); !errors.Is(err, anchor.ErrInvalid) || !strings.Contains(err.Error(), "different record") {
		t.Fatalf("an entry for another record: %v", err)
	}

	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"code":3,"message":"invalid hashedrekord request"}`, http.StatusBadRequest)
	}))
	defer refuse.Close()
	c, err = rekorsubmit.New(refuse.URL, "tracectl/test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(context.Background(), []byte(`{"record":1}`), p.Public(), p); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a refusal: %v", err)
	}
	if _, err := rekorsubmit.New("file:///x", ""); err == nil {
		t.Fatal("a file URL was accepted")
	}
}

// TestAddChecksProof: what a log answers is checked as far as it can be
// without a trusted root before it is kept: its inclusion proof, from the
// leaf rebuilt from the request, against its own checkpoint; the
// checkpoint's origin, the host submitted to (a Rekor v2 origin is its
// host, which verify requires); and its size, within what verify reads.
// Before, each was kept, record.json named it, and verify --rekor-root
// failed the honest producer's bundle (anchor_invalid) where an
// unanchored record is anchor_missing.
func TestAddChecksProof(t *testing.T) {
	p := key(t, 2)
	stmt := []byte(`{"record":1}`)
	serve := func(origin string, mutate func(e *pbs.TransparencyLogEntry)) *rekorsubmit.Client {
		t.Helper()
		l, err := rekortest.New("http://127.0.0.1", origin, bytes.Repeat([]byte{1}, 32))
		if err != nil {
			t.Fatal(err)
		}
		l.AddLeaf([]byte("before"))
		l.AddLeaf([]byte("before, too"))
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			var req pb.CreateEntryRequest
			if err := protojson.Unmarshal(b, &req); err != nil {
				t.Error(err)
				return
			}
			e, err := l.Add(req.GetHashedRekordRequestV002())
			if err != nil {
				t.Error(err)
				return
			}
			mutate(e)
			out, _ := protojson.Marshal(e)
			w.WriteHeader(http.StatusCreated)
			w.Write(out)
		}))
		t.Cleanup(hs.Close)
		c, err := rekorsubmit.New(hs.URL, "tracectl/test")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := serve("127.0.0.1", func(*pbs.TransparencyLogEntry) {}).Add(context.Background(), stmt, p.Public(), p); err != nil {
		t.Fatalf("a sound answer: %v", err)
	}
	for _, tc := range []struct {
		name, origin string
		mutate       func(e *pbs.TransparencyLogEntry)
		want         string
	}{
		{"proof hash", "127.0.0.1", func(e *pbs.TransparencyLogEntry) { e.InclusionProof.Hashes[0][0] ^= 1 }, "inclusion"},
		{"log index", "127.0.0.1", func(e *pbs.TransparencyLogEntry) { e.LogIndex-- }, "inclusion"},
		{"another log's origin", "rekor.elsewhere.test", func(*pbs.TransparencyLogEntry) {}, "origin"},
		{"oversized", "127.0.0.1", func(e *pbs.TransparencyLogEntry) {
			for range rekor.MaxEntryBytes / 32 {
				e.InclusionProof.Hashes = append(e.InclusionProof.Hashes, make([]byte, 32))
			}
		}, "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serve(tc.origin, tc.mutate).Add(context.Background(), stmt, p.Public(), p)
			if !errors.Is(err, anchor.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want anchor.ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

// TestAddHostileTransport: a log that never answers costs the caller's
// deadline, not more; an answer past the write client's 10 MiB bound, a
// malformed one, or a redirect to another log's host is an error, never
// an entry.
func TestAddHostileTransport(t *testing.T) {
	p := key(t, 2)
	stmt := []byte(`{"record":1}`)
	add := func(h http.HandlerFunc, ctx context.Context) error {
		t.Helper()
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		c, err := rekorsubmit.New(hs.URL, "tracectl/test")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Add(ctx, stmt, p.Public(), p)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// The silent log holds its handler until the test returns (deferred
	// calls run before the servers' cleanups close them).
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	if err := add(func(w http.ResponseWriter, r *http.Request) { <-stop }, ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a log that never answers: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a log that never answers held Add %s past a 200ms deadline", d)
	}
	huge := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"logIndex":"1","canonicalizedBody":"`))
		chunk := bytes.Repeat([]byte("A"), 1<<20)
		for range 11 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Write([]byte(`"}`))
	}
	if err := add(huge, context.Background()); err == nil || !strings.Contains(err.Error(), "unmarshal") {
		t.Fatalf("an 11 MiB answer: %v", err)
	}
	if err := add(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"logIndex":`))
	}, context.Background()); err == nil {
		t.Fatal("a malformed answer was accepted")
	}
	other, err := rekortest.New("http://other.test", "other.test", bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := httptest.NewServer(other)
	t.Cleanup(elsewhere.Close)
	if err := add(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}, context.Background()); !errors.Is(err, anchor.ErrInvalid) || !strings.Contains(err.Error(), "origin") {
		t.Fatalf("a redirect to another log: %v", err)
	}
}
