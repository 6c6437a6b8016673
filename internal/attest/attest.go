// Package attest restates a verified bundle's signed Trust Record as an
// in-toto Statement v1 in a DSSE envelope (spec/attest.md), so tools that
// consume attestations (cosign verify-blob-attestation, policy engines,
// any DSSE verifier) can check it without knowing TRACE.
//
// What it guarantees:
//   - Statement names two subjects, each with a sha256 digest: record.json
//     (SHA-256 of the exact record bytes given) and transcript-root (the
//     record's tool_transcript.hash: the RFC 6962 root of the transcript
//     lines, not a hash of the transcript file). The predicate is the record
//     itself, and the statement is RFC 8785 canonical (canon.PolicyV02), so
//     the predicate's bytes are the record.json bytes, byte for byte.
//   - Sign signs the DSSE v1 pre-authentication encoding (PAE) of the
//     statement with an Ed25519 key (pure EdDSA), the keyid being the key's
//     RFC 7638 thumbprint as verify reports it (signer_thumbprint).
//   - Open checks an envelope against one Ed25519 key and returns the
//     statement, checked against the in-toto shape; it is bounded
//     (MaxEnvelopeBytes).
//
// The package does not verify the bundle: the caller must verify it first
// (cmd/tracectl attest does, and refuses a bundle that does not verify or a
// key that did not sign it), because an attestation only restates what the
// caller already checked. It never prints, reads the clock or keeps state.
package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	ita1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// Identifiers of the statement and the envelope (spec/attest.md).
const (
	// PredicateType names the predicate: a TRACE v0.2 Trust Record as
	// record.json holds it. It sits under the URI tracectl already names
	// itself by (the record's appraisal.verifier).
	PredicateType = "https://github.com/tracectl/tracectl/attestation/trace-record/v1"
	// PayloadType is the DSSE payload type of an in-toto statement.
	PayloadType = "application/vnd.in-toto+json"
	// SubjectRecord is the subject whose sha256 is that of record.json.
	SubjectRecord = transcript.RecordFile
	// SubjectTranscriptRoot is the subject whose sha256 is the transcript
	// commitment (tool_transcript.hash), an RFC 6962 Merkle root.
	SubjectTranscriptRoot = "transcript-root"
)

// MaxEnvelopeBytes bounds what Open reads: the record is at most
// sign.MaxRecordBytes, and base64 (4/3) plus the statement's own members
// and the signature stay far below twice that.
const MaxEnvelopeBytes = 2*sign.MaxRecordBytes + 16<<10

var (
	// ErrUnsupportedKey: DSSE envelopes are signed with Ed25519 only.
	ErrUnsupportedKey = errors.New("attestations are signed with Ed25519 keys only")
	// ErrNoTranscript: a record that commits to no transcript has no
	// transcript root to name.
	ErrNoTranscript = errors.New("the record commits to no transcript")
	// ErrEnvelope: the envelope is malformed, too large, not of PayloadType,
	// or its signature does not verify under the key given.
	ErrEnvelope = errors.New("invalid attestation envelope")
	// ErrStatement: the payload is not an in-toto Statement v1 of
	// PredicateType with both subjects.
	ErrStatement = errors.New("invalid attestation statement")
)

// Statement returns the canonical bytes of the in-toto Statement v1 for the
// exact record.json bytes given. The record is parsed (sign.ParseRecord) to
// take its transcript commitment; its signature is not checked here.
func Statement(record []byte) ([]byte, error) {
	rec, err := sign.ParseRecord(record)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if rec.ToolTranscript == nil {
		return nil, ErrNoTranscript
	}
	root, err := canon.ParseDigest(rec.ToolTranscript.Hash)
	if err != nil {
		return nil, fmt.Errorf("record tool_transcript.hash: %w", err)
	}
	var pred structpb.Struct
	if err := protojson.Unmarshal(record, &pred); err != nil {
		return nil, fmt.Errorf("record as a predicate: %w", err)
	}
	sum := sha256.Sum256(record)
	st := &ita1.Statement{
		Type: ita1.StatementTypeUri,
		Subject: []*ita1.ResourceDescriptor{
			{Name: SubjectRecord, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}},
			{Name: SubjectTranscriptRoot, Digest: map[string]string{"sha256": hex.EncodeToString(root[:])}},
		},
		PredicateType: PredicateType,
		Predicate:     &pred,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatement, err)
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	// protojson varies its whitespace on purpose; the signed bytes must not.
	// The record's numbers are TRACE v0.2 integers, exact in the float64 of
	// a structpb value, so canonicalization gives back the record's bytes.
	return canon.Canonicalize(b, canon.PolicyV02)
}

