package sign

import "errors"

// Sentinel errors. Callers distinguish failures with errors.Is; package
// verify maps each to its own finding code (spec/verification.md). Errors
// that carry data wrap these: *ShapeError is ErrSchemaInvalid, and a
// canonicalization failure also wraps the *canon.Error with its pointer.
var (
	// ErrMalformed: the record is not a bounded, well-formed JSON text
	// (too large, syntax, invalid UTF-8, trailing data, ...).
	ErrMalformed = errors.New("record malformed")
	// ErrProfileUnsupported: eat_profile is absent or is not Profile.
	ErrProfileUnsupported = errors.New("record profile unsupported")
	// ErrCanonicalization: the record is JSON but has no canonical form
	// under the TRACE v0.2 boundary (duplicate member names, a number that
	// is not an integer within ±(2^53-1), a lone surrogate).
	ErrCanonicalization = errors.New("record canonicalization failed")
	// ErrSchemaInvalid: the record does not have the v0.2 shape.
	ErrSchemaInvalid = errors.New("record schema invalid")
	// ErrOriginPlatform: origin.kind is third-party-control-plane or
	// log-import and runtime.platform is not software-only (the schema's
	// allOf rule, spec 3.1.1: a MUST).
	ErrOriginPlatform = errors.New("record origin requires a software-only platform")
	// ErrSignatureMissing: the record has no signature member.
	ErrSignatureMissing = errors.New("signature missing")
	// ErrSignatureMalformed: the signature is not canonical unpadded
	// base64url, or has the wrong length for the key's algorithm.
	ErrSignatureMalformed = errors.New("signature malformed")
	// ErrSignatureInvalid: the signature does not verify under cnf.jwk over
	// the record's canonical bytes without the signature member.
	ErrSignatureInvalid = errors.New("signature invalid")
	// ErrTrustedKeyMissing: a trust decision was asked for without a key.
	ErrTrustedKeyMissing = errors.New("trusted key missing")
	// ErrCnfKeyMismatch: the trusted key is not the key in cnf.jwk (their
	// RFC 7638 thumbprints differ).
	ErrCnfKeyMismatch = errors.New("cnf key mismatch")

	// ErrUnsupportedKey: a key of a type or curve tracectl does not sign
	// with (it signs with Ed25519, ECDSA P-256 and ECDSA P-384 only).
	ErrUnsupportedKey = errors.New("unsupported key")
	// ErrPasswordRequired: a key is (or is to be) encrypted and no
	// password was available, or the password was empty.
	ErrPasswordRequired = errors.New("password required")
	// ErrKeyDecrypt: an encrypted private key could not be decrypted (most
	// often a wrong password; the formats cannot tell).
	ErrKeyDecrypt = errors.New("cannot decrypt private key (wrong password?)")
)
