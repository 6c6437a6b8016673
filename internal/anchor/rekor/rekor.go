// Package rekor is tracectl's side of anchoring a sealed record in a
// Rekor v2 log (rekor-tiles, spec/anchoring.md "Rekor v2"): the hashedrekord
// request over the record's digest, the TransparencyLogEntry a bundle keeps
// in anchors/rekor/, and its offline check with sigstore-go against a
// sigstore trusted root.
//
// The package never reads the clock and never contacts a log: checks are
// pure functions of the bytes, keys and trusted root given, so verify can
// use them. Submission is internal/anchor/rekorsubmit.
package rekor

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	pbs "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	pb "github.com/sigstore/rekor-tiles/v2/pkg/generated/protobuf"
	"github.com/sigstore/rekor-tiles/v2/pkg/types/hashedrekord"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	f_log "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tracectl/tracectl/internal/anchor"
)

// Bundle layout (spec/anchoring.md, "Rekor v2").
const (
	// Dir holds the Rekor entries of a bundle's statements.
	Dir = anchor.Dir + "/rekor"
	// EntryFile is the TransparencyLogEntry (protojson) of the anchored
	// record, anchor.RecordFile: the entry as the log returned it, with
	// its inclusion proof and signed checkpoint.
	EntryFile = Dir + "/record.json"
	// Scheme prefixes --anchor's URL for a Rekor v2 log.
	Scheme = "rekor:"
)

// Limits of what is read.
const (
	MaxEntryBytes = 256 << 10
	MaxRootBytes  = 1 << 20
)

// DigestSigner signs a digest the hash h made (crypto.Signer's contract):
// an Ed25519 key signs it as Ed25519ph (RFC 8032), an ECDSA key as ECDSA
// over that digest, in ASN.1 DER. tracectl's in-memory and file keys
// implement it; a signer that signs only Trust Records does not.
type DigestSigner interface {
	SignDigest(digest []byte, h crypto.Hash) ([]byte, error)
}

// RecordDigestSigner signs the digest of a signed record it is given whole
// (within ctx: the seal's wait for the log bounds it too),
// with the hash Algorithm names: a signer process that checks what it
// signs (internal/signer's Client, KindRekor) and so never signs a bare
// digest.
type RecordDigestSigner interface {
	SignRekorDigest(ctx context.Context, record []byte) ([]byte, error)
}

// Algorithm is how a key signs a hashedrekord entry: the hash of the
// statement and the sigstore key details Rekor v2 registers. Rekor v2
// (v2.3.0) verifies an Ed25519 hashedrekord signature only as Ed25519ph
// over a SHA-512 digest, so that is what an Ed25519 producer key signs.
func Algorithm(pub crypto.PublicKey) (crypto.Hash, protocommon.PublicKeyDetails, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return crypto.SHA512, protocommon.PublicKeyDetails_PKIX_ED25519_PH, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return crypto.SHA256, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256, nil
		case elliptic.P384():
			return crypto.SHA384, protocommon.PublicKeyDetails_PKIX_ECDSA_P384_SHA_384, nil
		}
	}
	return 0, 0, fmt.Errorf("no Rekor v2 algorithm for a %T key", pub)
}

// Digest is the statement's digest under h.
func Digest(statement []byte, h crypto.Hash) []byte {
	d := h.New()
	d.Write(statement)
	return d.Sum(nil)
}

// ErrNoDigestSigner is returned for a signer that is neither a
// DigestSigner nor a RecordDigestSigner (a KMS key).
var ErrNoDigestSigner = errors.New("the signing key cannot sign a digest for a Rekor hashedrekord entry (a key file or a tracectl signer can)")

// Request signs the statement's digest with s (a DigestSigner or a
// RecordDigestSigner), whose public key is pub, and returns Rekor v2's
// hashedrekord v0.0.2 request. The signature is checked under pub.
func Request(ctx context.Context, statement []byte, pub crypto.PublicKey, s any) (*pb.HashedRekordRequestV002, error) {
	h, details, err := Algorithm(pub)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("producer key: %w", err)
	}
	digest := Digest(statement, h)
	var sig []byte
	switch s := s.(type) {
	case RecordDigestSigner:
		sig, err = s.SignRekorDigest(ctx, statement)
	case DigestSigner:
		sig, err = s.SignDigest(digest, h)
	default:
		return nil, ErrNoDigestSigner
	}
	if err != nil {
		return nil, fmt.Errorf("sign the record's digest: %w", err)
	}
	if err := verifyDigest(pub, h, digest, sig); err != nil {
		return nil, fmt.Errorf("the digest's signature does not verify under the producer key: %w", err)
	}
	return &pb.HashedRekordRequestV002{
		Digest: digest,
		Signature: &pb.Signature{
			Content: sig,
			Verifier: &pb.Verifier{
				Verifier:   &pb.Verifier_PublicKey{PublicKey: &pb.PublicKey{RawBytes: der}},
				KeyDetails: details,
			},
		},
	}, nil
}

