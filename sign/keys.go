package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// Alg names a signing algorithm tracectl supports.
type Alg string

// The algorithms. Ed25519 is the default and the only one every TRACE v0.2
// verifier in the ecosystem accepts; see spec/signing.md for ECDSA.
const (
	Ed25519 Alg = "ed25519" // EdDSA over Ed25519 (pure, RFC 8032), 64-byte signature
	P256    Alg = "p256"    // ECDSA P-256 with SHA-256, JWS ES256 raw r||s, 64 bytes
	P384    Alg = "p384"    // ECDSA P-384 with SHA-384, JWS ES384 raw r||s, 96 bytes
)

// ParseAlg accepts "ed25519", "p256" or "p384".
func ParseAlg(s string) (Alg, error) {
	switch a := Alg(s); a {
	case Ed25519, P256, P384:
		return a, nil
	}
	return "", fmt.Errorf("unknown key algorithm %q (want ed25519, p256 or p384)", s)
}

func (a Alg) String() string { return string(a) }

// sigSize is the length of a raw signature: Ed25519's fixed 64 bytes, and
// for ECDSA r||s each left-padded to the curve's byte length.
func (a Alg) sigSize() int {
	switch a {
	case Ed25519, P256:
		return 64
	case P384:
		return 96
	}
	return 0
}

// hash is the digest ECDSA signs; Ed25519 signs the message itself.
func (a Alg) hash() crypto.Hash {
	switch a {
	case P256:
		return crypto.SHA256
	case P384:
		return crypto.SHA384
	}
	return crypto.Hash(0)
}

func (a Alg) curve() elliptic.Curve {
	switch a {
	case P256:
		return elliptic.P256()
	case P384:
		return elliptic.P384()
	}
	return nil
}

// algOf returns the algorithm of a supported public key.
func algOf(pub crypto.PublicKey) (Alg, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrUnsupportedKey, len(k))
		}
		return Ed25519, nil
	case *ecdsa.PublicKey:
		if k == nil {
			break
		}
		switch k.Curve {
		case elliptic.P256():
			return P256, nil
		case elliptic.P384():
			return P384, nil
		}
		return "", fmt.Errorf("%w: ECDSA curve %s", ErrUnsupportedKey, k.Curve.Params().Name)
	}
	return "", fmt.Errorf("%w: public key type %T", ErrUnsupportedKey, pub)
}

// Signer signs a record's signature preimage: the RFC 8785 bytes of the
// record without its signature member. It returns the raw signature in the
// encoding spec/signing.md fixes for Alg (Ed25519's 64 bytes; ECDSA r||s).
// Implementations: NewSigner (an in-memory key), LoadKeyFile (PEM files),
// LoadKMS (sigstore KMS references).
type Signer interface {
	Alg() Alg
	Public() crypto.PublicKey
	SignRecordBytes(preimage []byte) ([]byte, error)
}

// Generate creates a key for alg from rand. Every bit of the key comes from
// rand, so a deterministic reader gives a deterministic key (tests, vectors);
// real keys need crypto/rand.Reader. (crypto/ecdsa.GenerateKey ignores its
// reader since Go 1.26, so ECDSA scalars are drawn here by rejection
// sampling, which is unbiased.)
func Generate(alg Alg, rand io.Reader) (crypto.Signer, error) {
	if rand == nil {
		return nil, errors.New("generate key: nil random source")
	}
	switch alg {
	case Ed25519:
		_, priv, err := ed25519.GenerateKey(rand)
		if err != nil {
			return nil, fmt.Errorf("generate ed25519 key: %w", err)
		}
		return priv, nil
	case P256, P384:
		buf := make([]byte, alg.sigSize()/2)
		// A candidate is rejected with probability below 2^-32 (it is zero
		// or not below the group order): 64 rejections in a row mean the
		// reader is broken, not unlucky.
		for range 64 {
			if _, err := io.ReadFull(rand, buf); err != nil {
				return nil, fmt.Errorf("generate %s key: %w", alg, err)
			}
			if k, err := ecdsa.ParseRawPrivateKey(alg.curve(), buf); err == nil {
				return k, nil
			}
		}
		return nil, fmt.Errorf("generate %s key: random source yields no valid scalar", alg)
	}
	return nil, fmt.Errorf("generate key: %w: algorithm %q", ErrUnsupportedKey, string(alg))
}

