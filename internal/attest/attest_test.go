package attest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

const testRoot = "sha256:602bd691d9a39c6c13578d994f9736d8b07780c71deaab8443c6b8698e154255"

func testKey(t *testing.T, seed byte) sign.Signer {
	t.Helper()
	s, err := sign.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testRecord(t *testing.T, s sign.Signer) []byte {
	t.Helper()
	rec, err := sign.Build(sign.RecordOptions{
		IssuedAt: time.Unix(1785000000, 0), Key: s.Public(), Digest: "sha256:" + hex.EncodeToString(make([]byte, 32)),
		TranscriptHash: testRoot, CallCount: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sign.Sign(rec, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pae is DSSE v1's pre-authentication encoding written out from the spec
// (protocol.md), independent of the dsse package the code signs with.
func pae(payloadType string, payload []byte) []byte {
	s := "DSSEv1 " + strconv.Itoa(len(payloadType)) + " " + payloadType + " " + strconv.Itoa(len(payload)) + " "
	return append([]byte(s), payload...)
}

// TestPAESpecExample: the encoding the test checks signatures with is the
// DSSE spec's, on the spec's own example.
func TestPAESpecExample(t *testing.T) {
	got := pae("http://example.com/HelloWorld", []byte("hello world"))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if string(got) != want {
		t.Errorf("pae = %q, want %q", got, want)
	}
}

// TestStatement: the statement is canonical, has both subjects with the
// right digests, and its predicate is the record byte for byte.
func TestStatement(t *testing.T) {
	record := testRecord(t, testKey(t, 7))
	st, err := Statement(record)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := canon.Canonicalize(st, canon.PolicyV02); err != nil || !bytes.Equal(c, st) {
		t.Fatalf("statement is not canonical (%v):\n%s", err, st)
	}
	var got struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(st, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "https://in-toto.io/Statement/v1" || got.PredicateType != PredicateType {
		t.Errorf("_type %q predicateType %q", got.Type, got.PredicateType)
	}
	sum := sha256.Sum256(record)
	want := map[string]string{SubjectRecord: hex.EncodeToString(sum[:]), SubjectTranscriptRoot: testRoot[len("sha256:"):]}
	if len(got.Subject) != 2 {
		t.Fatalf("subjects: %+v", got.Subject)
	}
	for _, s := range got.Subject {
		if s.Digest["sha256"] != want[s.Name] || len(s.Digest) != 1 {
			t.Errorf("subject %s digest %v, want sha256 %s", s.Name, s.Digest, want[s.Name])
		}
	}
	if !bytes.Equal(got.Predicate, record) {
		t.Errorf("predicate is not the record's bytes:\n got %s\nwant %s", got.Predicate, record)
	}
}

// TestRoundTrip: an envelope verifies with crypto/ed25519 over a PAE
// recomputed by hand, names the key by its thumbprint, and Open accepts it.
func TestRoundTrip(t *testing.T) {
	key := testKey(t, 7)
	record := testRecord(t, key)
	st, err := Statement(record)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(context.Background(), st, key)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil || !bytes.Equal(payload, st) || e.PayloadType != "application/vnd.in-toto+json" || len(e.Signatures) != 1 {
		t.Fatalf("envelope %s (%v)", env, err)
	}
	sig, err := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	if !ed25519.Verify(pub, pae(e.PayloadType, payload), sig) {
		t.Error("signature does not verify over the DSSE v1 PAE")
	}
	if tp, _ := sign.Thumbprint(pub); e.Signatures[0].KeyID != tp {
		t.Errorf("keyid %q, want the thumbprint %q", e.Signatures[0].KeyID, tp)
	}
	got, err := Open(context.Background(), env, pub)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(record)
	if d := SubjectDigest(got, SubjectRecord); d != hex.EncodeToString(sum[:]) {
		t.Errorf("record subject %s", d)
	}
	if d := SubjectDigest(got, SubjectTranscriptRoot); "sha256:"+d != testRoot {
		t.Errorf("transcript subject %s", d)
	}
}

// TestOpenRefuses: a payload changed after signing, another key, another
// payload type and an oversized envelope are refused.
func TestOpenRefuses(t *testing.T) {
	key := testKey(t, 7)
	st, err := Statement(testRecord(t, key))
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(context.Background(), st, key)
	if err != nil {
		t.Fatal(err)
	}
	var e Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	tampered := func(f func(*Envelope)) []byte {
		c := e
		c.Signatures = append([]dsse.Signature(nil), e.Signatures...)
		f(&c)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pub := key.Public().(ed25519.PublicKey)
	other := testKey(t, 8).Public().(ed25519.PublicKey)
	for _, tc := range []struct {
		name string
		env  []byte
		pub  ed25519.PublicKey
	}{
		{"payload", tampered(func(c *Envelope) {
			c.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(st, []byte(`"call_count":2`), []byte(`"call_count":3`), 1))
		}), pub},
		{"payload type", tampered(func(c *Envelope) { c.PayloadType = "application/json" }), pub},
		{"keyless signature", tampered(func(c *Envelope) { c.Signatures[0].KeyID = "" }), other},
		{"other key", env, other},
		{"too large", append(env, bytes.Repeat([]byte(" "), MaxEnvelopeBytes)...), pub},
	} {
		if _, err := Open(context.Background(), tc.env, tc.pub); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: err = %v, want ErrEnvelope", tc.name, err)
		}
	}
	if ed25519.Verify(pub, pae(e.PayloadType, bytes.Replace(st, []byte(`"call_count":2`), []byte(`"call_count":3`), 1)), mustSig(t, e)) {
		t.Error("the signature verifies over a changed payload")
	}
}

func mustSig(t *testing.T, e Envelope) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSignRefusesECDSA: DSSE here is Ed25519 only.
func TestSignRefusesECDSA(t *testing.T) {
	k, err := sign.Generate(sign.P256, bytes.NewReader(bytes.Repeat([]byte{1}, 256)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sign(context.Background(), []byte("{}"), s); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("err = %v, want ErrUnsupportedKey", err)
	}
}

// TestStatementNoTranscript: a record without tool_transcript has no root.
func TestStatementNoTranscript(t *testing.T) {
	s := testKey(t, 7)
	rec, err := sign.Build(sign.RecordOptions{IssuedAt: time.Unix(1785000000, 0), Key: s.Public(), Digest: testRoot, TranscriptHash: testRoot})
	if err != nil {
		t.Fatal(err)
	}
	rec.ToolTranscript = nil
	b, err := sign.Sign(rec, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Statement(b); !errors.Is(err, ErrNoTranscript) {
		t.Errorf("err = %v, want ErrNoTranscript", err)
	}
}

// TestSpecNamesIdentifiers keeps spec/attest.md and spec/README.md in step
// with the identifiers a consumer matches on.
func TestSpecNamesIdentifiers(t *testing.T) {
	page, err := os.ReadFile("../../spec/attest.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../spec/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{PredicateType, PayloadType, `"name": "` + SubjectRecord + `"`, `"name": "` + SubjectTranscriptRoot + `"`, "https://in-toto.io/Statement/v1"} {
		if !bytes.Contains(page, []byte(id)) {
			t.Errorf("spec/attest.md does not name %s", id)
		}
	}
	if !bytes.Contains(readme, []byte("| `"+PredicateType+"` |")) {
		t.Errorf("spec/README.md's identifier table lacks %s", PredicateType)
	}
}