func verifyDigest(pub crypto.PublicKey, h crypto.Hash, digest, sig []byte) error {
	v, err := signature.LoadVerifierWithOpts(pub, options.WithHash(h), options.WithED25519ph())
	if err != nil {
		return err
	}
	return v.VerifySignature(bytes.NewReader(sig), nil, options.WithDigest(digest), options.WithCryptoSignerOpts(h))
}

// MarshalEntry encodes an entry as the bundle keeps it: protojson,
// indented by encoding/json so the bytes are stable (protojson's own
// whitespace is deliberately not).
func MarshalEntry(e *pbs.TransparencyLogEntry) ([]byte, error) {
	b, err := protojson.Marshal(e)
	if err != nil {
		return nil, err
	}
	var c, out bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, c.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// ParseEntry reads a kept entry strictly: bounded, no unknown fields.
func ParseEntry(data []byte) (*pbs.TransparencyLogEntry, error) {
	if len(data) > MaxEntryBytes {
		return nil, fmt.Errorf("%w: Rekor entry of %d bytes, more than %d", anchor.ErrInvalid, len(data), MaxEntryBytes)
	}
	var e pbs.TransparencyLogEntry
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%w: Rekor entry: %v", anchor.ErrInvalid, err)
	}
	return &e, nil
}

// ParseTrustedRoot reads a sigstore TrustedRoot (JSON) and requires at
// least one Rekor log in it.
func ParseTrustedRoot(data []byte) (*root.TrustedRoot, error) {
	if len(data) > MaxRootBytes {
		return nil, fmt.Errorf("trusted root of %d bytes, more than %d", len(data), MaxRootBytes)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	if len(tr.RekorLogs()) == 0 {
		return nil, errors.New("trusted root: no Rekor log (tlogs) in it")
	}
	return tr, nil
}

// Checked is what a valid entry proves.
type Checked struct {
	Index   uint64 // the entry's log index
	Size    uint64 // the tree size of the checkpoint it is proved under
	BaseURL string // the log's base URL in the trusted root
	Origin  string // the checkpoint's origin line
}

// producerHint names the producer key inside the sigstore bundle Check
// builds: verification material is matched by this hint, not by identity.
const producerHint = "tracectl-producer"

// Check verifies e offline: it is a Rekor v2 hashedrekord v0.0.2 entry for
// statement's digest signed by producer (its signature verifies over that
// digest), and sigstore-go's VerifyTlogEntry proves the entry rebuilt from
// those (digest, signature, key) is included, by its inclusion proof, in
// a checkpoint signed by a Rekor log of tr whose key the trusted root
// holds valid at at (the anchored record's iat: a Rekor v2 entry carries
// no signed time). Every failure wraps anchor.ErrInvalid.
func Check(e *pbs.TransparencyLogEntry, statement []byte, producer crypto.PublicKey, tr *root.TrustedRoot, at time.Time) (*Checked, error) {
	fail := func(format string, a ...any) (*Checked, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{anchor.ErrInvalid}, a...)...)
	}
	h, digest, sig, err := matches(e, statement, producer)
	if err != nil {
		return nil, err
	}
	pkv, err := signature.LoadVerifierWithOpts(producer, options.WithHash(h), options.WithED25519ph())
	if err != nil {
		return fail("producer key: %v", err)
	}
	keys := root.NewTrustedPublicKeyMaterialFromMapping(map[string]*root.ExpiringKey{producerHint: root.NewExpiringKey(pkv, time.Time{}, time.Time{})})
	algo := protocommon.HashAlgorithm_SHA2_256
	switch h {
	case crypto.SHA384:
		algo = protocommon.HashAlgorithm_SHA2_384
	case crypto.SHA512:
		algo = protocommon.HashAlgorithm_SHA2_512
	}
	b, err := sgbundle.NewBundle(&protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: producerHint}},
			TlogEntries: []*pbs.TransparencyLogEntry{e},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: algo, Digest: digest},
			Signature:     sig,
		}},
	})
	if err != nil {
		return fail("%v", err)
	}
	if _, err := sgverify.VerifyTlogEntry(b, root.TrustedMaterialCollection{tr, keys}, 1, false); err != nil {
		return fail("sigstore-go: %v", err)
	}
	// VerifyTlogEntry checked the checkpoint under the log the entry's
	// log id names; name it and the tree size for the finding.
	tl := tr.RekorLogs()[fmt.Sprintf("%x", e.GetLogId().GetKeyId())]
	if tl == nil {
		return fail("the entry's log is not in the trusted root")
	}
	// VerifyTlogEntry does not read the log key's validity window for a
	// Rekor v2 entry (it has no signed time): the key must be valid at at.
	if at.Before(tl.ValidityPeriodStart) || !tl.ValidityPeriodEnd.IsZero() && at.After(tl.ValidityPeriodEnd) {
		return fail("the log key of %s is not valid at %s in the trusted root (validity %s to %s)", tl.BaseURL, at.UTC().Format(time.RFC3339),
			tl.ValidityPeriodStart.UTC().Format(time.RFC3339), validityEnd(tl.ValidityPeriodEnd))
	}
	cp, err := parseCheckpointUnverified(e.GetInclusionProof().GetCheckpoint().GetEnvelope())
	if err != nil {
		return fail("%v", err)
	}
	return &Checked{Index: uint64(e.GetLogIndex()), Size: cp.Size, BaseURL: tl.BaseURL, Origin: cp.Origin}, nil
}