// PublicKeySuffix is appended to a private key's path to name its public key.
const PublicKeySuffix = ".pub"

// WriteKeyPair writes key to path (PKCS#8 PEM, mode 0600) and its public
// key to path+PublicKeySuffix (PKIX PEM, mode 0644). With a non-empty
// password the private key is written in sigstore's encrypted format
// (scrypt + secretbox, PEM type "ENCRYPTED SIGSTORE PRIVATE KEY"), which
// cosign and sigstore read too. Both files are created exclusively: if
// either exists nothing is written and the error wraps fs.ErrExist. On any
// failure the files this call created are removed.
func WriteKeyPair(path string, key crypto.Signer, password []byte) error {
	if key == nil {
		return errors.New("write key pair: nil key")
	}
	if _, err := algOf(key.Public()); err != nil {
		return fmt.Errorf("write key pair: %w", err)
	}
	var privPEM []byte
	if len(password) == 0 {
		p, err := cryptoutils.MarshalPrivateKeyToPEM(key)
		if err != nil {
			return fmt.Errorf("encode private key: %w", err)
		}
		privPEM = p
	} else {
		der, err := cryptoutils.MarshalPrivateKeyToEncryptedDER(key, cryptoutils.StaticPasswordFunc(password))
		if err != nil {
			return fmt.Errorf("encrypt private key: %w", err)
		}
		privPEM = cryptoutils.PEMEncode(cryptoutils.EncryptedSigstorePrivateKeyPEMType, der)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		return fmt.Errorf("encode public key: %w", err)
	}
	pubPath := path + PublicKeySuffix
	priv, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create private key file: %w", err)
	}
	pub, err := os.OpenFile(pubPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		priv.Close()
		os.Remove(path)
		return fmt.Errorf("create public key file: %w", err)
	}
	err = errors.Join(writeSync(priv, privPEM), writeSync(pub, pubPEM))
	if err != nil {
		os.Remove(path)
		os.Remove(pubPath)
		return fmt.Errorf("write key pair: %w", err)
	}
	return nil
}

// writeSync writes b, syncs and closes f.
func writeSync(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// MaxKeyFileBytes bounds a key file. PEM keys of the supported algorithms,
// encrypted or not, are under 1 KiB; a JWK with metadata a few KiB. Anything
// near 64 KiB is not a key.
const MaxKeyFileBytes = 64 << 10

// readBounded reads a file of at most MaxKeyFileBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxKeyFileBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes: not a key file", path, MaxKeyFileBytes)
	}
	return b, nil
}

// LoadKeyFile reads a PEM private key file (at most MaxKeyFileBytes) and
// returns its Signer. See loadPrivateKeyPEM.
func LoadKeyFile(path string, password func() ([]byte, error)) (Signer, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("load key: %w", err)
	}
	s, err := loadPrivateKeyPEM(b, password)
	if err != nil {
		return nil, fmt.Errorf("load key %s: %w", path, err)
	}
	return s, nil
}

// encryptedPEMTypes need a password: sigstore's and cosign's scrypt +
// secretbox format, and PKCS#8 encrypted keys.
var encryptedPEMTypes = map[string]bool{
	string(cryptoutils.EncryptedSigstorePrivateKeyPEMType): true,
	"ENCRYPTED COSIGN PRIVATE KEY":                         true,
	"ENCRYPTED PRIVATE KEY":                                true,
}

