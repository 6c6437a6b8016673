package verify

import (
	"crypto"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tracectl/tracectl/sign"
)

// Freshness defaults of TRACE v0.2 (spec/verification.md, "Freshness").
const (
	defaultMaxAge     = 24 * time.Hour
	defaultFutureSkew = 5 * time.Minute
)

// Options configure a verification. The zero value is not usable: a
// reference time is always required, and the caller must either give a
// trusted key or explicitly accept the embedded one. Options are validated
// together before any evidence is read.
type Options struct {
	// TrustedKey is the signer's public key as the caller trusts it
	// (Ed25519, ECDSA P-256 or P-384). Its RFC 7638 thumbprint must equal
	// cnf.jwk's for the verdict to be Verified.
	TrustedKey crypto.PublicKey

	// AllowEmbeddedKey verifies the signature with the record's own cnf.jwk
	// when no TrustedKey is given. That proves internal consistency only:
	// the report carries trusted_key_missing and the verdict is at best
	// Incomplete. It cannot be combined with TrustedKey.
	AllowEmbeddedKey bool

	// At is the reference time for freshness. Required: a library never
	// reads the clock (the CLI passes the current time unless --at is set).
	At time.Time

	// AtIssued takes the record's own iat as the reference time: an auditor
	// checking an archived bundle asks "was it sound when it was issued?".
	// Freshness then judges nothing (record_fresh says so) and the report's
	// reference time is the iat. It cannot be combined with At.
	AtIssued bool

	// MaxAge is the largest accepted age of the record's iat at At; zero
	// means 24 hours (defaultMaxAge).
	MaxAge time.Duration

	// AllowAnyAge disables the maximum age (an auditor checking an archive
	// may prefer an explicit At instead). The report says so with
	// max_age_disabled. It cannot be combined with a MaxAge.
	AllowAnyAge bool

	// FutureSkew is how far iat may lie after At; zero means
	// 5 minutes (defaultFutureSkew).
	FutureSkew time.Duration

	// AcceptProfiles is the set of eat_profile values accepted (TRACE's
	// verifier-compatibility rule); nil means sign.Profile alone. A record
	// whose profile is outside it is profile_unsupported; so is one inside
	// it whose shape this verifier does not implement (it implements
	// sign.Profile only). An empty non-nil set is refused.
	AcceptProfiles []string

	// AcceptWithheld accepts payloads the producer's declared policy
	// withheld (digest-only retention, or longer than the header's frame
	// limit): their digests and lengths are what is verified, and the
	// verdict can be Verified, with a withheld_accepted finding stating that
	// scope. Without it such payloads keep the verdict Incomplete, as the
	// profile requires for bytes that are not available. Payloads missing
	// against the declared policy are never accepted.
	AcceptWithheld bool

	// LogKey is the transparency log's C2SP signed-note verifier key (the
	// text of tracectl log serve's log.pub). With it, anchors/ is checked
	// and every signed statement needs a valid receipt (anchor_missing
	// otherwise); without it, receipts are reported present and unchecked
	// (spec/anchoring.md).
	LogKey string
	// WitnessKeys are witness verifier keys (C2SP tlog-cosignature); at
	// least WitnessThreshold of them must have cosigned each receipt's
	// checkpoint. Both need LogKey.
	WitnessKeys      []string
	WitnessThreshold int
	// RekorRoot is a sigstore TrustedRoot (JSON). With it, a Rekor v2 entry
	// of the sealed record (anchors/rekor/record.json) is checked offline
	// against the Rekor logs it names, and a sealed record without one is
	// anchor_missing; without it, Rekor entries are reported present and
	// unchecked (spec/anchoring.md, "Rekor v2").
	RekorRoot []byte

	// Limits bound what is read; zero members take their defaults.
	Limits Limits

	// Progress, when set, is called with the number of transcript lines
	// read so far, every ProgressEvery lines and once at the end. It must
	// be cheap; the CLI uses it to show progress on a terminal.
	Progress func(lines int64)
}

// Limits bound the input a verification reads, so no bundle makes it run
// without end. Beyond a limit the rest is not read and the report says so
// (limit_exceeded, unsupported): the verdict is at best incomplete, never
// verified on evidence not read.
type Limits struct {
	// MaxTranscriptBytes bounds transcript.jsonl; zero means
	// DefaultMaxTranscriptBytes.
	MaxTranscriptBytes int64
	// MaxTranscriptLines bounds its lines; zero means
	// DefaultMaxTranscriptLines. At most 2^32-1 (the attempt table's line
	// indexes are 32-bit).
	MaxTranscriptLines int64
	// MaxPayloadBytes bounds the committed length of a payload the
	// verifier reads and hashes; a longer one is limit_exceeded, not read
	// (a sparse file can claim terabytes). Zero means
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int64
	// MaxPackEntries bounds the entries of the payload pack the verifier
	// indexes (16 bytes of memory each); beyond it the rest of the pack is
	// not indexed (limit_exceeded), and payloads there are not read. Zero
	// means DefaultMaxPackEntries.
	MaxPackEntries int64
}