// Envelope is a DSSE v1 envelope (JSON: payloadType, payload, signatures).
type Envelope = dsse.Envelope

// Sign wraps the statement in a DSSE envelope signed by s, which must be an
// Ed25519 key, and returns the envelope's JSON (no trailing newline).
func Sign(ctx context.Context, statement []byte, s sign.Signer) ([]byte, error) {
	if s.Alg() != sign.Ed25519 {
		return nil, fmt.Errorf("%w (the key is %s)", ErrUnsupportedKey, s.Alg())
	}
	tp, err := sign.Thumbprint(s.Public())
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(dsseSigner{s: s, keyID: tp})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, statement)
	if err != nil {
		return nil, fmt.Errorf("sign envelope: %w", err)
	}
	return json.Marshal(env)
}

// Open checks the envelope's signature under pub (DSSE v1 PAE, Ed25519)
// and returns the statement it carries, checked against the in-toto
// Statement v1 shape, PredicateType and the two subjects. It does not check
// that the subjects are those of any bundle: the caller compares them.
func Open(ctx context.Context, envelope []byte, pub ed25519.PublicKey) (*ita1.Statement, error) {
	if len(envelope) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrEnvelope, MaxEnvelopeBytes)
	}
	var env dsse.Envelope
	dec := json.NewDecoder(bytes.NewReader(envelope))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnvelope, err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("%w: payloadType %q, want %q", ErrEnvelope, env.PayloadType, PayloadType)
	}
	tp, err := sign.Thumbprint(pub)
	if err != nil {
		return nil, err
	}
	ev, err := dsse.NewEnvelopeVerifier(dsseSigner{pub: pub, keyID: tp})
	if err != nil {
		return nil, err
	}
	_, payload, err := ev.VerifyAndDecode(ctx, &env)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnvelope, err)
	}
	var st ita1.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatement, err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatement, err)
	}
	if st.GetPredicateType() != PredicateType {
		return nil, fmt.Errorf("%w: predicateType %q, want %q", ErrStatement, st.GetPredicateType(), PredicateType)
	}
	for _, name := range []string{SubjectRecord, SubjectTranscriptRoot} {
		if SubjectDigest(&st, name) == "" {
			return nil, fmt.Errorf("%w: no subject %s with a sha256 digest", ErrStatement, name)
		}
	}
	return &st, nil
}

// SubjectDigest returns the sha256 digest (lowercase hex) of the one subject
// named name, or "" when there is none or more than one.
func SubjectDigest(st *ita1.Statement, name string) string {
	found := ""
	for _, s := range st.GetSubject() {
		if s.GetName() != name {
			continue
		}
		if found != "" {
			return ""
		}
		found = strings.ToLower(s.GetDigest()["sha256"])
		if found == "" {
			return ""
		}
	}
	return found
}

// dsseSigner adapts a sign.Signer (signing) or an Ed25519 public key
// (verifying) to the dsse interfaces.
type dsseSigner struct {
	s     sign.Signer
	pub   ed25519.PublicKey
	keyID string
}

func (d dsseSigner) Sign(_ context.Context, pae []byte) ([]byte, error) {
	// Ed25519 is pure EdDSA over the message: the PAE bytes themselves.
	return d.s.SignRecordBytes(pae)
}

func (d dsseSigner) Verify(_ context.Context, pae, sig []byte) error {
	if len(d.pub) != ed25519.PublicKeySize || !ed25519.Verify(d.pub, pae, sig) {
		return errors.New("ed25519 signature does not verify")
	}
	return nil
}

func (d dsseSigner) KeyID() (string, error) { return d.keyID, nil }

func (d dsseSigner) Public() crypto.PublicKey {
	if d.s != nil {
		return d.s.Public()
	}
	return d.pub
}