// loadPrivateKeyPEM parses one PEM private key: PKCS#8 ("PRIVATE KEY"),
// SEC 1 ("EC PRIVATE KEY"), PKCS#8-encrypted ("ENCRYPTED PRIVATE KEY") or
// sigstore-encrypted ("ENCRYPTED SIGSTORE PRIVATE KEY", and cosign's older
// name). password is called at most once, and only for an encrypted key; a
// nil password with an encrypted key is ErrPasswordRequired.
func loadPrivateKeyPEM(data []byte, password func() ([]byte, error)) (Signer, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("data after the PEM block")
	}
	//lint:ignore SA1019 legacy PEM encryption is detected only to ask for a password
	encrypted := encryptedPEMTypes[block.Type] || x509.IsEncryptedPEMBlock(block) //nolint:staticcheck
	pf := cryptoutils.SkipPassword
	var pwErr error // a failure to obtain the password is not a wrong password
	if encrypted {
		if password == nil {
			return nil, fmt.Errorf("private key is encrypted: %w", ErrPasswordRequired)
		}
		pf = func(bool) ([]byte, error) {
			pw, err := password()
			switch {
			case err != nil:
				pwErr = fmt.Errorf("read password: %w", err)
			case len(pw) == 0:
				pwErr = fmt.Errorf("%w: empty password", ErrPasswordRequired)
			}
			return pw, pwErr
		}
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(data, pf)
	switch {
	case pwErr != nil:
		return nil, pwErr
	case err != nil && encrypted:
		return nil, fmt.Errorf("%w: %w", ErrKeyDecrypt, err)
	case err != nil:
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	return NewSigner(priv)
}

// NewSigner returns a Signer for an in-memory Ed25519, ECDSA P-256 or ECDSA
// P-384 private key, signing through sigstore's signature package.
func NewSigner(priv crypto.PrivateKey) (Signer, error) {
	cs, ok := priv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: private key type %T", ErrUnsupportedKey, priv)
	}
	if k, ok := priv.(*ed25519.PrivateKey); ok { // x509 never returns this, callers might
		priv, cs = *k, *k
	}
	alg, err := algOf(cs.Public())
	if err != nil {
		return nil, err
	}
	h := alg.hash()
	if alg == Ed25519 {
		h = crypto.SHA256 // ignored: sigstore's Ed25519 signer is pure
	}
	sv, err := signature.LoadSigner(priv, h)
	if err != nil {
		return nil, fmt.Errorf("load signer: %w", err)
	}
	return &keySigner{alg: alg, pub: cs.Public(), sv: sv, priv: cs}, nil
}

type keySigner struct {
	alg  Alg
	pub  crypto.PublicKey
	sv   signature.Signer
	priv crypto.Signer
}

// SignDigest signs a digest h made, as crypto.Signer does: Ed25519ph for
// an Ed25519 key (h must be SHA-512), ASN.1 DER ECDSA otherwise. It is what
// a Rekor v2 hashedrekord entry needs (internal/anchor/rekor); it is a
// method of the unexported key type only, so the Signer interface, and a
// signer that signs only records, are unchanged.
func (k *keySigner) SignDigest(digest []byte, h crypto.Hash) ([]byte, error) {
	if len(digest) != h.Size() {
		return nil, fmt.Errorf("sign digest: %d bytes, want %d for %v", len(digest), h.Size(), h)
	}
	if k.alg == Ed25519 && h != crypto.SHA512 {
		return nil, fmt.Errorf("sign digest: Ed25519ph signs a SHA-512 digest, not %v", h)
	}
	sig, err := k.priv.Sign(rand.Reader, digest, h)
	if err != nil {
		return nil, fmt.Errorf("sign digest: %w", err)
	}
	return sig, nil
}

func (k *keySigner) Alg() Alg                 { return k.alg }
func (k *keySigner) Public() crypto.PublicKey { return k.pub }

func (k *keySigner) SignRecordBytes(msg []byte) ([]byte, error) {
	sig, err := k.sv.SignMessage(bytes.NewReader(msg))
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return rawSignature(k.alg, sig)
}