// Default limits. A line is at most transcript.MaxLineBytes (64 KiB) and a
// million-call session is about 3 million lines of a few hundred bytes, so
// the defaults admit sessions two orders of magnitude larger than any
// measured, while a transcript that never ends (a device, a file still
// being written) stops within minutes rather than never. The record,
// manifests, pages and proofs have their own fixed limits
// (sign.MaxRecordBytes, snapshot.MaxManifestBytes,
// snapshot.CeilingMaxPageBytes, transcript.MaxProofBytes); payloads are
// read up to their committed length plus one byte.
const (
	DefaultMaxTranscriptBytes = 64 << 30
	DefaultMaxTranscriptLines = 256 << 20
	// DefaultMaxPayloadBytes: 64 times wrap's default frame limit (16 MiB);
	// a producer retains no frame longer than its limit.
	DefaultMaxPayloadBytes = 1 << 30
	// DefaultMaxPackEntries: 16 Mi entries, a 256 MiB index at most;
	// about four payloads per call of a four-million-call session.
	DefaultMaxPackEntries = 16 << 20
)

// ProgressEvery is how many transcript lines pass between Progress calls.
const progressEvery = 4096

// ErrOptions is wrapped by every Options validation error.
var ErrOptions = errors.New("invalid verify options")

// validate checks the options together and returns them with defaults
// filled in.
func (o Options) validate() (Options, error) {
	var errs []error
	switch {
	case o.AtIssued && !o.At.IsZero():
		errs = append(errs, errors.New("options At and AtIssued exclude each other"))
	case o.At.IsZero() && !o.AtIssued:
		errs = append(errs, errors.New("a reference time (At, or AtIssued) is required"))
	}
	switch {
	case o.TrustedKey != nil && o.AllowEmbeddedKey:
		errs = append(errs, errors.New("TrustedKey and AllowEmbeddedKey exclude each other"))
	case o.TrustedKey == nil && !o.AllowEmbeddedKey:
		errs = append(errs, errors.New("a trusted key is required (or AllowEmbeddedKey, which proves internal consistency only)"))
	case o.TrustedKey != nil:
		if _, err := sign.Thumbprint(o.TrustedKey); err != nil {
			errs = append(errs, fmt.Errorf("trusted key: %w", err))
		}
	}
	if o.AcceptProfiles != nil && len(o.AcceptProfiles) == 0 {
		errs = append(errs, errors.New("the accepted profile set is empty: a verifier accepts at least one profile"))
	}
	for _, p := range o.AcceptProfiles {
		if p == "" {
			errs = append(errs, errors.New("an accepted profile is the empty string"))
		}
	}
	if o.Limits.MaxTranscriptBytes < 0 || o.Limits.MaxTranscriptLines < 0 || o.Limits.MaxPayloadBytes < 0 || o.Limits.MaxPackEntries < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if o.Limits.MaxTranscriptLines > 1<<32-1 {
		errs = append(errs, errors.New("Limits.MaxTranscriptLines is at most 2^32-1"))
	}
	if o.MaxAge < 0 || o.FutureSkew < 0 {
		errs = append(errs, errors.New("MaxAge and FutureSkew must not be negative"))
	}
	if o.AllowAnyAge && o.MaxAge != 0 {
		errs = append(errs, errors.New("MaxAge and AllowAnyAge exclude each other"))
	}
	if len(errs) > 0 {
		return o, fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
	}
	if o.MaxAge == 0 {
		o.MaxAge = defaultMaxAge
	}
	if o.FutureSkew == 0 {
		o.FutureSkew = defaultFutureSkew
	}
	if o.AcceptProfiles == nil {
		o.AcceptProfiles = []string{sign.Profile}
	} else {
		o.AcceptProfiles = slices.Compact(slices.Sorted(slices.Values(o.AcceptProfiles)))
	}
	if o.Limits.MaxTranscriptBytes == 0 {
		o.Limits.MaxTranscriptBytes = DefaultMaxTranscriptBytes
	}
	if o.Limits.MaxTranscriptLines == 0 {
		o.Limits.MaxTranscriptLines = DefaultMaxTranscriptLines
	}
	if o.Limits.MaxPackEntries == 0 {
		o.Limits.MaxPackEntries = DefaultMaxPackEntries
	}
	if o.Limits.MaxPayloadBytes == 0 {
		o.Limits.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return o, nil
}
