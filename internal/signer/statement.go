package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
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
	if kind != KindRecord && kind != KindCheckpoint {
		return refuse(CodeBadRequest, "kind %q: want %s or %s", string(kind), KindRecord, KindCheckpoint)
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