// rawSignature converts sigstore's output to the record encoding: Ed25519
// signatures pass through; ECDSA ASN.1 DER becomes fixed-length r||s.
func rawSignature(alg Alg, sig []byte) ([]byte, error) {
	if alg == Ed25519 {
		if len(sig) != ed25519.SignatureSize {
			return nil, fmt.Errorf("sign: ed25519 signature of %d bytes", len(sig))
		}
		return sig, nil
	}
	return derToRaw(alg, sig)
}

// IsKMSRef reports whether ref names a KMS key ("<scheme>://...") rather
// than a file.
func IsKMSRef(ref string) bool {
	i := strings.Index(ref, "://")
	if i <= 0 {
		return false
	}
	for _, c := range ref[:i] {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// LoadKMS returns a Signer for a sigstore KMS reference. Providers come from
// sigstore's registry: "<name>://..." runs the plugin executable
// "sigstore-kms-<name>" when no built-in provider matches (tracectl links
// none of the cloud providers), and tests register fakekms:// by importing
// sigstore's kms/fake. ctx is used for loading and for every signature.
// Each signature is verified under the KMS public key before it is
// returned, so a provider that hashes or encodes differently fails here, not
// in a verifier later.
func LoadKMS(ctx context.Context, ref string) (Signer, error) {
	sv, err := kms.Get(ctx, ref, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("load kms key %q: %w", ref, err)
	}
	pub, err := sv.PublicKey(options.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("kms key %q: public key: %w", ref, err)
	}
	alg, err := algOf(pub)
	if err != nil {
		return nil, fmt.Errorf("kms key %q: %w", ref, err)
	}
	if alg == P384 {
		// The hash is fixed when a provider is loaded: ask again with the
		// one ES384 needs.
		if sv, err = kms.Get(ctx, ref, crypto.SHA384); err != nil {
			return nil, fmt.Errorf("load kms key %q: %w", ref, err)
		}
	}
	return &kmsSigner{ctx: ctx, alg: alg, pub: pub, sv: sv}, nil
}

type kmsSigner struct {
	ctx context.Context // sigstore's KMS signers carry their context the same way
	alg Alg
	pub crypto.PublicKey
	sv  signature.SignerVerifier
}

func (k *kmsSigner) Alg() Alg                 { return k.alg }
func (k *kmsSigner) Public() crypto.PublicKey { return k.pub }

func (k *kmsSigner) SignRecordBytes(msg []byte) ([]byte, error) {
	opts := []signature.SignOption{options.WithContext(k.ctx)}
	if k.alg != Ed25519 {
		opts = append(opts, options.WithCryptoSignerOpts(k.alg.hash()))
	}
	sig, err := k.sv.SignMessage(bytes.NewReader(msg), opts...)
	if err != nil {
		return nil, fmt.Errorf("kms sign: %w", err)
	}
	raw, err := rawSignature(k.alg, sig)
	if err != nil {
		return nil, fmt.Errorf("kms sign: %w", err)
	}
	if err := verifyRaw(k.alg, k.pub, msg, raw); err != nil {
		return nil, fmt.Errorf("kms sign: the provider's signature does not verify under its own public key: %w", err)
	}
	return raw, nil
}

// ParsePublicKey reads a trusted public key: PKIX PEM ("PUBLIC KEY", as
// keygen writes KEY.pub) or a JWK JSON object (see ParseJWK). Only Ed25519,
// P-256 and P-384 keys are accepted.
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		j, err := ParseJWK(data)
		if err != nil {
			return nil, fmt.Errorf("parse jwk: %w", err)
		}
		return j.PublicKey()
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("parse public key: neither a PEM block nor a JWK object")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("parse public key: data after the PEM block")
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	if _, err := algOf(pub); err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	return pub, nil
}

// LoadPublicKeyFile reads a public key file of at most MaxKeyFileBytes with
// ParsePublicKey.
func LoadPublicKeyFile(path string) (crypto.PublicKey, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("load public key: %w", err)
	}
	pub, err := ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("load public key %s: %w", path, err)
	}
	return pub, nil
}
