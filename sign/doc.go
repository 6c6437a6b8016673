// Package sign makes and checks the signed TRACE v0.2 Trust Record that
// seals a tracectl evidence bundle (spec/signing.md).
//
// What it guarantees:
//   - Keys are Ed25519 (default), ECDSA P-256 or ECDSA P-384, generated from
//     a caller-supplied random source, written as PKCS#8 or sigstore-encrypted
//     PEM (mode 0600, never overwriting) with a PKIX public key beside them,
//     and loaded from PEM files or sigstore KMS references (LoadKMS).
//   - Build fills every required record member, each default documented
//     (a software proxy: platform software-only, enforcement declared,
//     appraisal none), and refuses a record ParseRecord would refuse.
//   - Sign returns the exact record.json bytes: RFC 8785 (canon PolicyV02)
//     with signature = unpadded base64url of the signature over the RFC 8785
//     bytes of the record without signature. Ed25519 signs those bytes (pure
//     EdDSA); ECDSA signs their SHA-256 (P-256) or SHA-384 (P-384) digest,
//     encoded as JWS raw r||s.
//   - ParseRecord is bounded (MaxRecordBytes) and strict: duplicate names,
//     numbers outside the v0.2 integer boundary, unknown members outside
//     cnf.jwk and private JWK members are refused, and every shape problem
//     is reported with its JSON Pointer (*ShapeError). It accepts every
//     member the published v0.2 JSON Schema allows (the origin object,
//     appraisal.policy_ref/timestamp/provenance_depth_verified, the
//     provenance_depth enums) and the newer text's references and
//     reproducibility blocks, and applies the schema's origin rule
//     (ErrOriginPlatform). shapeTable is the shape as rows; spec/signing.md
//     prints it and a test keeps the two equal.
//   - VerifySignature checks the bytes as received (canonicalized without
//     their signature member), never a re-encoded struct; CheckTrust compares
//     RFC 7638 thumbprints with a key the caller trusts.
//   - The package never prints, exits, reads the clock or the environment,
//     or keeps state: time, randomness and passwords are inputs.
//
// Failures are sentinel errors (ErrSignatureInvalid, ErrCnfKeyMismatch, ...)
// matched with errors.Is; package verify maps each to a finding code.
//
// ExampleSign is a worked example: it builds, signs and verifies a record
// with an Ed25519 key from a fixed seed and prints the exact record.json.
package sign
