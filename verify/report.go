package verify

import (
	"errors"
	"fmt"
	"strings"
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
	CodeOriginPlatform         Code = "origin_platform_invalid" // a non-self origin with a runtime.platform other than software-only (spec 3.1.1 MUST)
	CodeSignatureMissing       Code = "signature_missing"
	CodeSignatureMalformed     Code = "signature_malformed" // not canonical unpadded base64url, or wrong length
	CodeSignatureInvalid       Code = "signature_invalid"
	CodeSignatureValid         Code = "signature_valid"     // pass finding
	CodeTrustedKeyMissing      Code = "trusted_key_missing" // no trusted key given: trust rests on the embedded key
	CodeCnfKeyMismatch         Code = "cnf_key_mismatch"    // trusted key thumbprint differs from cnf.jwk
	CodeTrustedKeyMatch        Code = "trusted_key_match"   // pass finding
	CodeRecordStale            Code = "record_stale"
	CodeRecordInFuture         Code = "record_in_future"
	CodeRecordFresh            Code = "record_fresh"     // pass finding: iat within the freshness window
	CodeMaxAgeDisabled         Code = "max_age_disabled" // info: the caller disabled the maximum age
)

// Bundle checks: the profile's section-6 distinctions each have their own code.
const (
	CodeTranscriptMalformed  Code = "transcript_malformed"      // a line is not canonical, well-formed or contiguous
	CodeBindingFailure       Code = "binding_failure"           // the transcript commitment is not the signed tool_transcript.hash, or a digest lies outside the signed boundary
	CodeCallCountMismatch    Code = "call_count_mismatch"       // call_count differs from the attempts recorded
	CodeEvidenceUnavailable  Code = "evidence_unavailable"      // bytes the evidence commits to are missing (never a pass, never a mismatch)
	CodeEvidenceMismatch     Code = "evidence_mismatch"         // bytes present but their digest or length differ, or a line's claim about them does
	CodeSnapshotMismatch     Code = "snapshot_mismatch"         // retained snapshot bytes differ from the signed commitment
	CodeSnapshotIncomplete   Code = "snapshot_incomplete"       // the snapshot an attempt used is an incomplete collection
	CodeToolNotDeclared      Code = "tool_not_declared"         // an attempt calls a tool its complete, current bound snapshot does not declare
	CodeResponseIDMismatch   Code = "response_id_mismatch"      // a response's JSON-RPC id is not its attempt's request id
	CodeSnapshotWrong        Code = "snapshot_wrong"            // an attempt is bound to a snapshot captured after its dispatch, or a reuse without its original capture and policy
	CodeValueUnsupported     Code = "value_unsupported"         // a value the canonicalization contract cannot represent
	CodeDuplicateKey         Code = "duplicate_key"             // an ambiguous object in committed evidence
	CodeIdentityConflict     Code = "identity_conflict"         // an attempt id reused for a different attempt
	CodeHistoryConflict      Code = "history_conflict"          // a retry link pointing forward or nowhere, or an outcome replaced
	CodeOutcomeUnknown       Code = "outcome_unknown"           // an attempt whose execution is unknown; a later retry does not change that
	CodeProducerObservation  Code = "producer_observation_only" // responses and server identity are the producer's observations, not server-authenticated
	CodeServerProofMissing   Code = "server_proof_missing"      // a claim of server authentication without its proof
	CodeInclusionProofFailed Code = "inclusion_proof_failed"
	CodePayloadRedacted      Code = "payload_redacted"  // info: payloads retained as redacted copies, with what they hide
	CodeWithheldAccepted     Code = "withheld_accepted" // info: payloads the declared policy withheld, accepted by the caller (Options.AcceptWithheld)
	CodePackMalformed        Code = "pack_malformed"    // the payload pack is not whole entries: the entries after the damage are not read
	CodePackUnreferenced     Code = "pack_unreferenced" // pack entries no line or manifest references: bytes no commitment covers
	CodeFileRefused          Code = "file_refused"      // a bundle file is a symbolic link, FIFO, device or other non-regular file: never read
	CodeLimitExceeded        Code = "limit_exceeded"    // unsupported: the transcript is beyond a configured limit (Limits), so it was not read to the end

	CodeFormatUnsupported  Code = "format_unsupported"    // unsupported: the transcript or a manifest names a format, policy or algorithm this verifier does not implement
	CodeTranscriptBound    Code = "transcript_bound"      // pass finding: the recomputed commitment equals tool_transcript.hash
	CodePayloadsVerified   Code = "payloads_verified"     // pass finding: every available payload matched its digest and length
	CodeSnapshotVerified   Code = "snapshot_verified"     // pass finding: a snapshot's manifest and pages match their commitments
	CodeHistoryConsistent  Code = "history_consistent"    // pass finding: identities unique, retry links backward, no outcome replaced
	CodeRetryLinked        Code = "retry_linked"          // info: an attempt is a retry of an earlier one; the earlier outcome is not changed by it
	CodeRecoveryRecorded   Code = "recovery_recorded"     // info: the producer recovered after a crash (and quarantined what it could not keep)
	CodeInclusionProofOK   Code = "inclusion_proof_valid" // pass finding: a line is included in the signed transcript
	CodeProofScopeLimited  Code = "proof_scope_limited"   // info: an inclusion proof shows some lines only; the rest of the transcript was not checked
	CodeOutcomeUndisclosed Code = "outcome_not_disclosed" // info: a disclosed attempt whose outcome lines the disclosure leaves out, with what the seal says of them
	// Behaviour the evidence shows (StatusWarning).
	CodeDeclarationChanged  Code = "declaration_changed"   // warning: a tool's declaration differs between two complete snapshots of the session
	CodeAnsweredAfterCancel Code = "answered_after_cancel" // warning: the server answered a call after the client cancelled it
	// Policy decisions (spec/policy.md).
	CodeDecisionMismatch     Code = "decision_mismatch"     // a recorded decision does not follow from the committed policy and lock, the request and the bound snapshot, or an outcome contradicts it
	CodeDecisionUnverifiable Code = "decision_unverifiable" // unavailable: the policy, lock, request or declaration bytes a decision was made on are withheld or missing
	CodeDecisionsVerified    Code = "decisions_verified"    // pass finding: every decision re-derived
	CodeApprovalMismatch     Code = "approval_mismatch"     // a call an approve rule governs went on without an approval of its exact arguments, or an approval contradicts its attempt's decision or outcome
)

