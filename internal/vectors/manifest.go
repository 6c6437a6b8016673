package vectors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/verify"
)

// Identifiers and file names of the vector format (spec/vectors.md).
const (
	// Format is the format id every vector.json names.
	Format = "tracectl.vector/v1"
	// ManifestFile is the manifest of one vector, inside its directory.
	ManifestFile = "vector.json"
	// TrustedKeyFile is the public key a bundle vector's verifier trusts
	// (PKIX PEM).
	TrustedKeyFile = "trusted-key.pem"
)

// Kinds of vector.
const (
	// KindBundle: the directory is an evidence bundle (record.json,
	// transcript.jsonl, payloads.pack) to verify with the manifest's options.
	KindBundle = "bundle"
	// KindCanon: the directory holds one JSON value to canonicalize under a
	// named policy.
	KindCanon = "canon"
)

// Cases: the column of the section-6 table a vector belongs to.
const (
	CasePositive = "positive" // the positive control
	CaseNegative = "negative" // the negative case the row names
	CaseBoundary = "boundary" // a boundary of the row's distinction
)

// Outcomes of a canon vector (the closed list for KindCanon; bundle
// vectors use verify's verdicts).
const (
	OutcomeCanonical   = "canonical"   // accepted; its canonical bytes are the expected file
	OutcomeRejected    = "rejected"    // not a value the contract accepts (duplicate_key, syntax, ...)
	OutcomeUnsupported = "unsupported" // valid JSON the policy cannot represent without coercion (unsupported_number)
)

// Limits of ParseManifest.
const (
	// MaxManifestBytes bounds vector.json. Real manifests are under 2 KiB.
	MaxManifestBytes = 16 << 10
	// MaxTextBytes bounds the prose of a manifest (checks).
	MaxTextBytes = 2048
	// maxNameBytes bounds ids and file names.
	maxNameBytes = 64
)

// Manifest is vector.json: what a vector checks and what a verifier must
// report for it.
type Manifest struct {
	Format  string         `json:"format"`
	ID      string         `json:"id"`
	Kind    string         `json:"kind"`
	Row     int64          `json:"row"`      // the section-6 row, 1..9
	RowName string         `json:"row_name"` // the row's required distinction
	Case    string         `json:"case"`     // positive | negative | boundary
	Checks  string         `json:"checks"`   // what the vector checks, in one paragraph
	Bundle  *BundleOptions `json:"verifier,omitempty"`
	Canon   *CanonOptions  `json:"canon,omitempty"`
	Expect  Expect         `json:"expect"`
}

// BundleOptions are the verifier options of a bundle vector.
type BundleOptions struct {
	At         string `json:"at"`          // the reference time, RFC 3339 UTC
	TrustedKey string `json:"trusted_key"` // a file of the vector: the signer's public key the verifier trusts
	// AcceptWithheld: the verifier accepts payloads the producer's declared
	// policy withheld (tracectl verify --accept-withheld).
	AcceptWithheld bool `json:"accept_withheld,omitempty"`
}

// CanonOptions name the input and the policy of a canon vector.
type CanonOptions struct {
	Input  string `json:"input"`  // a file of the vector: the exact bytes to canonicalize
	Policy string `json:"policy"` // a canon policy identifier
}

// Expect is what a verifier must report. Required codes must all appear
// among the reported codes; forbidden codes must not appear; other codes
// may. The verdict must be equal. Each list is sorted, without repeats,
// drawn from the kind's closed list (Codes), so its length is bounded.
type Expect struct {
	Verdict   string   `json:"verdict"`
	Required  []string `json:"required_codes"`
	Forbidden []string `json:"forbidden_codes"`
	// Canonical names the file holding the expected canonical bytes (canon
	// vectors with verdict canonical only).
	Canonical string `json:"canonical,omitempty"`
}

// ErrManifest is wrapped by every ParseManifest rejection; ErrTooLarge
// too when the input exceeds MaxManifestBytes.
var (
	ErrManifest = errors.New("invalid vector manifest")
	ErrTooLarge = errors.New("over the size limit")
)

