package sign

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// FuzzParseRecord: ParseRecord never panics; a record it accepts is
// canonicalizable and re-encodes to exactly its canonical form; a record
// that also verifies re-parses and re-verifies from those bytes. Seeds are
// in testdata/fuzz/FuzzParseRecord (TestFuzzSeeds -update rewrites them).
func FuzzParseRecord(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ParseRecord(data)
		if err != nil {
			if rec != nil {
				t.Fatal("a record came back with an error")
			}
			return
		}
		want, err := canon.Canonicalize(data, canon.PolicyV02)
		if err != nil {
			t.Fatalf("accepted a record without a canonical form: %v", err)
		}
		got, err := canon.Marshal(rec)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encoded\n%s\nwant\n%s", got, want)
		}
		if _, err := rec.Cnf.JWK.Thumbprint(); err != nil {
			t.Fatalf("accepted cnf.jwk has no thumbprint: %v", err)
		}
		if VerifySignature(data, rec) != nil {
			return
		}
		again, err := ParseRecord(got)
		if err != nil {
			t.Fatalf("re-encoded record does not parse: %v", err)
		}
		if err := VerifySignature(got, again); err != nil {
			t.Fatalf("re-encoded record does not verify: %v", err)
		}
	})
}

// fuzzSeeds returns records worth mutating: signed records of each
// algorithm, every optional member, and near misses.
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, alg := range algs {
		seeds = append(seeds, signedRecord(t, newSigner(t, alg)))
	}
	ed := seeds[0]
	seeds = append(seeds,
		withOptionals(t, ed),
		mutate(t, ed, "/cnf/jwk/kid", `"k1"`),
		mutate(t, ed, "/cnf/jwk/d", `"AAAA"`),
		mutate(t, ed, "/iat", "9007199254740993"),
		mutate(t, ed, "/iat", "1.785e9"),
		mutate(t, ed, "/signature", del),
		reformat(t, ed),
	)
	return seeds
}

func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseRecord")
	if !*update {
		t.Skip("run with -update to rewrite the seed corpus")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParsePublicKey covers ParseJWK and the PEM path: never panics; an
// accepted key has a thumbprint and survives the JWK round trip.
func FuzzParsePublicKey(f *testing.F) {
	for _, name := range []string{"pkcs8-encrypted-ed25519.pub", "rsa.pub"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, alg := range algs {
		f.Add([]byte(mustJWK(f, newSigner(f, alg).Public())))
	}
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := ParsePublicKey(data)
		if err != nil {
			return
		}
		tp, err := Thumbprint(pub)
		if err != nil {
			t.Fatalf("accepted key has no thumbprint: %v", err)
		}
		j, _ := jwkFromPublicKey(pub)
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePublicKey(b)
		if err != nil {
			t.Fatalf("JWK of an accepted key does not parse: %v", err)
		}
		if tp2, _ := Thumbprint(back); tp2 != tp {
			t.Fatalf("thumbprint changed over the JWK round trip")
		}
	})
}

// FuzzLoadPrivateKeyPEM (loadPrivateKeyPEM): never panics. No password source is given, so an
// encrypted key stops before any key derivation.
func FuzzLoadPrivateKeyPEM(f *testing.F) {
	for _, name := range []string{"sec1-p256.pem", "pkcs8-encrypted-ed25519.pem", "rsa.pem"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := loadPrivateKeyPEM(data, nil)
		if err != nil {
			return
		}
		if _, err := Thumbprint(s.Public()); err != nil {
			t.Fatalf("accepted key has no thumbprint: %v", err)
		}
	})
}