// Matches checks what an entry says without a trusted root: a Rekor v2
// hashedrekord v0.0.2 entry with an inclusion proof, for statement's
// digest, signed by producer (the signature verifies over that digest).
// Every failure wraps anchor.ErrInvalid.
func Matches(e *pbs.TransparencyLogEntry, statement []byte, producer crypto.PublicKey) error {
	_, _, _, err := matches(e, statement, producer)
	return err
}

func matches(e *pbs.TransparencyLogEntry, statement []byte, producer crypto.PublicKey) (crypto.Hash, []byte, []byte, error) {
	fail := func(format string, a ...any) (crypto.Hash, []byte, []byte, error) {
		return 0, nil, nil, fmt.Errorf("%w: "+format, append([]any{anchor.ErrInvalid}, a...)...)
	}
	entry, err := tlog.ParseTransparencyLogEntry(e)
	if err != nil {
		return fail("Rekor entry: %v", err)
	}
	if err := tlog.ValidateEntry(entry); err != nil {
		return fail("Rekor entry: %v", err)
	}
	if !entry.IsRekorV2() || e.GetKindVersion().GetKind() != "hashedrekord" || e.GetKindVersion().GetVersion() != "0.0.2" {
		return fail("not a Rekor v2 hashedrekord 0.0.2 entry (%.40q %.20q)", e.GetKindVersion().GetKind(), e.GetKindVersion().GetVersion())
	}
	if !entry.HasInclusionProof() {
		return fail("the Rekor entry has no inclusion proof")
	}
	h, _, err := Algorithm(producer)
	if err != nil {
		return fail("%v", err)
	}
	digest := Digest(statement, h)
	// What the entry's body says is compared first, for a finding that
	// names the difference; Check's proof does not read the body.
	if got, _, ok := entry.GetHashedRekordDigest(); !ok || !bytes.Equal(got, digest) {
		return fail("the Rekor entry is for another digest than this record's: it anchors a different record")
	}
	if k := entry.PublicKey(); k == nil || !keyEqual(k, producer) {
		return fail("the Rekor entry is signed by another key than the record's producer key (cnf.jwk)")
	}
	sig := entry.Signature()
	if err := verifyDigest(producer, h, digest, sig); err != nil {
		return fail("the Rekor entry's signature does not verify over this record's digest: %v", err)
	}
	return h, digest, sig, nil
}

// CheckAnswer checks the entry a log answered to req at host (the host of
// the URL submitted to) as far as it can be without a trusted root: its
// encoding within MaxEntryBytes (what verify reads), its checkpoint's
// origin host (a Rekor v2 origin is its host; verify requires it), and its
// inclusion proof of the leaf rebuilt from req at the entry's log index
// against the checkpoint's size and root hash (the checkpoint's signature
// is verify's to check). Every failure wraps anchor.ErrInvalid.
func CheckAnswer(e *pbs.TransparencyLogEntry, req *pb.HashedRekordRequestV002, host string) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{anchor.ErrInvalid}, a...)...)
	}
	b, err := MarshalEntry(e)
	if err != nil {
		return fail("Rekor entry: %v", err)
	}
	if len(b) > MaxEntryBytes {
		return fail("Rekor entry of %d bytes, more than %d", len(b), MaxEntryBytes)
	}
	cp, err := parseCheckpointUnverified(e.GetInclusionProof().GetCheckpoint().GetEnvelope())
	if err != nil {
		return fail("%v", err)
	}
	if cp.Origin != host {
		return fail("the checkpoint's origin %.100q is not the log's host %.100q: an answer of another log", cp.Origin, host)
	}
	leaf, err := hashedrekord.ToEntryHash(req.GetDigest(), req.GetSignature())
	if err != nil {
		return fail("%v", err)
	}
	if e.GetLogIndex() < 0 {
		return fail("log index %d", e.GetLogIndex())
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(e.GetLogIndex()), cp.Size, leaf, e.GetInclusionProof().GetHashes(), cp.Hash); err != nil {
		return fail("the inclusion proof does not verify against its checkpoint: %v", err)
	}
	return nil
}

// parseCheckpointUnverified reads the body of a checkpoint whose signature
// VerifyTlogEntry has verified (or, for CheckAnswer, verify will).
func parseCheckpointUnverified(env string) (*f_log.Checkpoint, error) {
	body, _, ok := strings.Cut(env, "\n\n")
	if !ok {
		return nil, errors.New("checkpoint without signatures")
	}
	var cp f_log.Checkpoint
	if _, err := cp.Unmarshal([]byte(body + "\n")); err != nil {
		return nil, fmt.Errorf("checkpoint: %v", err)
	}
	return &cp, nil
}

func validityEnd(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.UTC().Format(time.RFC3339)
}

func keyEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
