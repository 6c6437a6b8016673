package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/asn1"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/tracectl/tracectl/canon"
)

// VerifySignature checks the signature embedded in data, the record bytes
// exactly as received, under the key in cnf.jwk. rec must be
// ParseRecord(data). The preimage is computed from data itself, never from
// rec: the received members other than signature, canonicalized (RFC 8785,
// canon PolicyV02). The signature member must be present
// (ErrSignatureMissing), canonical unpadded base64url of the algorithm's
// length (ErrSignatureMalformed), and verify (ErrSignatureInvalid).
//
// A valid signature proves only that the holder of cnf.jwk signed these
// members; CheckTrust decides whether that key is one the caller trusts.
func VerifySignature(data []byte, rec *Record) error {
	if rec == nil {
		return errors.New("verify signature: nil record")
	}
	doc, err := parseRecordDoc(data)
	if err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	root := doc.Root()
	sv, ok := root.Get("signature")
	if !ok {
		return ErrSignatureMissing
	}
	text, ok := sv.Str()
	if !ok {
		return fmt.Errorf("%w: not a string", ErrSignatureMalformed)
	}
	// The key comes from the received bytes too; rec only has to agree.
	pub, err := receivedKey(root)
	if err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	if tp, _ := Thumbprint(pub); text != rec.Signature || !rec.Cnf.JWK.hasThumbprint(tp) {
		return errors.New("verify signature: rec was not parsed from data")
	}
	alg, _ := algOf(pub)
	sig, ok := decodeB64URL(text)
	if !ok {
		return fmt.Errorf("%w: not canonical unpadded base64url", ErrSignatureMalformed)
	}
	if len(sig) != alg.sigSize() {
		return fmt.Errorf("%w: %d bytes, %s signatures have %d", ErrSignatureMalformed, len(sig), alg, alg.sigSize())
	}
	pre, err := preimage(root)
	if err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	return verifyRaw(alg, pub, pre, sig)
}

// receivedKey parses /cnf/jwk of the received record.
func receivedKey(root canon.Value) (crypto.PublicKey, error) {
	cnf, _ := root.Get("cnf")
	jv, ok := cnf.Get("jwk")
	if !ok {
		return nil, fmt.Errorf("%w: /cnf/jwk missing", ErrSchemaInvalid)
	}
	j, err := ParseJWK(jv.Raw())
	if err != nil {
		return nil, fmt.Errorf("cnf.jwk: %w", err)
	}
	return j.PublicKey()
}

// preimage is the canonical form of the received object without its
// signature member. The object is re-assembled from the members' exact
// received bytes and canonicalized: nothing passes through a Go struct.
func preimage(root canon.Value) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, m := range root.Members() {
		if m.Name == "signature" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		name, err := json.Marshal(m.Name) // valid UTF-8: canon checked it
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.Value.Raw())
	}
	b.WriteByte('}')
	c, err := canon.Canonicalize(b.Bytes(), canon.PolicyV02)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCanonicalization, err)
	}
	return c, nil
}

// verifyRaw checks a raw signature (Ed25519, or ECDSA r||s) over msg.
func verifyRaw(alg Alg, pub crypto.PublicKey, msg, sig []byte) error {
	switch alg {
	case Ed25519:
		k, ok := pub.(ed25519.PublicKey)
		if ok && len(sig) == ed25519.SignatureSize && ed25519.Verify(k, msg, sig) {
			return nil
		}
	case P256, P384:
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok || len(sig) != alg.sigSize() {
			break
		}
		h := alg.hash().New()
		h.Write(msg)
		n := len(sig) / 2
		r := new(big.Int).SetBytes(sig[:n])
		s := new(big.Int).SetBytes(sig[n:])
		if ecdsa.Verify(k, h.Sum(nil), r, s) {
			return nil
		}
	}
	return ErrSignatureInvalid
}

// derToRaw converts an ASN.1 DER ECDSA signature (sigstore's output) to the
// JWS form (RFC 7518 section 3.4): r and s as big-endian integers, each
// left-padded to the curve's byte length, concatenated.
func derToRaw(alg Alg, der []byte) ([]byte, error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) != 0 {
		return nil, errors.New("sign: ecdsa signature is not one DER SEQUENCE")
	}
	n := alg.sigSize() / 2
	order := alg.curve().Params().N
	for _, v := range []*big.Int{sig.R, sig.S} {
		if v.Sign() <= 0 || v.Cmp(order) >= 0 {
			return nil, errors.New("sign: ecdsa signature value out of range")
		}
	}
	raw := make([]byte, 2*n)
	sig.R.FillBytes(raw[:n])
	sig.S.FillBytes(raw[n:])
	return raw, nil
}

// CheckTrust decides whether the record's key is the one the caller
// trusts: the RFC 7638 thumbprints of trusted and cnf.jwk must be equal
// (ErrCnfKeyMismatch otherwise; ErrTrustedKeyMissing for a nil key). An
// embedded key alone proves only that the record is internally consistent.
func CheckTrust(rec *Record, trusted crypto.PublicKey) error {
	if rec == nil {
		return errors.New("check trust: nil record")
	}
	if trusted == nil {
		return ErrTrustedKeyMissing
	}
	want, err := Thumbprint(trusted)
	if err != nil {
		return fmt.Errorf("trusted key: %w", err)
	}
	got, err := rec.Cnf.JWK.Thumbprint()
	if err != nil {
		return fmt.Errorf("cnf.jwk: %w", err)
	}
	if got != want {
		return fmt.Errorf("%w: trusted key thumbprint %s, cnf.jwk thumbprint %s", ErrCnfKeyMismatch, want, got)
	}
	return nil
}

// ParentRecordHash returns delegation.parent_record_hash for a parent
// record: "sha256:" + hex SHA-256 of the RFC 8785 bytes of the parent record
// with its signature (canon PolicyV02). The record is parsed strictly but
// not otherwise checked: verify the parent separately.
func ParentRecordHash(recordBytes []byte) (string, error) {
	doc, err := parseRecordDoc(recordBytes)
	if err != nil {
		return "", fmt.Errorf("parent record hash: %w", err)
	}
	d, err := doc.Root().Digest(canon.PolicyV02)
	if err != nil {
		return "", fmt.Errorf("parent record hash: %w: %w", ErrCanonicalization, err)
	}
	return d, nil
}