// Rows are the section-6 rows: positive control, negative or boundary case,
// and the required distinction (the row name every manifest repeats).
var rows = [...][3]string{
	{"Retained complete snapshot matches the signed commitment", "Change an uncalled tool, output schema or extension", "Snapshot mismatch"},
	{"All result pages retained through termination", "Missing page, repeated cursor or collection limit reached", "Incomplete evidence"},
	{"Original cached capture and freshness policy retained", "Replace it with a post-call fetch", "Wrong snapshot"},
	{"Supported canonical values round-trip", "Duplicate keys or unsupported numeric value", "Reject or report unsupported; no coercion"},
	{"Trusted record and recomputed transcript/snapshot", "Move the digest outside the signed boundary", "Binding failure"},
	{"Available snapshot bytes match", "URI resolves to changed bytes or bytes are missing", "Mismatch or unavailable, separately"},
	{"Two attempts linked by an authenticated retry relation", "Reuse an attempt ID or replace the first outcome", "Identity/history conflict"},
	{"Timeout followed by successful retry", "Treat first attempt as proven non-execution", "Unknown remains unknown"},
	{"Producer records a server response", "Assert server authentication without its proof", "Producer observation only"},
}

// Row returns the section-6 row n (1..9): positive control, negative or
// boundary case, and required distinction.
func Row(n int64) (positive, negative, distinction string, ok bool) {
	if n < 1 || n > int64(len(rows)) {
		return "", "", "", false
	}
	r := rows[n-1]
	return r[0], r[1], r[2], true
}

// Verdicts returns the closed list of verdicts for a kind.
func Verdicts(kind string) []string {
	switch kind {
	case KindBundle:
		return []string{string(verify.Verified), string(verify.Failed), string(verify.Incomplete)}
	case KindCanon:
		return []string{OutcomeCanonical, OutcomeRejected, OutcomeUnsupported}
	}
	return nil
}

// Codes returns the closed list of codes for a kind: verify's finding codes
// for bundles, canon's error codes for canon vectors.
func Codes(kind string) []string {
	var out []string
	switch kind {
	case KindBundle:
		for _, c := range verify.AllCodes() {
			out = append(out, string(c))
		}
	case KindCanon:
		for _, c := range []canon.Code{canon.CodeSizeLimit, canon.CodeDepthLimit, canon.CodeSyntax, canon.CodeTrailingData,
			canon.CodeInvalidUTF8, canon.CodeLoneSurrogate, canon.CodeControlCharacter, canon.CodeInvalidEscape,
			canon.CodeInvalidNumber, canon.CodeDuplicateKey, canon.CodeUnsupportedNumber} {
			out = append(out, string(c))
		}
	}
	return out
}

// ParseManifest parses vector.json from its exact bytes. It is strict and
// bounded: at most MaxManifestBytes, the canonical form under canon's v0.2
// policy (so parse-then-encode gives the input back), no unknown members,
// and every value from its closed list (spec/vectors.md).
func ParseManifest(data []byte) (*Manifest, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrManifest}, a...)...)
	}
	if len(data) > MaxManifestBytes {
		return nil, bad("%w: %d bytes, limit %d", ErrTooLarge, len(data), MaxManifestBytes)
	}
	if err := canon.Check(data, canon.PolicyV02); err != nil {
		return nil, bad("%w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, bad("%w", err)
	}
	if err := m.validate(); err != nil {
		return nil, bad("%w", err)
	}
	back, err := m.Encode()
	if err != nil || !bytes.Equal(back, data) {
		return nil, bad("not the unique encoding of its content (an explicit empty, null or default member)")
	}
	return &m, nil
}

// Encode returns the manifest's canonical bytes after validating it.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	return canon.Marshal(m)
}