// AllCodes returns every finding code, in the order spec/verification.md
// lists them. A test keeps the two in step.
func AllCodes() []Code {
	return []Code{
		CodeProfileUnsupported, CodeSchemaInvalid, CodeCanonicalizationFailed, CodeOriginPlatform,
		CodeSignatureMissing, CodeSignatureMalformed, CodeSignatureInvalid, CodeSignatureValid,
		CodeTrustedKeyMissing, CodeCnfKeyMismatch, CodeTrustedKeyMatch,
		CodeRecordStale, CodeRecordInFuture, CodeRecordFresh, CodeMaxAgeDisabled,

		CodePayloadRedacted, CodeWithheldAccepted, CodePackUnreferenced, CodePackMalformed, CodeFileRefused, CodeLimitExceeded,
		CodeFormatUnsupported, CodeTranscriptMalformed, CodeDuplicateKey, CodeValueUnsupported,
		CodeBindingFailure, CodeTranscriptBound, CodeCallCountMismatch,
		CodeIdentityConflict, CodeHistoryConflict, CodeHistoryConsistent, CodeRetryLinked,
		CodeSnapshotMismatch, CodeSnapshotIncomplete, CodeSnapshotWrong, CodeSnapshotVerified, CodeToolNotDeclared, CodeDeclarationChanged,
		CodeEvidenceUnavailable, CodeEvidenceMismatch, CodeResponseIDMismatch, CodePayloadsVerified,
		CodeOutcomeUnknown, CodeAnsweredAfterCancel, CodeProducerObservation, CodeServerProofMissing, CodeRecoveryRecorded,
		CodeInclusionProofFailed, CodeInclusionProofOK, CodeProofScopeLimited, CodeOutcomeUndisclosed,
		CodeFrameSequence, CodeFramesAccounted, CodeFramesRefused, CodeFrameMisrecorded, CodeClientGone, CodeResponseAfterSettlement, CodeServerFramesRefused,
		CodeCheckpointBound, CodeCheckpointInvalid, CodeTailUnsigned,
		CodeAnchorIncluded, CodeAnchorInvalid, CodeAnchorFork, CodeAnchorOrder, CodeAnchorMissing, CodeAnchorUnchecked,
		CodeDecisionMismatch, CodeDecisionUnverifiable, CodeDecisionsVerified, CodeApprovalMismatch,
	}
}

// Check names the check a finding belongs to: one of Checks(). The text
// report groups findings by check, in that order.
type Check string

