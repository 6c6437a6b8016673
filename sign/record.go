package sign

import (
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/tracectl/tracectl/canon"
)

// Profile is the only eat_profile TRACE v0.2 defines and tracectl accepts.
const Profile = "tag:agentrust-io.com,2026:trace-v0.2"

// runtime.platform values (TRACE v0.2).
const (
	platformSoftwareOnly = "software-only" // tracectl's default: no hardware root of trust
)

var platforms = []string{
	"intel-tdx", "amd-sev-snp", "azure-cvm-sev-snp", "nvidia-h100", "nvidia-blackwell",
	"aws-nitro", "arm-cca", "google-confidential-space", "tpm2", platformSoftwareOnly,
}

// policy.enforcement_mode values (TRACE v0.2).
const (
	enforcementEnforce  = "enforce"
	enforcementAdvisory = "advisory"
	enforcementSilent   = "silent"
	enforcementDeclared = "declared" // tracectl's default: it records, it enforces nothing
)

// appraisal.status values (TRACE v0.2).
const (
	appraisalAffirming       = "affirming"
	appraisalWarning         = "warning"
	appraisalContraindicated = "contraindicated"
	appraisalNone            = "none" // tracectl's default: nobody appraised the runtime
)

// Defaults for a software proxy; spec/signing.md gives the reason for each.
const (
	defaultSubject       = "spiffe://localhost/tracectl/unidentified-agent"
	defaultModelProvider = "unknown"
	defaultModelID       = "unknown"
	defaultDataClass     = "internal"
	defaultVerifier      = "https://github.com/tracectl/tracectl"
	// emptyPolicyHash is the SHA-256 of zero bytes: the policy bundle of a
	// recorder that enforces no policy.
	emptyPolicyHash = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Record is a TRACE v0.2 Trust Record. Optional members are pointers or
// omitted when empty, so a parsed record re-encodes to its own canonical
// bytes (members whose empty value the shape refuses, like URIs and
// digests, are plain strings).
type Record struct {
	EATProfile      string           `json:"eat_profile"`
	IAT             int64            `json:"iat"`
	Subject         string           `json:"subject"`
	Model           Model            `json:"model"`
	Runtime         Runtime          `json:"runtime"`
	Policy          Policy           `json:"policy"`
	DataClass       string           `json:"data_class"`
	BuildProvenance BuildProvenance  `json:"build_provenance"`
	Appraisal       Appraisal        `json:"appraisal"`
	Cnf             Cnf              `json:"cnf"`
	ToolTranscript  *ToolTranscript  `json:"tool_transcript,omitempty"`
	Delegation      *Delegation      `json:"delegation,omitempty"`
	Origin          *Origin          `json:"origin,omitempty"`
	Transparency    string           `json:"transparency,omitempty"`
	References      *[]Reference     `json:"references,omitempty"`
	Reproducibility *Reproducibility `json:"reproducibility,omitempty"`
	Signature       string           `json:"signature,omitempty"`
}

// Origin says who produced the record's claims (TRACE v0.2 spec 3.1.1):
// the runtime itself, a third-party control plane, or an import of logs.
// A non-self origin requires runtime.platform software-only
// (ErrOriginPlatform): nobody attests a runtime from outside it.
type Origin struct {
	Kind          string `json:"kind"`
	Producer      string `json:"producer"`
	SourceEventID string `json:"source_event_id,omitempty"`
	IngestedAt    *int64 `json:"ingested_at,omitempty"`
}

// Reference links the record to other evidence (newer v0.2 spec text).
type Reference struct {
	Rel       string `json:"rel"`
	ID        string `json:"id"`
	Resolver  string `json:"resolver"`
	Retention string `json:"retention,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

// Reproducibility names what a re-execution needs (newer v0.2 spec text).
type Reproducibility struct {
	Function         string       `json:"function"`
	CodeIdentity     string       `json:"code_identity"`
	CodeResolver     string       `json:"code_resolver,omitempty"`
	InputClosure     []InputEntry `json:"input_closure"`
	TranscriptDigest string       `json:"transcript_digest"`
}

// InputEntry is one input of a reproducibility closure.
type InputEntry struct {
	ID       string `json:"id"`
	Digest   string `json:"digest"`
	Resolver string `json:"resolver"`
}

// Model names the AI model the record is about.
type Model struct {
	Provider      string  `json:"provider"`
	ModelID       string  `json:"model_id"`
	Version       *string `json:"version,omitempty"`
	WeightsDigest string  `json:"weights_digest,omitempty"`
	AIBOMURI      string  `json:"aibom_uri,omitempty"`
}

// Runtime describes where the producer ran.
type Runtime struct {
	Platform        string  `json:"platform"`
	Measurement     string  `json:"measurement"`
	RIMURI          string  `json:"rim_uri,omitempty"`
	Nonce           string  `json:"nonce,omitempty"`
	FirmwareVersion *string `json:"firmware_version,omitempty"`
}

// Policy names the policy bundle and how it was applied.
type Policy struct {
	BundleHash      string  `json:"bundle_hash"`
	EnforcementMode string  `json:"enforcement_mode"`
	Version         *string `json:"version,omitempty"`
	PolicyURI       string  `json:"policy_uri,omitempty"`
}

// BuildProvenance describes the producer's build.
type BuildProvenance struct {
	SLSALevel       int64   `json:"slsa_level"`
	Digest          string  `json:"digest"`
	Builder         *string `json:"builder,omitempty"`
	ProvenanceURI   string  `json:"provenance_uri,omitempty"`
	ProvenanceDepth string  `json:"provenance_depth,omitempty"` // surface | builder | transitive
}

// Appraisal is a verifier's judgement of the runtime evidence.
type Appraisal struct {
	Status                  string `json:"status"`
	Verifier                string `json:"verifier"`
	PolicyRef               string `json:"policy_ref,omitempty"`
	Timestamp               *int64 `json:"timestamp,omitempty"`
	ProvenanceDepthVerified string `json:"provenance_depth_verified,omitempty"` // surface | builder | transitive
}

// Cnf holds the signer's public key (RFC 7800 confirmation).
type Cnf struct {
	JWK JWK `json:"jwk"`
}

// ToolTranscript commits to the tool-call transcript. tracectl's hash is
// the transcript commitment (spec/transcript.md); call_count counts
// attempts, failed and unknown ones included.
type ToolTranscript struct {
	Hash          string `json:"hash"`
	CallCount     *int64 `json:"call_count,omitempty"`
	TranscriptURI string `json:"transcript_uri,omitempty"`
}

// Delegation links a record to the record it was delegated from.
type Delegation struct {
	ParentRecordHash string `json:"parent_record_hash"` // see ParentRecordHash
	CredentialID     string `json:"credential_id"`
}

// RecordOptions are the inputs of Build. Zero values take the documented
// defaults for a software proxy; the required fields have no honest
// default.
type RecordOptions struct {
	IssuedAt       time.Time        // required: iat, in whole Unix seconds (the clock is the caller's)
	Key            crypto.PublicKey // required: cnf.jwk, the key that will sign
	Digest         string           // required: build_provenance.digest (tracectl's CLI: SHA-256 of its executable)
	TranscriptHash string           // required: tool_transcript.hash
	CallCount      int64            // tool_transcript.call_count (always written, 0 included)
	TranscriptURI  string           // tool_transcript.transcript_uri, omitted when empty

	Measurement       string      // runtime.measurement; default Digest
	Platform          string      // runtime.platform; default "software-only"
	Nonce             string      // runtime.nonce (base64url), omitted when empty
	Subject           string      // default "spiffe://localhost/tracectl/unidentified-agent"
	ModelProvider     string      // model.provider; default "unknown"
	ModelID           string      // model.model_id; default "unknown"
	DataClass         string      // default "internal"
	SLSALevel         int64       // build_provenance.slsa_level; default 0
	PolicyBundleHash  string      // policy.bundle_hash; default the SHA-256 of zero bytes
	EnforcementMode   string      // policy.enforcement_mode; default "declared"
	AppraisalStatus   string      // default "none"
	AppraisalVerifier string      // default "https://github.com/tracectl/tracectl"
	Delegation        *Delegation // omitted when nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Build assembles an unsigned record from o and checks it against the same
// shape ParseRecord enforces: a record Build returns always parses. Shape
// failures are a *ShapeError with pointers into the record.
func Build(o RecordOptions) (*Record, error) {
	if o.IssuedAt.IsZero() {
		return nil, errors.New("build record: IssuedAt is required")
	}
	if o.Key == nil {
		return nil, errors.New("build record: Key is required")
	}
	jwk, err := jwkFromPublicKey(o.Key)
	if err != nil {
		return nil, fmt.Errorf("build record: %w", err)
	}
	if o.CallCount < 0 {
		return nil, fmt.Errorf("build record: CallCount %d is negative", o.CallCount)
	}
	calls := o.CallCount
	rec := &Record{
		EATProfile: Profile,
		IAT:        o.IssuedAt.Unix(),
		Subject:    or(o.Subject, defaultSubject),
		Model:      Model{Provider: or(o.ModelProvider, defaultModelProvider), ModelID: or(o.ModelID, defaultModelID)},
		Runtime: Runtime{
			Platform:    or(o.Platform, platformSoftwareOnly),
			Measurement: or(o.Measurement, o.Digest),
			Nonce:       o.Nonce,
		},
		Policy:          Policy{BundleHash: or(o.PolicyBundleHash, emptyPolicyHash), EnforcementMode: or(o.EnforcementMode, enforcementDeclared)},
		DataClass:       or(o.DataClass, defaultDataClass),
		BuildProvenance: BuildProvenance{SLSALevel: o.SLSALevel, Digest: o.Digest},
		Appraisal:       Appraisal{Status: or(o.AppraisalStatus, appraisalNone), Verifier: or(o.AppraisalVerifier, defaultVerifier)},
		Cnf:             Cnf{JWK: jwk},
		ToolTranscript:  &ToolTranscript{Hash: o.TranscriptHash, CallCount: &calls, TranscriptURI: o.TranscriptURI},
		Delegation:      o.Delegation,
	}
	if _, err := rec.check(); err != nil {
		return nil, fmt.Errorf("build record: %w", err)
	}
	return rec, nil
}

// check encodes the record without its signature and applies ParseRecord's
// checks to the bytes, returning them: the signature preimage.
func (r *Record) check() ([]byte, error) {
	u := *r
	u.Signature = ""
	b, err := canon.Marshal(&u)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	if _, err := checkRecord(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Sign returns the exact bytes of record.json: the RFC 8785 (JCS, canon
// PolicyV02) encoding of rec with signature set to the unpadded base64url
// of s's signature over the JCS bytes of rec without its signature member
// (any signature rec carries is replaced). rec.Cnf.JWK must be s's key,
// else ErrCnfKeyMismatch; rec must have the v0.2 shape. rec is not changed.
func Sign(rec *Record, s Signer) ([]byte, error) {
	if rec == nil || s == nil {
		return nil, errors.New("sign record: nil record or signer")
	}
	want, err := Thumbprint(s.Public())
	if err != nil {
		return nil, fmt.Errorf("sign record: signer: %w", err)
	}
	got, err := rec.Cnf.JWK.Thumbprint()
	if err != nil {
		return nil, fmt.Errorf("sign record: cnf.jwk: %w", err)
	}
	if got != want {
		return nil, fmt.Errorf("sign record: %w: cnf.jwk %s, signer %s", ErrCnfKeyMismatch, got, want)
	}
	pre, err := rec.check()
	if err != nil {
		return nil, fmt.Errorf("sign record: %w", err)
	}
	sig, err := s.SignRecordBytes(pre)
	if err != nil {
		return nil, fmt.Errorf("sign record: %w", err)
	}
	if len(sig) != s.Alg().sigSize() {
		return nil, fmt.Errorf("sign record: %s signer returned %d bytes, want %d", s.Alg(), len(sig), s.Alg().sigSize())
	}
	u := *rec
	u.Signature = base64.RawURLEncoding.EncodeToString(sig)
	out, err := canon.Marshal(&u)
	if err != nil {
		return nil, fmt.Errorf("sign record: encode: %w", err)
	}
	return out, nil
}