func (m *Manifest) validate() error {
	if m.Format != Format {
		return fmt.Errorf("format %q, want %q", m.Format, Format)
	}
	if !isName(m.ID, false) {
		return fmt.Errorf("id %q: want 1..%d of [a-z0-9-]", m.ID, maxNameBytes)
	}
	_, _, distinction, ok := Row(m.Row)
	if !ok {
		return fmt.Errorf("row %d: want 1..%d", m.Row, len(rows))
	}
	if m.RowName != distinction {
		return fmt.Errorf("row_name %q: row %d is %q", m.RowName, m.Row, distinction)
	}
	if !slices.Contains([]string{CasePositive, CaseNegative, CaseBoundary}, m.Case) {
		return fmt.Errorf("case %q: want positive, negative or boundary", m.Case)
	}
	if m.Checks == "" || len(m.Checks) > MaxTextBytes {
		return fmt.Errorf("checks: want 1..%d bytes", MaxTextBytes)
	}
	switch m.Kind {
	case KindBundle:
		if m.Bundle == nil || m.Canon != nil {
			return errors.New("a bundle vector has verifier options and no canon options")
		}
		at, err := time.Parse(time.RFC3339, m.Bundle.At)
		if err != nil || at.Location() != time.UTC || at.Format(time.RFC3339) != m.Bundle.At {
			return fmt.Errorf("verifier.at %q: want RFC 3339 UTC seconds (2026-07-01T12:00:00Z)", m.Bundle.At)
		}
		if !isName(m.Bundle.TrustedKey, true) {
			return fmt.Errorf("verifier.trusted_key %q: want a file name of the vector", m.Bundle.TrustedKey)
		}
		if m.Expect.Canonical != "" {
			return errors.New("expect.canonical is for canon vectors")
		}
	case KindCanon:
		if m.Canon == nil || m.Bundle != nil {
			return errors.New("a canon vector has canon options and no verifier options")
		}
		if !isName(m.Canon.Input, true) {
			return fmt.Errorf("canon.input %q: want a file name of the vector", m.Canon.Input)
		}
		if _, err := canon.ParsePolicy(m.Canon.Policy); err != nil || m.Canon.Policy != mustPolicy(m.Canon.Policy).ID() {
			return fmt.Errorf("canon.policy %q: want a policy identifier", m.Canon.Policy)
		}
		if (m.Expect.Verdict == OutcomeCanonical) != (m.Expect.Canonical != "") {
			return errors.New("expect.canonical names the expected bytes exactly when the verdict is canonical")
		}
		if m.Expect.Canonical != "" && (!isName(m.Expect.Canonical, true) || m.Expect.Canonical == m.Canon.Input) {
			return fmt.Errorf("expect.canonical %q: want another file name of the vector", m.Expect.Canonical)
		}
	default:
		return fmt.Errorf("kind %q: want bundle or canon", m.Kind)
	}
	e := &m.Expect
	if !slices.Contains(Verdicts(m.Kind), e.Verdict) {
		return fmt.Errorf("expect.verdict %q: want one of %q", e.Verdict, Verdicts(m.Kind))
	}
	known := Codes(m.Kind)
	for _, list := range []struct {
		name  string
		codes []string
	}{{"required_codes", e.Required}, {"forbidden_codes", e.Forbidden}} {
		if list.codes == nil {
			return fmt.Errorf("expect.%s must be an array", list.name)
		}
		for i, c := range list.codes {
			if !slices.Contains(known, c) {
				return fmt.Errorf("expect.%s[%d] %q: not a %s code (spec/vectors.md)", list.name, i, c, m.Kind)
			}
			if slices.Index(list.codes, c) != i {
				return fmt.Errorf("expect.%s lists %q twice", list.name, c)
			}
		}
		if !slices.IsSorted(list.codes) {
			return fmt.Errorf("expect.%s must be sorted", list.name)
		}
	}
	for _, c := range e.Required {
		if slices.Contains(e.Forbidden, c) {
			return fmt.Errorf("code %q is both required and forbidden", c)
		}
	}
	return nil
}

func mustPolicy(s string) canon.Policy {
	p, _ := canon.ParsePolicy(s)
	return p
}

// isName accepts ids ([a-z0-9-]) and, with file, plain file names of a
// vector directory ([A-Za-z0-9._-], no leading dot): never a path.
func isName(s string, file bool) bool {
	if s == "" || len(s) > maxNameBytes || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case file && (c >= 'A' && c <= 'Z' || c == '.' || c == '_'):
		default:
			return false
		}
	}
	return true
}
