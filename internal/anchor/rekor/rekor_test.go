package rekor_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	pbs "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/internal/anchor/rekor/rekortest"
	"github.com/tracectl/tracectl/sign"
)

type fixture struct {
	log      *rekortest.Log
	root     []byte
	producer sign.Signer
	stmt     []byte
	entry    *pbs.TransparencyLogEntry
}

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, ed25519.SeedSize) }

func producerKey(t testing.TB, b byte) sign.Signer {
	t.Helper()
	s, err := sign.NewSigner(ed25519.NewKeyFromSeed(seed(b)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	l, err := rekortest.New("https://rekor.test", "rekor.test", seed(1))
	if err != nil {
		t.Fatal(err)
	}
	// Other entries first, so the proof is a real path.
	for i := range 5 {
		l.AddLeaf([]byte{byte(i)})
	}
	root, err := l.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{log: l, root: root, producer: producerKey(t, 2), stmt: []byte(`{"a":1}`)}
	req, err := rekor.Request(context.Background(), f.stmt, f.producer.Public(), f.producer.(rekor.DigestSigner))
	if err != nil {
		t.Fatal(err)
	}
	if f.entry, err = l.Add(req); err != nil {
		t.Fatal(err)
	}
	l.AddLeaf([]byte("after"))
	return f
}

// fixtureTime is when the fixture's record was made, inside the fixture
// log key's window (rekortest's, from 2025-01-01, open).
var fixtureTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (f *fixture) check(t *testing.T, e *pbs.TransparencyLogEntry, stmt []byte, pub crypto.PublicKey, root []byte) (*rekor.Checked, error) {
	t.Helper()
	return f.checkAt(t, e, stmt, pub, root, fixtureTime)
}

func (f *fixture) checkAt(t *testing.T, e *pbs.TransparencyLogEntry, stmt []byte, pub crypto.PublicKey, root []byte, at time.Time) (*rekor.Checked, error) {
	t.Helper()
	tr, err := rekor.ParseTrustedRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	// Round trip through the bundle's encoding, as verify reads it.
	b, err := rekor.MarshalEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	e, err = rekor.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	return rekor.Check(e, stmt, pub, tr, at)
}

func TestRekorCheckValid(t *testing.T) {
	f := newFixture(t)
	c, err := f.check(t, f.entry, f.stmt, f.producer.Public(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	if c.Index != 5 || c.Size != 6 || c.BaseURL != "https://rekor.test" || c.Origin != "rekor.test" {
		t.Fatalf("checked %+v, want index 5 of 6 in https://rekor.test", c)
	}
}

func TestRekorCheckFails(t *testing.T) {
	f := newFixture(t)
	other := producerKey(t, 3)
	otherLog, err := rekortest.New("https://rekor.test", "rekor.test", seed(9))
	if err != nil {
		t.Fatal(err)
	}
	otherRoot, err := otherLog.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	// An entry the same log made for the same record signed by another key.
	req, err := rekor.Request(context.Background(), f.stmt, other.Public(), other.(rekor.DigestSigner))
	if err != nil {
		t.Fatal(err)
	}
	otherKeyEntry, err := f.log.Add(req)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(m func(e *pbs.TransparencyLogEntry)) *pbs.TransparencyLogEntry {
		e := proto.Clone(f.entry).(*pbs.TransparencyLogEntry)
		m(e)
		return e
	}
	for _, tc := range []struct {
		name  string
		entry *pbs.TransparencyLogEntry
		stmt  []byte
		pub   crypto.PublicKey
		root  []byte
		want  string
	}{
		{"different record", f.entry, []byte(`{"a":2}`), f.producer.Public(), f.root, "different record"},
		{"other producer key", otherKeyEntry, f.stmt, f.producer.Public(), f.root, "another key"},
		{"wrong trusted root", f.entry, f.stmt, f.producer.Public(), otherRoot, "not enough verified log entries"},
		{"proof hash tampered", mutate(func(e *pbs.TransparencyLogEntry) { e.InclusionProof.Hashes[0][0] ^= 1 }), f.stmt, f.producer.Public(), f.root, "verifying inclusion"},
		{"index tampered", mutate(func(e *pbs.TransparencyLogEntry) { e.LogIndex = 4 }), f.stmt, f.producer.Public(), f.root, "verifying inclusion"},
		{"checkpoint tampered", mutate(func(e *pbs.TransparencyLogEntry) {
			// The tree size line: 6 entries claimed as 7.
			e.InclusionProof.Checkpoint.Envelope = strings.Replace(e.InclusionProof.Checkpoint.Envelope, "\n6\n", "\n7\n", 1)
		}), f.stmt, f.producer.Public(), f.root, "checkpoint"},
		{"body signature tampered", mutate(func(e *pbs.TransparencyLogEntry) {
			// One base64 character of the signature changed, length kept.
			i := bytes.Index(e.CanonicalizedBody, []byte(`"content":"`)) + len(`"content":"`)
			e.CanonicalizedBody = bytes.Clone(e.CanonicalizedBody)
			if e.CanonicalizedBody[i] == 'A' {
				e.CanonicalizedBody[i] = 'B'
			} else {
				e.CanonicalizedBody[i] = 'A'
			}
		}), f.stmt, f.producer.Public(), f.root, "signature"},
		{"no inclusion proof", mutate(func(e *pbs.TransparencyLogEntry) { e.InclusionProof = nil }), f.stmt, f.producer.Public(), f.root, "inclusion proof"},
		{"kind", mutate(func(e *pbs.TransparencyLogEntry) { e.KindVersion.Version = "0.0.1" }), f.stmt, f.producer.Public(), f.root, "not a Rekor v2 hashedrekord 0.0.2 entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.check(t, tc.entry, tc.stmt, tc.pub, tc.root)
			if err == nil || !errors.Is(err, anchor.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want anchor.ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

func TestRekorCheckpointSignatureTampered(t *testing.T) {
	f := newFixture(t)
	e := proto.Clone(f.entry).(*pbs.TransparencyLogEntry)
	env := e.InclusionProof.Checkpoint.Envelope
	// Flip one character of the signature line's base64.
	i := strings.LastIndex(env, " ") + 5
	c := byte('A')
	if env[i] == 'A' {
		c = 'B'
	}
	e.InclusionProof.Checkpoint.Envelope = env[:i] + string(c) + env[i+1:]
	if _, err := f.check(t, e, f.stmt, f.producer.Public(), f.root); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("err = %v, want a checkpoint signature failure", err)
	}
}

func TestRekorParseBounds(t *testing.T) {
	if _, err := rekor.ParseEntry(make([]byte, rekor.MaxEntryBytes+1)); err == nil {
		t.Fatal("an entry over MaxEntryBytes parsed")
	}
	if _, err := rekor.ParseEntry([]byte(`{"logIndex":"1","bogus":1}`)); err == nil {
		t.Fatal("an entry with an unknown field parsed")
	}
	if _, err := rekor.ParseTrustedRoot([]byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)); err == nil || !strings.Contains(err.Error(), "no Rekor log") {
		t.Fatalf("a root without tlogs: err = %v", err)
	}
}

func TestRekorEd25519ph(t *testing.T) {
	// The signature Rekor keeps is Ed25519ph over SHA-512(statement), not
	// pure Ed25519 over the statement: a verifier must use the ph variant.
	p := producerKey(t, 2)
	stmt := []byte(`{"a":1}`)
	req, err := rekor.Request(context.Background(), stmt, p.Public(), p.(rekor.DigestSigner))
	if err != nil {
		t.Fatal(err)
	}
	pub := p.Public().(ed25519.PublicKey)
	sig := req.Signature.Content
	if ed25519.Verify(pub, stmt, sig) {
		t.Fatal("the entry's signature is pure Ed25519 over the record")
	}
	if err := ed25519.VerifyWithOptions(pub, rekor.Digest(stmt, crypto.SHA512), sig, &ed25519.Options{Hash: crypto.SHA512}); err != nil {
		t.Fatalf("not Ed25519ph over SHA-512(record): %v", err)
	}
	if len(req.Digest) != 64 {
		t.Fatalf("digest of %d bytes, want SHA-512's 64", len(req.Digest))
	}
}

// TestRekorCheckECDSA: a P-256 producer key signs SHA-256(statement),
// ECDSA, and the entry checks like an Ed25519 one.
func TestRekorCheckECDSA(t *testing.T) {
	priv, err := sign.Generate(sign.P256, bytes.NewReader(bytes.Repeat([]byte{4}, 256)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sign.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	req, err := rekor.Request(context.Background(), f.stmt, p.Public(), p.(rekor.DigestSigner))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Digest) != 32 {
		t.Fatalf("digest of %d bytes, want SHA-256's", len(req.Digest))
	}
	e, err := f.log.Add(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.check(t, e, f.stmt, p.Public(), f.root); err != nil {
		t.Fatal(err)
	}
	if _, err := f.check(t, e, f.stmt, f.producer.Public(), f.root); err == nil {
		t.Fatal("a P-256 entry checked under the Ed25519 producer key")
	}
}

// TestRekorMarshalEntryStable: the kept entry's bytes do not depend on
// protojson's randomized whitespace.
func TestRekorMarshalEntryStable(t *testing.T) {
	f := newFixture(t)
	a, err := rekor.MarshalEntry(f.entry)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := rekor.MarshalEntry(proto.Clone(f.entry).(*pbs.TransparencyLogEntry))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("two encodings differ:\n%s\n%s", a, b)
		}
	}
	if !bytes.Contains(a, []byte("\n  \"logIndex\": \"5\",\n")) {
		t.Fatalf("not indented JSON:\n%s", a)
	}
}

// withValidity is root with its one log key valid from start to end (a
// zero end: open).
func withValidity(t *testing.T, root []byte, start, end time.Time) []byte {
	t.Helper()
	var tr prototrustroot.TrustedRoot
	if err := protojson.Unmarshal(root, &tr); err != nil {
		t.Fatal(err)
	}
	vf := &protocommon.TimeRange{Start: timestamppb.New(start)}
	if !end.IsZero() {
		vf.End = timestamppb.New(end)
	}
	tr.Tlogs[0].PublicKey.ValidFor = vf
	b, err := protojson.Marshal(&tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRekorLogKeyValidity: sigstore-go checks a Rekor v2 checkpoint under
// the log key whatever its validity window in the trusted root; Check
// holds the window to the time it is given (the anchored record's iat).
func TestRekorLogKeyValidity(t *testing.T) {
	f := newFixture(t)
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		start, end time.Time
		ok         bool
	}{
		{"open window", at.AddDate(-1, 0, 0), time.Time{}, true},
		{"window covers", at.AddDate(-1, 0, 0), at.AddDate(0, 0, 1), true},
		{"key retired before", at.AddDate(-1, 0, 0), at.AddDate(0, 0, -1), false},
		{"key not yet valid", at.AddDate(0, 0, 1), time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.checkAt(t, f.entry, f.stmt, f.producer.Public(), withValidity(t, f.root, tc.start, tc.end), at)
			if tc.ok && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if !tc.ok && (err == nil || !errors.Is(err, anchor.ErrInvalid) || !strings.Contains(err.Error(), "validity")) {
				t.Fatalf("err = %v, want anchor.ErrInvalid naming the log key's validity", err)
			}
		})
	}
}
