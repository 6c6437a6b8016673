//go:build linux

package signer

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/sign"
)

// signedRecord is a record key signed, and its preimage.
func signedRecord(t *testing.T, key sign.Signer) (signed, pre []byte) {
	t.Helper()
	pre = preimage(t, key, 3)
	rec, err := sign.ParseRecord(pre)
	if err != nil {
		t.Fatal(err)
	}
	if signed, err = sign.Sign(rec, key); err != nil {
		t.Fatal(err)
	}
	return signed, pre
}

// TestCheckSignedRecord: kind rekor takes only a record the server's key
// signed, in its canonical bytes, naming no log entry.
func TestCheckSignedRecord(t *testing.T) {
	key := testKey(t, 1)
	signed, pre := signedRecord(t, key)
	otherSigned, _ := signedRecord(t, testKey(t, 2))
	if err := CheckStatement(KindRekor, signed, key.Public()); err != nil {
		t.Fatalf("a signed record: %v", err)
	}
	rec, _ := sign.ParseRecord(signed)
	rec.Transparency = "https://rekor.test/entries/1"
	withEntry, err := sign.Sign(rec, key)
	if err != nil {
		t.Fatal(err)
	}
	// One base64 character of the signature changed, length kept.
	tampered := append([]byte(nil), signed...)
	i := strings.Index(string(tampered), `"signature":"`) + len(`"signature":"`)
	if tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		code    error
		want    string
	}{
		{"a preimage (unsigned)", pre, ErrNotAStatement, "not signed"},
		{"signature tampered", tampered, ErrNotAStatement, "does not verify"},
		{"another key's record", otherSigned, ErrKeyMismatch, "cnf.jwk"},
		{"names a log entry", withEntry, ErrNotAStatement, "transparency"},
		{"trailing byte", append(append([]byte{}, signed...), ' '), ErrNotAStatement, ""},
		{"arbitrary JSON", []byte(`{"digest":"x"}`), ErrNotAStatement, ""},
	} {
		err := CheckStatement(KindRekor, tc.payload, key.Public())
		if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v mentioning %q", tc.name, err, tc.code, tc.want)
		}
	}
}

// TestServerSignsRekorDigest: over the socket, kind rekor returns an
// Ed25519ph signature over SHA-512 of the signed record, which the client
// checks; a preimage sent as kind rekor is
// refused.
func TestServerSignsRekorDigest(t *testing.T) {
	key := testKey(t, 1)
	s := startServer(t, Options{Signer: key})
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	signed, pre := signedRecord(t, key)
	sig, err := c.SignRekorDigest(context.Background(), signed)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	digest, h := RekorDigest(sign.Ed25519, signed)
	if h != crypto.SHA512 || ed25519.VerifyWithOptions(pub, digest, sig, &ed25519.Options{Hash: crypto.SHA512}) != nil {
		t.Fatal("not Ed25519ph over SHA-512(record)")
	}
	if ed25519.Verify(pub, signed, sig) {
		t.Fatal("a pure Ed25519 signature over the record")
	}
	if _, err := c.SignRekorDigest(context.Background(), pre); !errors.Is(err, ErrNotAStatement) {
		t.Fatalf("a preimage as kind rekor: %v", err)
	}
}

// TestSignRekorDigestContext: the seal's bound on the log reaches the
// signer: a context that has ended stops the request at once, where the
// client's own timeout (30 s) would have waited on a signer that accepts
// and never answers.
func TestSignRekorDigestContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hung.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // open, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	c := &Client{path: sock, kind: KindRecord}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.SignRekorDigest(ctx, []byte(`{}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended context: %v, want context.Canceled", err)
	}
}