const (
	checkRecord     Check = "record"     // profile, shape, canonicalization of the Trust Record
	checkSignature  Check = "signature"  // the embedded signature
	checkTrust      Check = "trust"      // the caller's trusted key against cnf.jwk
	checkFreshness  Check = "freshness"  // iat against the reference time
	checkTranscript Check = "transcript" // lines, commitment, call count
	checkIdentity   Check = "identity"   // attempt identities, retry links, outcome history
	checkSnapshot   Check = "snapshot"   // declaration snapshots bound by attempts
	checkPayload    Check = "payload"    // request, response and other committed payload bytes
	checkOutcome    Check = "outcome"    // what the outcomes and observations do and do not prove
	checkProof      Check = "proof"      // inclusion proofs
	checkPolicy     Check = "policy"     // policy decisions re-derived (policy.go)
)

// Checks returns every check in report order.
func Checks() []Check {
	return []Check{checkRecord, checkSignature, checkTrust, checkFreshness, checkTranscript,
		checkIdentity, checkSnapshot, checkPayload, checkOutcome, checkPolicy, checkProof, checkAnchor}
}

// Status of a finding.
type Status string

const (
	StatusPass        Status = "pass"
	StatusFail        Status = "fail"
	StatusUnavailable Status = "unavailable" // evidence missing
	StatusUnsupported Status = "unsupported" // evidence cannot be evaluated under the contract
	StatusInfo        Status = "info"        // a limit of what the evidence proves
	// StatusWarning: what the evidence shows about the agent or the
	// server deserves attention (a call to an undeclared tool, a
	// declaration that changed mid-session, a server that answered a
	// cancelled call). The evidence itself is sound: a warning never
	// changes the verdict; Report.Warnings counts them.
	StatusWarning Status = "warning"
)

// Finding is one result of one check.
type Finding struct {
	Code    Code   `json:"code"`
	Check   Check  `json:"check"`
	Status  Status `json:"status"`
	Subject string `json:"subject,omitempty"` // attempt id, snapshot id, line seq or JSON Pointer
	Detail  string `json:"detail,omitempty"`
}

// Counts are recomputed from the transcript. Call counts count attempts,
// including failed and unknown ones; they are not counts of completed
// business operations.
type Counts struct {
	Lines             int64 `json:"lines"`
	Attempts          int64 `json:"attempts"`
	Responses         int64 `json:"responses"`
	TransportFailures int64 `json:"transport_failures"`
	Unknown           int64 `json:"unknown"`
	Denied            int64 `json:"denied,omitempty"` // attempts denied by the policy or lock, never forwarded
	Snapshots         int64 `json:"snapshots"`
	Payloads          int64 `json:"payloads"` // payload commitments whose bytes were present and checked
}

// Kinds of input a Report describes.
const (
	kindBundle = "bundle" // a bundle directory: record, transcript, blobs
	kindRecord = "record" // a Trust Record alone
	kindProof  = "proof"  // a Trust Record and an inclusion proof
	// kindDisclosure: a disclosed bundle (tracectl disclose): the record,
	// an inclusion proof of some lines, and those lines' payloads.
	kindDisclosure = "disclosure"
)

// Trust bases.
const (
	TrustKey      = "trusted_key"       // cnf.jwk matched the caller's trusted key
	TrustEmbedded = "embedded_key_only" // the caller allowed the embedded key: internal consistency only
	TrustNone     = "none"              // no trust established (the signature or the key did not check)
)

// Report is the result of Verify.
type Report struct {
	MediaType     string    `json:"media_type"`
	Kind          string    `json:"kind"` // bundle | record | proof | disclosure
	Verdict       Verdict   `json:"verdict"`
	ReferenceTime time.Time `json:"reference_time"`
	TrustBasis    string    `json:"trust_basis"` // trusted_key | embedded_key_only | none
	// Profile is the record's eat_profile when it has a string one, and
	// AcceptedProfiles the set this verification accepted (TRACE's
	// verifier-compatibility rule: both are reported).
	Profile          string   `json:"profile,omitempty"`
	AcceptedProfiles []string `json:"accepted_profiles"`
	Signer           string   `json:"signer_thumbprint,omitempty"` // RFC 7638 thumbprint of cnf.jwk, when the record has one
	Root             string   `json:"transcript_root,omitempty"`   // the recomputed commitment, when a transcript was read
	Counts           Counts   `json:"counts"`
	// Warnings counts findings of StatusWarning (listed or omitted): the
	// verdict line says "verified (bundle, 2 warnings)".
	Warnings int64     `json:"warnings"`
	Findings []Finding `json:"findings"`
	// Omitted counts findings left out of Findings per code once a code
	// reached MaxFindingsPerCode; the verdict accounts for all of them.
	Omitted map[Code]int64 `json:"omitted,omitempty"`

	worst   Status       // the most severe status seen, including omitted findings
	perCode map[Code]int // findings listed per code
}

// MaxFindingsPerCode bounds the report: a transcript of a million unknown
// outcomes yields a report of bounded size, with the rest counted in Omitted.
const maxFindingsPerCode = 1000

