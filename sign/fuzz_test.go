package sign

import (
	"bytes"
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
