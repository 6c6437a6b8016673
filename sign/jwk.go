package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/tracectl/tracectl/canon"
)

// JWK is a public JSON Web Key as a record's cnf.jwk carries it: Ed25519
// (RFC 8037: kty "OKP", crv "Ed25519", x) or ECDSA (RFC 7518: kty "EC", crv
// "P-256" or "P-384", x, y; coordinates at the curve's full byte length).
// Byte values are unpadded base64url.
type JWK struct {
	Kty string
	Crv string
	X   string
	Y   string // EC only
	// Extra holds every other member exactly as received (kid, alg, use,
	// ...): TRACE v0.2 allows unknown members inside cnf.jwk. Private key
	// members are never accepted here (see ParseJWK).
	Extra map[string]json.RawMessage
}

// privateJWKMembers are the JWK members that carry private key material
// (RFC 7518 section 6: EC d; RSA d, p, q, dp, dq, qi, oth; symmetric k).
var privateJWKMembers = map[string]bool{"d": true, "p": true, "q": true, "dp": true, "dq": true, "qi": true, "oth": true, "k": true}

// jwkFromPublicKey returns the JWK of a supported public key.
func jwkFromPublicKey(pub crypto.PublicKey) (JWK, error) {
	alg, err := algOf(pub)
	if err != nil {
		return JWK{}, err
	}
	if alg == Ed25519 {
		return JWK{Kty: "OKP", Crv: "Ed25519", X: b64(pub.(ed25519.PublicKey))}, nil
	}
	pt, err := pub.(*ecdsa.PublicKey).Bytes() // 0x04 || X || Y, fixed length
	if err != nil {
		return JWK{}, fmt.Errorf("%w: %w", ErrUnsupportedKey, err)
	}
	n := (len(pt) - 1) / 2
	return JWK{Kty: "EC", Crv: crvName(alg), X: b64(pt[1 : 1+n]), Y: b64(pt[1+n:])}, nil
}

