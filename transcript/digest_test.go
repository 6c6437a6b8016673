package transcript

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// SaltedDigest and SaltedArgsDigest are their definitions (spec/transcript.md),
// on both sides of the size where SaltedDigest stops hashing from one
// stack buffer.
func TestSaltedDigestDefinition(t *testing.T) {
	salt := bytes.Repeat([]byte{0xa5}, SaltBytes)
	for _, n := range []int{0, 1, 300, 2048 - len(SaltedPayloadLabel) - SaltBytes, 2049 - len(SaltedPayloadLabel) - SaltBytes, 70000} {
		b := bytes.Repeat([]byte{'q'}, n)
		sum := sha256.Sum256(append(append([]byte("tracectl salted payload v1\x00"), salt...), b...))
		if got, want := SaltedDigest(salt, b), "sha256:"+hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("%d bytes: %s, want %s", n, got, want)
		}
	}
	plain := sha256.Sum256([]byte(`{"a":1}`))
	sum := sha256.Sum256(append(append([]byte("tracectl salted arguments v1\x00"), salt...), plain[:]...))
	if got, want := SaltedArgsDigest(salt, "sha256:"+hex.EncodeToString(plain[:])), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("arguments: %s, want %s", got, want)
	}
	if got := SaltedArgsDigest(salt, ""); got != "" {
		t.Fatalf("no arguments digest salted to %q", got)
	}
}
