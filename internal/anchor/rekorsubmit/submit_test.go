package rekorsubmit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
	l, err := rekortest.New("http://rekor.test", "rekor.test", bytes.Repeat([]byte{1}, 32))
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
	wrong, err := rekor.Request([]byte(`{"other":1}`), p.Public(), p.(rekor.DigestSigner))
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
