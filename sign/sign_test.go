package sign

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// seeded returns a deterministic random source: tests and golden files
// must not depend on the machine's entropy.
func seeded(label string) io.Reader {
	var seed [32]byte
	copy(seed[:], label)
	return mrand.NewChaCha8(seed)
}

func genKey(t testing.TB, alg Alg) crypto.Signer {
	t.Helper()
	k, err := Generate(alg, seeded("tracectl test key "+string(alg)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSigner(t testing.TB, alg Alg) Signer {
	t.Helper()
	s, err := NewSigner(genKey(t, alg))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testTime is 2026-07-25T17:20:00Z: records in tests have a fixed iat.
var testTime = time.Unix(1785000000, 0)

func testOptions(pub crypto.PublicKey) RecordOptions {
	return RecordOptions{
		IssuedAt:       testTime,
		Key:            pub,
		Digest:         canon.SHA256([]byte("tracectl test executable")),
		TranscriptHash: canon.SHA256([]byte("transcript commitment")),
		CallCount:      3,
	}
}

func signedRecord(t testing.TB, s Signer) []byte {
	t.Helper()
	rec, err := Build(testOptions(s.Public()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Sign(rec, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseAndVerify is what a verifier does with a record and a trusted key.
func parseAndVerify(data []byte, trusted crypto.PublicKey) error {
	rec, err := ParseRecord(data)
	if err != nil {
		return err
	}
	if err := VerifySignature(data, rec); err != nil {
		return err
	}
	return CheckTrust(rec, trusted)
}

var algs = []Alg{Ed25519, P256, P384}

// TestRoundTrip: generate -> write (plain and encrypted) -> load -> sign ->
// parse -> verify, for each algorithm, with the trusted key read back from
// KEY.pub.
func TestRoundTrip(t *testing.T) {
	t.Parallel() // scrypt dominates this test and the next
	password := []byte("correct horse")
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			key := genKey(t, alg)
			for _, tc := range []struct {
				name     string
				password []byte
			}{{"plain", nil}, {"encrypted", password}} {
				if tc.password != nil && raceEnabled && alg != Ed25519 {
					continue // scrypt under the race detector: see raceEnabled
				}
				path := filepath.Join(dir, tc.name+".key")
				if err := WriteKeyPair(path, key, tc.password); err != nil {
					t.Fatal(err)
				}
				pw := func() ([]byte, error) { return tc.password, nil }
				if tc.password == nil {
					pw = nil
				}
				s, err := LoadKeyFile(path, pw)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if got, want := s.Alg(), alg; got != want {
					t.Errorf("%s: Alg() = %s, want %s", tc.name, got, want)
				}
				trusted, err := LoadPublicKeyFile(path + PublicKeySuffix)
				if err != nil {
					t.Fatal(err)
				}
				data := signedRecord(t, s)
				if err := parseAndVerify(data, trusted); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
				if err := canon.Check(data, canon.PolicyV02); err != nil {
					t.Errorf("%s: record.json is not canonical: %v", tc.name, err)
				}
			}
		})
	}
}

func TestEncryptedKeyPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "k")
	if err := WriteKeyPair(path, genKey(t, Ed25519), []byte("right")); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pem, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) {
		t.Errorf("encrypted key PEM starts %q", pem[:40])
	}
	readErr := errors.New("no terminal")
	for _, tc := range []struct {
		name     string
		password func() ([]byte, error)
		want     error
	}{
		{"no password source", nil, ErrPasswordRequired},
		{"empty password", func() ([]byte, error) { return nil, nil }, ErrPasswordRequired},
		{"password source fails", func() ([]byte, error) { return nil, readErr }, readErr},
		{"wrong password", func() ([]byte, error) { return []byte("wrong"), nil }, ErrKeyDecrypt},
	} {
		_, err := loadPrivateKeyPEM(pem, tc.password)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestForeignKeyFormats reads keys tracectl does not write but other tools
// do (fixtures made with OpenSSL; see testdata/README.md).
func TestForeignKeyFormats(t *testing.T) {
	pw := func() ([]byte, error) { return []byte("correct-horse"), nil }
	s, err := LoadKeyFile("testdata/pkcs8-encrypted-ed25519.pem", pw)
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := LoadPublicKeyFile("testdata/pkcs8-encrypted-ed25519.pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := parseAndVerify(signedRecord(t, s), trusted); err != nil {
		t.Error(err)
	}
	if _, err := LoadKeyFile("testdata/pkcs8-encrypted-ed25519.pem", nil); !errors.Is(err, ErrPasswordRequired) {
		t.Errorf("pkcs8-encrypted without password: got %v, want ErrPasswordRequired", err)
	}
	s, err = LoadKeyFile("testdata/sec1-p256.pem", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Alg(), P256; got != want {
		t.Errorf("SEC 1 key: Alg() = %s, want %s", got, want)
	}
	if _, err := LoadKeyFile("testdata/rsa.pem", nil); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("RSA private key: got %v, want ErrUnsupportedKey", err)
	}
	if _, err := LoadPublicKeyFile("testdata/rsa.pub"); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("RSA public key: got %v, want ErrUnsupportedKey", err)
	}
}

func TestWriteKeyPairFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k")
	key := genKey(t, Ed25519)
	if err := WriteKeyPair(path, key, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		mode fs.FileMode
	}{{path, 0o600}, {path + ".pub", 0o644}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		// The umask may only remove bits.
		if got := fi.Mode().Perm(); got&^f.mode != 0 {
			t.Errorf("%s: mode %v, want at most %v", f.path, got, f.mode)
		}
	}
	before, _ := os.ReadFile(path)
	if err := WriteKeyPair(path, genKey(t, P256), nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second write: got %v, want fs.ErrExist", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("second write changed the key")
	}
	// Only KEY.pub exists: nothing may be left behind.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other+".pub", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKeyPair(other, key, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing .pub: got %v, want fs.ErrExist", err)
	}
	if _, err := os.Stat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a private key was left behind after a failed write: %v", err)
	}
}

