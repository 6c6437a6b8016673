package verify

import (
	"time"
)

// Verdict is the outcome of a verification.
type Verdict string

const (
	// Verified: every check ran on available evidence and passed, and the
	// record is trusted through a caller-supplied key.
	Verified Verdict = "verified"
	// Failed: some evidence contradicts the record or itself.
	Failed Verdict = "failed"
	// Incomplete: nothing contradicts, but some evidence is unavailable or
	// unsupported, or trust rests on the embedded key only.
	Incomplete Verdict = "incomplete"
)

// MediaType is the versioned media type of the JSON report.
const MediaType = "application/vnd.tracectl.verify-report.v1+json"

// Code is a stable finding code (spec/verification.md). Codes are never
// renamed; names shared with the TRACE ecosystem's verifiers keep their
// meaning.
type Code string

// Record checks (names shared with the ecosystem where the meaning is the same).
const (
	CodeProfileUnsupported     Code = "profile_unsupported"     // eat_profile is not TRACE v0.2
	CodeSchemaInvalid          Code = "schema_invalid"          // a record member has the wrong shape
	CodeCanonicalizationFailed Code = "canonicalization_failed" // the record cannot be canonicalized under the v0.2 boundary
	CodeSignatureMissing       Code = "signature_missing"
	CodeSignatureMalformed     Code = "signature_malformed" // not canonical unpadded base64url, or wrong length
	CodeSignatureInvalid       Code = "signature_invalid"
	CodeSignatureValid         Code = "signature_valid"     // pass finding
	CodeTrustedKeyMissing      Code = "trusted_key_missing" // no trusted key given: trust rests on the embedded key
	CodeCnfKeyMismatch         Code = "cnf_key_mismatch"    // trusted key thumbprint differs from cnf.jwk
	CodeTrustedKeyMatch        Code = "trusted_key_match"   // pass finding
	CodeRecordStale            Code = "record_stale"
	CodeRecordInFuture         Code = "record_in_future"
)

// Bundle checks: the profile's section-6 distinctions each have their own code.
const (
	CodeTranscriptMalformed  Code = "transcript_malformed"      // a line is not canonical, well-formed or contiguous
	CodeBindingFailure       Code = "binding_failure"           // the transcript commitment is not the signed tool_transcript.hash, or a digest lies outside the signed boundary
	CodeCallCountMismatch    Code = "call_count_mismatch"       // call_count differs from the attempts recorded
	CodeEvidenceUnavailable  Code = "evidence_unavailable"      // bytes the evidence commits to are missing (never a pass, never a mismatch)
	CodeEvidenceMismatch     Code = "evidence_mismatch"         // bytes present but their digest or length differ
	CodeSnapshotMismatch     Code = "snapshot_mismatch"         // retained snapshot bytes differ from the signed commitment
	CodeSnapshotIncomplete   Code = "snapshot_incomplete"       // the snapshot an attempt used is an incomplete collection
	CodeSnapshotWrong        Code = "snapshot_wrong"            // an attempt is bound to a snapshot captured after its dispatch, or a reuse without its original capture and policy
	CodeValueUnsupported     Code = "value_unsupported"         // a value the canonicalization contract cannot represent
	CodeDuplicateKey         Code = "duplicate_key"             // an ambiguous object in committed evidence
	CodeIdentityConflict     Code = "identity_conflict"         // an attempt id reused for a different attempt
	CodeHistoryConflict      Code = "history_conflict"          // a retry link pointing forward or nowhere, or an outcome replaced
	CodeOutcomeUnknown       Code = "outcome_unknown"           // an attempt whose execution is unknown; a later retry does not change that
	CodeProducerObservation  Code = "producer_observation_only" // responses and server identity are the producer's observations, not server-authenticated
	CodeServerProofMissing   Code = "server_proof_missing"      // a claim of server authentication without its proof
	CodeInclusionProofFailed Code = "inclusion_proof_failed"
)

// Status of a finding.
type Status string

const (
	StatusPass        Status = "pass"
	StatusFail        Status = "fail"
	StatusUnavailable Status = "unavailable" // evidence missing
	StatusUnsupported Status = "unsupported" // evidence cannot be evaluated under the contract
	StatusInfo        Status = "info"        // a limit of what the evidence proves
)

// Finding is one result of one check.
type Finding struct {
	Code    Code   `json:"code"`
	Check   string `json:"check"` // record | signature | trust | freshness | transcript | snapshot | payload | identity | outcome | proof
	Status  Status `json:"status"`
	Subject string `json:"subject,omitempty"` // attempt id, snapshot id, line seq or JSON Pointer
	Detail  string `json:"detail,omitempty"`
}

// Counts are recomputed from the transcript. Call counts count attempts,
// including failed and unknown ones; they are not counts of completed
// business operations.
type Counts struct {
	Attempts          int64 `json:"attempts"`
	Responses         int64 `json:"responses"`
	TransportFailures int64 `json:"transport_failures"`
	Unknown           int64 `json:"unknown"`
}

// Report is the result of Verify.
type Report struct {
	MediaType     string    `json:"media_type"`
	Verdict       Verdict   `json:"verdict"`
	ReferenceTime time.Time `json:"reference_time"`
	TrustBasis    string    `json:"trust_basis"` // "trusted_key" | "embedded_key_only" | "none"
	Counts        Counts    `json:"counts"`
	Findings      []Finding `json:"findings"`
}