func crvName(a Alg) string {
	switch a {
	case Ed25519:
		return "Ed25519"
	case P256:
		return "P-256"
	case P384:
		return "P-384"
	}
	return ""
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// decodeB64URL decodes canonical unpadded base64url: only the URL alphabet
// (no padding, no whitespace, which Go's decoder would otherwise skip) and
// unused trailing bits zero, so each byte string has exactly one text.
func decodeB64URL(s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return nil, false
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return b, err == nil
}

// alg returns the algorithm the JWK's kty and crv name.
func (j JWK) alg() (Alg, error) {
	switch {
	case j.Kty == "OKP" && j.Crv == "Ed25519":
		return Ed25519, nil
	case j.Kty == "EC" && j.Crv == "P-256":
		return P256, nil
	case j.Kty == "EC" && j.Crv == "P-384":
		return P384, nil
	case j.Kty != "OKP" && j.Kty != "EC":
		return "", fmt.Errorf("%w: jwk kty %q", ErrUnsupportedKey, j.Kty)
	}
	return "", fmt.Errorf("%w: jwk kty %q with crv %q", ErrUnsupportedKey, j.Kty, j.Crv)
}

// PublicKey returns the key the JWK describes, checking coordinate lengths
// and that an EC point is on its curve.
func (j JWK) PublicKey() (crypto.PublicKey, error) {
	alg, err := j.alg()
	if err != nil {
		return nil, err
	}
	size := alg.sigSize() / 2
	if alg == Ed25519 {
		size = ed25519.PublicKeySize
	}
	x, ok := decodeB64URL(j.X)
	if !ok || len(x) != size {
		return nil, fmt.Errorf("%w: jwk x: want canonical unpadded base64url of %d bytes", ErrUnsupportedKey, size)
	}
	if alg == Ed25519 {
		return ed25519.PublicKey(x), nil
	}
	y, ok := decodeB64URL(j.Y)
	if !ok || len(y) != size {
		return nil, fmt.Errorf("%w: jwk y: want canonical unpadded base64url of %d bytes", ErrUnsupportedKey, size)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(alg.curve(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return nil, fmt.Errorf("%w: jwk x, y: not a point on %s", ErrUnsupportedKey, j.Crv)
	}
	return pub, nil
}

// Thumbprint returns the RFC 7638 thumbprint: unpadded base64url of SHA-256
// over the required members in lexicographic order without whitespace
// ({"crv","kty","x"} for OKP, {"crv","kty","x","y"} for EC). Extra members
// never change it.
func (j JWK) Thumbprint() (string, error) {
	if _, err := j.PublicKey(); err != nil {
		return "", err
	}
	// Every value is a known name or base64url text: nothing to escape.
	s := `{"crv":"` + j.Crv + `","kty":"` + j.Kty + `","x":"` + j.X + `"`
	if j.Kty == "EC" {
		s += `,"y":"` + j.Y + `"`
	}
	sum := sha256.Sum256([]byte(s + "}"))
	return b64(sum[:]), nil
}

func (j JWK) hasThumbprint(tp string) bool {
	got, err := j.Thumbprint()
	return err == nil && got == tp
}

// Thumbprint returns the RFC 7638 thumbprint of a supported public key.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	j, err := jwkFromPublicKey(pub)
	if err != nil {
		return "", err
	}
	return j.Thumbprint()
}

// ParseJWK parses a public JWK strictly: one JSON object without duplicate
// member names (at most MaxKeyFileBytes), kty and crv among those tracectl
// supports, canonical base64url coordinates of the curve's length, an EC
// point on its curve, and no private key member (d, p, q, dp, dq, qi, oth,
// k). Shape problems come back together as a *ShapeError with pointers into
// the JWK document.
func ParseJWK(data []byte) (JWK, error) {
	if len(data) > MaxKeyFileBytes {
		return JWK{}, fmt.Errorf("%w: jwk larger than %d bytes", ErrMalformed, MaxKeyFileBytes)
	}
	doc, err := canon.Parse(data, canon.ParseOptions{})
	if err != nil {
		return JWK{}, classifyCanon(err)
	}
	var v validator
	v.jwk(doc.Root())
	if err := v.err(); err != nil {
		return JWK{}, err
	}
	var j JWK
	if err := j.UnmarshalJSON(data); err != nil {
		return JWK{}, err
	}
	return j, nil
}

// MarshalJSON writes the JWK's members, refusing private members and
// Extra names that collide with kty, crv, x or y.
func (j JWK) MarshalJSON() ([]byte, error) {
	m := make(map[string]json.RawMessage, len(j.Extra)+4)
	for k, v := range j.Extra {
		if privateJWKMembers[k] {
			return nil, fmt.Errorf("jwk: private member %q", k)
		}
		m[k] = v
	}
	for _, f := range [...]struct{ name, val string }{{"kty", j.Kty}, {"crv", j.Crv}, {"x", j.X}, {"y", j.Y}} {
		if _, dup := m[f.name]; dup {
			return nil, fmt.Errorf("jwk: Extra holds %q", f.name)
		}
		if f.val == "" && f.name == "y" {
			continue
		}
		b, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		m[f.name] = b
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads kty, crv, x (and y for EC keys) as strings and keeps
// every other member in Extra. It does not validate: ParseJWK and
// ParseRecord do, before decoding.
func (j *JWK) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var out JWK
	names := []string{"kty", "crv", "x"}
	var kty string
	if raw, ok := m["kty"]; ok && json.Unmarshal(raw, &kty) == nil && kty == "EC" {
		names = append(names, "y")
	}
	dst := map[string]*string{"kty": &out.Kty, "crv": &out.Crv, "x": &out.X, "y": &out.Y}
	for _, n := range names {
		raw, ok := m[n]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, dst[n]); err != nil {
			return fmt.Errorf("jwk %s: %w", n, err)
		}
		delete(m, n)
	}
	for k := range m {
		if privateJWKMembers[k] {
			return errors.New("jwk: private member " + k)
		}
	}
	if len(m) > 0 {
		out.Extra = maps.Clone(m)
	}
	*j = out
	return nil
}
