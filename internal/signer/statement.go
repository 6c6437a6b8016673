package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	_ "crypto/sha256" // RekorDigest's hashes
	_ "crypto/sha512"
	"fmt"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

// CheckStatement returns nil when payload is a statement of kind a recorder
// signing with key makes: the signature preimage of a TRACE v0.2 Trust
// Record, that is
//
//   - a record sign.ParseRecord accepts (bounded, strict, the v0.2 shape),
//   - without a signature member, in its exact RFC 8785 form (canon
//     PolicyV02), so the bytes signed are the bytes parsed, nothing before
//     or after them,
//   - committing to a transcript (tool_transcript), and for a checkpoint
//     naming no log entry (transparency),
//   - whose cnf.jwk is key (else ErrKeyMismatch).
//
// Every other refusal is an *Error of CodeNotAStatement.
func CheckStatement(kind Kind, payload []byte, key crypto.PublicKey) error {
	if kind == KindRekor {
		return CheckSignedRecord(payload, key)
	}
	if kind != KindRecord && kind != KindCheckpoint {
		return refuse(CodeBadRequest, "kind %q: want %s, %s or %s", string(kind), KindRecord, KindCheckpoint, KindRekor)
	}
	rec, err := sign.ParseRecord(payload)
	if err != nil {
		return refuse(CodeNotAStatement, "not a TRACE v0.2 Trust Record: %v", err)
	}
	if rec.Signature != "" {
		return refuse(CodeNotAStatement, "the record carries a signature member: a signature preimage has none")
	}
	if err := canon.Check(payload, canon.PolicyV02); err != nil {
		return refuse(CodeNotAStatement, "not the record's RFC 8785 bytes: %v", err)
	}
	if rec.ToolTranscript == nil {
		return refuse(CodeNotAStatement, "the record commits to no transcript (no tool_transcript)")
	}
	if kind == KindCheckpoint && rec.Transparency != "" {
		return refuse(CodeNotAStatement, "a checkpoint names no log entry (transparency is set)")
	}
	want, err := sign.Thumbprint(key)
	if err != nil {
		return refuse(CodeUnavailable, "server key: %v", err)
	}
	got, err := rec.Cnf.JWK.Thumbprint()
	if err != nil {
		return refuse(CodeNotAStatement, "cnf.jwk: %v", err)
	}
	if got != want {
		return refuse(CodeKeyMismatch, "cnf.jwk is %s, the server signs with %s", got, want)
	}
	return nil
}

// CheckSignedRecord returns nil when payload is a record whose digest a
// server holding key signs for Rekor (KindRekor): a sealed record as
// anchored, that is
//
//   - a record sign.ParseRecord accepts, in its exact RFC 8785 form,
//   - committing to a transcript and naming no log entry (transparency is
//     set only on the record signed again after anchoring),
//   - whose cnf.jwk is key, and whose signature verifies under it: the
//     server's own key already signed these bytes.
//
// So the digest signature adds nothing a recorder could not already get
// signed: only a record the key signed gets its digest signed.
func CheckSignedRecord(payload []byte, key crypto.PublicKey) error {
	rec, err := sign.ParseRecord(payload)
	if err != nil {
		return refuse(CodeNotAStatement, "not a TRACE v0.2 Trust Record: %v", err)
	}
	if err := canon.Check(payload, canon.PolicyV02); err != nil {
		return refuse(CodeNotAStatement, "not the record's RFC 8785 bytes: %v", err)
	}
	if rec.ToolTranscript == nil {
		return refuse(CodeNotAStatement, "the record commits to no transcript (no tool_transcript)")
	}
	if rec.Transparency != "" {
		return refuse(CodeNotAStatement, "the record anchored names no log entry (transparency is set)")
	}
	want, err := sign.Thumbprint(key)
	if err != nil {
		return refuse(CodeUnavailable, "server key: %v", err)
	}
	got, err := rec.Cnf.JWK.Thumbprint()
	if err != nil {
		return refuse(CodeNotAStatement, "cnf.jwk: %v", err)
	}
	if got != want {
		return refuse(CodeKeyMismatch, "cnf.jwk is %s, the server signs with %s", got, want)
	}
	if rec.Signature == "" {
		return refuse(CodeNotAStatement, "the record is not signed: only a record the server's key signed has its digest signed")
	}
	if err := sign.VerifySignature(payload, rec); err != nil {
		return refuse(CodeNotAStatement, "the record's signature does not verify under the server's key: %v", err)
	}
	return nil
}

// RekorDigest is the digest a Rekor v2 hashedrekord entry of record carries
// for a key of alg, and its hash: SHA-512 for Ed25519 (signed Ed25519ph,
// the only Ed25519 form Rekor v2 verifies), SHA-256 for P-256, SHA-384 for
// P-384 (as internal/anchor/rekor.Algorithm).
func RekorDigest(alg sign.Alg, record []byte) ([]byte, crypto.Hash) {
	h := crypto.SHA512
	switch alg {
	case sign.P256:
		h = crypto.SHA256
	case sign.P384:
		h = crypto.SHA384
	}
	d := h.New()
	d.Write(record)
	return d.Sum(nil), h
}

// algOf is the sign.Alg of a public key the sign package supports.
func algOf(pub crypto.PublicKey) (sign.Alg, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return sign.Ed25519, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return sign.P256, nil
		case elliptic.P384():
			return sign.P384, nil
		}
	}
	return "", fmt.Errorf("%w: %T", sign.ErrUnsupportedKey, pub)
}