// Find returns the findings with the given code.
func (r *Report) Find(c Code) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Code == c {
			out = append(out, f)
		}
	}
	return out
}

// Has reports whether some finding (listed or omitted) has the given code.
func (r *Report) Has(c Code) bool { return len(r.Find(c)) > 0 || r.Omitted[c] > 0 }

// Failures returns the codes of failing findings, in first-seen order,
// each once.
func (r *Report) Failures() []Code {
	var out []Code
	seen := map[Code]bool{}
	for _, f := range r.Findings {
		if f.Status == StatusFail && !seen[f.Code] {
			seen[f.Code] = true
			out = append(out, f.Code)
		}
	}
	return out
}

func newReport(kind string, at time.Time) *Report {
	return &Report{MediaType: MediaType, Kind: kind, ReferenceTime: at.UTC(), TrustBasis: TrustNone, Findings: []Finding{}}
}

// severity orders statuses for the verdict.
func severity(s Status) int {
	switch s {
	case StatusFail:
		return 3
	case StatusUnavailable, StatusUnsupported:
		return 2
	case StatusInfo, StatusPass, StatusWarning:
		return 1
	}
	return 0
}

// add records a finding. Detail text is bounded: it may quote evidence.
func (r *Report) add(code Code, check Check, st Status, subject, detail string) {
	if severity(st) > severity(r.worst) {
		r.worst = st
	}
	if st == StatusWarning {
		r.Warnings++
	}
	if r.perCode == nil {
		r.perCode = map[Code]int{}
	}
	if r.perCode[code] >= maxFindingsPerCode {
		if r.Omitted == nil {
			r.Omitted = map[Code]int64{}
		}
		r.Omitted[code]++
		return
	}
	r.perCode[code]++
	r.Findings = append(r.Findings, Finding{Code: code, Check: check, Status: st, Subject: bound(subject), Detail: bound(detail)})
}

// omit counts n findings of code that are not listed (the caller knows
// they are past MaxFindingsPerCode), as add would.
func (r *Report) omit(code Code, st Status, n int64) {
	if n <= 0 {
		return
	}
	if severity(st) > severity(r.worst) {
		r.worst = st
	}
	if st == StatusWarning {
		r.Warnings += n
	}
	if r.Omitted == nil {
		r.Omitted = map[Code]int64{}
	}
	r.Omitted[code] += n
}

// finish decides the verdict from every finding recorded.
func (r *Report) finish() {
	switch {
	case r.worst == StatusFail:
		r.Verdict = Failed
	case r.worst == StatusUnavailable || r.worst == StatusUnsupported || r.TrustBasis != TrustKey:
		r.Verdict = Incomplete
	default:
		r.Verdict = Verified
	}
}

// maxText bounds subjects and details copied from evidence.
const maxText = 512

func bound(s string) string {
	if len(s) <= maxText {
		return s
	}
	return strings.ToValidUTF8(s[:maxText], "") + "..."
}

// Sentinels matched by the error Verify returns with a Report whose verdict
// is not Verified: errors.Is(err, ErrFailed).
var (
	ErrFailed     = errors.New("verification failed")
	ErrIncomplete = errors.New("verification incomplete")
)

// VerdictError is the error returned with a Report whose verdict is not
// Verified. Callers that only check err fail safe; callers that want the
// findings use errors.As.
type VerdictError struct {
	Report *Report
}

func (e *VerdictError) Error() string {
	var b strings.Builder
	if e.Report.Verdict == Failed {
		b.WriteString(ErrFailed.Error())
		if codes := e.Report.Failures(); len(codes) > 0 {
			b.WriteString(": ")
			for i, c := range codes {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(string(c))
			}
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s: ", ErrIncomplete)
	seen := map[Code]bool{}
	for _, f := range e.Report.Findings {
		if (f.Status == StatusUnavailable || f.Status == StatusUnsupported) && !seen[f.Code] {
			if len(seen) > 0 {
				b.WriteString(", ")
			}
			seen[f.Code] = true
			b.WriteString(string(f.Code))
		}
	}
	if len(seen) == 0 {
		b.WriteString("trust rests on the embedded key only")
	}
	return b.String()
}

// Is matches ErrFailed or ErrIncomplete by the verdict.
func (e *VerdictError) Is(target error) bool {
	return (target == ErrFailed && e.Report.Verdict == Failed) ||
		(target == ErrIncomplete && e.Report.Verdict == Incomplete)
}

// result returns r with the error the package contract asks for.
func result(r *Report) (*Report, error) {
	r.finish()
	if r.Verdict != Verified {
		return r, &VerdictError{Report: r}
	}
	return r, nil
}