func TestKeyFileLimit(t *testing.T) {
	dir := t.TempDir()
	pem, err := os.ReadFile("testdata/sec1-p256.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size int
		ok   bool
	}{{MaxKeyFileBytes, true}, {MaxKeyFileBytes + 1, false}} {
		// Trailing whitespace pads the file without changing the key.
		b := append(bytes.Clone(pem), bytes.Repeat([]byte("\n"), tc.size-len(pem))...)
		path := filepath.Join(dir, "k")
		os.Remove(path)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadKeyFile(path, nil)
		if (err == nil) != tc.ok {
			t.Errorf("key file of %d bytes: err = %v, want ok=%v", tc.size, err, tc.ok)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	for _, alg := range algs {
		a, b := genKey(t, alg), genKey(t, alg)
		ta, _ := Thumbprint(a.Public())
		tb, _ := Thumbprint(b.Public())
		if ta != tb {
			t.Errorf("%s: same random stream, different keys", alg)
		}
	}
	if _, err := Generate("rsa", seeded("x")); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("Generate(rsa): got %v, want ErrUnsupportedKey", err)
	}
	if _, err := Generate(P256, strings.NewReader("short")); err == nil {
		t.Error("Generate with an exhausted reader succeeded")
	}
	// A reader that only yields scalars outside the group order.
	if _, err := Generate(P256, bytes.NewReader(bytes.Repeat([]byte{0xff}, 64*32))); err == nil {
		t.Error("Generate accepted a scalar >= the group order")
	}
}

// TestCrossImplementationEd25519 verifies a tracectl record with the Go
// standard library only (encoding/json, encoding/base64, crypto/ed25519)
// plus canon for RFC 8785. It calls none of this package's verification
// code: no private convention may hide in the signature.
func TestCrossImplementationEd25519(t *testing.T) {
	const golden = "testdata/ed25519.record.json"
	got := signedRecord(t, newSigner(t, Ed25519))
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("Sign output differs from %s (run go test -update after a deliberate change):\n got %s\nwant %s", golden, got, data)
	}

	var rec map[string]json.RawMessage
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	var sigText string
	if err := json.Unmarshal(rec["signature"], &sigText); err != nil {
		t.Fatal(err)
	}
	delete(rec, "signature")
	var cnf struct {
		JWK struct{ Kty, Crv, X string } `json:"jwk"`
	}
	if err := json.Unmarshal(rec["cnf"], &cnf); err != nil {
		t.Fatal(err)
	}
	if cnf.JWK.Kty != "OKP" || cnf.JWK.Crv != "Ed25519" {
		t.Fatalf("cnf.jwk = %+v", cnf.JWK)
	}
	pub, err := base64.RawURLEncoding.DecodeString(cnf.JWK.X)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("cnf.jwk.x: %v (%d bytes)", err, len(pub))
	}
	sig, err := base64.RawURLEncoding.DecodeString(sigText)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	preimage, err := canon.Canonicalize(unsigned, canon.PolicyV02)
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(pub, preimage, sig) {
		t.Error("the standard library does not verify tracectl's Ed25519 record")
	}
}
