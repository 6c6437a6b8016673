package vectors

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/verify"
)

// RunMediaType is the versioned media type of 'tracectl vectors run
// --format json'.
const RunMediaType = "application/vnd.tracectl.vectors-run.v1+json"

// Outcome is what a verifier reports for one vector. It is the contract
// of an external verifier (spec/vectors.md): one JSON object with the
// verdict and the codes it found, and for a canon vector whose verdict is
// canonical, the canonical text.
type Outcome struct {
	Verdict   string   `json:"verdict"`
	Codes     []string `json:"codes"`
	Canonical *string  `json:"canonical,omitempty"`
}

// Limits of ParseOutcome.
const (
	// MaxOutcomeBytes bounds an outcome: an external verifier's stdout.
	MaxOutcomeBytes = 1 << 20
	// MaxOutcomeCodes bounds its code list.
	MaxOutcomeCodes = 4096
)

// ErrOutcome is wrapped by every ParseOutcome rejection.
var ErrOutcome = errors.New("invalid verifier outcome")

// ParseOutcome reads an outcome as an external verifier prints it: one
// strict JSON object (RFC 8259, no repeated member names) with a string
// "verdict", an array of strings "codes" and, optionally, a string
// "canonical"; surrounding white space is allowed and other members are
// ignored, so a verifier may add its own.
func ParseOutcome(data []byte) (*Outcome, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrOutcome}, a...)...)
	}
	if len(data) > MaxOutcomeBytes {
		return nil, bad("%w: more than %d bytes", ErrTooLarge, MaxOutcomeBytes)
	}
	doc, err := canon.Parse(data, canon.ParseOptions{})
	if err != nil {
		return nil, bad("%w", err)
	}
	root := doc.Root()
	if root.Kind() != canon.KindObject {
		return nil, bad("not a JSON object")
	}
	var o Outcome
	v, ok := root.Get("verdict")
	if o.Verdict, _ = v.Str(); !ok || v.Kind() != canon.KindString || o.Verdict == "" {
		return nil, bad(`"verdict" must be a non-empty string`)
	}
	codes, ok := root.Get("codes")
	if !ok || codes.Kind() != canon.KindArray {
		return nil, bad(`"codes" must be an array of strings`)
	}
	if codes.Len() > MaxOutcomeCodes {
		return nil, bad("%w: more than %d codes", ErrTooLarge, MaxOutcomeCodes)
	}
	o.Codes = []string{}
	for _, c := range codes.Elems() {
		s, ok := c.Str()
		if !ok {
			return nil, bad(`"codes" must be an array of strings`)
		}
		o.Codes = append(o.Codes, s)
	}
	if c, ok := root.Get("canonical"); ok {
		s, isStr := c.Str()
		if !isStr {
			return nil, bad(`"canonical" must be a string`)
		}
		o.Canonical = &s
	}
	return &o, nil
}

// Vector is one loaded vector.
type Vector struct {
	Dir      string // the directory name, equal to the manifest's id
	FS       fs.FS  // the vector's files
	Manifest *Manifest
}

// VerifierFunc verifies one vector and reports its outcome. An error means
// no outcome (the verifier could not run), which fails the vector.
type VerifierFunc func(ctx context.Context, v *Vector) (*Outcome, error)

// Load reads every vector of a vectors directory: each subdirectory is one
// vector and must hold a valid vector.json whose id is the directory name.
// Files at the top level (a README) are ignored. Vectors are returned by
// row, then case (positive, negative, boundary), then id.
func Load(fsys fs.FS) ([]*Vector, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read vectors: %w", err)
	}
	var out []*Vector
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub, err := fs.Sub(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("vector %q: %w", e.Name(), err)
		}
		data, err := readBounded(sub, ManifestFile, MaxManifestBytes)
		if err != nil {
			return nil, fmt.Errorf("vector %q: %w", e.Name(), err)
		}
		m, err := ParseManifest(data)
		if err != nil {
			return nil, fmt.Errorf("vector %q: %w", e.Name(), err)
		}
		if m.ID != e.Name() {
			return nil, fmt.Errorf("vector %q: %w: id %q is not the directory name", e.Name(), ErrManifest, m.ID)
		}
		out = append(out, &Vector{Dir: e.Name(), FS: sub, Manifest: m})
	}
	if len(out) == 0 {
		return nil, errors.New("read vectors: no vector directories")
	}
	order := []string{CasePositive, CaseNegative, CaseBoundary}
	slices.SortFunc(out, func(a, b *Vector) int {
		return cmp.Or(cmp.Compare(a.Manifest.Row, b.Manifest.Row),
			cmp.Compare(slices.Index(order, a.Manifest.Case), slices.Index(order, b.Manifest.Case)),
			strings.Compare(a.Dir, b.Dir))
	})
	return out, nil
}

// Result is one vector's result.
type Result struct {
	ID       string   `json:"id"`
	Row      int64    `json:"row"`
	Kind     string   `json:"kind"`
	Case     string   `json:"case"`
	Expected Expect   `json:"expected"`
	Got      *Outcome `json:"got,omitempty"`
	Error    string   `json:"error,omitempty"`    // the verifier gave no outcome
	Problems []string `json:"problems,omitempty"` // how the outcome differs from the expectation
	Pass     bool     `json:"pass"`
}

// Run loads the vectors of fsys and runs verifier over each, in order. The
// error is about loading only; a verifier failure fails its vector.
func Run(ctx context.Context, fsys fs.FS, verifier VerifierFunc) ([]Result, error) {
	vs, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	return RunVectors(ctx, vs, verifier)
}

// RunVectors runs verifier over loaded vectors, in the order given. It
// stops early only when ctx is done.
func RunVectors(ctx context.Context, vs []*Vector, verifier VerifierFunc) ([]Result, error) {
	out := make([]Result, 0, len(vs))
	for _, v := range vs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		m := v.Manifest
		r := Result{ID: m.ID, Row: m.Row, Kind: m.Kind, Case: m.Case, Expected: expectOf(v)}
		o, err := verifier(ctx, v)
		switch {
		case err != nil:
			r.Error = err.Error()
		case o == nil:
			r.Error = "the verifier returned no outcome"
		default:
			r.Got = o
			r.Problems = Compare(v, o)
			r.Pass = len(r.Problems) == 0
		}
		out = append(out, r)
	}
	return out, nil
}

// supersededVerdicts are published expectations a deliberate rule change
// replaced: the vector's bytes stay as published (frozen sets are never
// regenerated), the verdict it must now give changed. spec/vectors.md,
// "Superseded expectations", says why for each.
var supersededVerdicts = map[string]struct{ was, now string }{
	// A call to a tool the complete bound snapshot does not declare is
	// behaviour the evidence shows (a warning), not evidence that is false.
	"r3-tool-not-declared": {was: "failed", now: "verified"},
}

// expectOf is the expectation a vector is judged by: its manifest's, with a
// superseded verdict replaced.
func expectOf(v *Vector) Expect {
	e := v.Manifest.Expect
	if s, ok := supersededVerdicts[v.Manifest.ID]; ok && e.Verdict == s.was {
		e.Verdict = s.now
	}
	return e
}

// Compare returns how an outcome differs from the vector's expectation:
// nothing when the verdict is the expected one, every required code is
// reported, no forbidden code is, and (canon vectors) the canonical text is
// the expected file's bytes.
func Compare(v *Vector, o *Outcome) []string {
	e := expectOf(v)
	var p []string
	if o.Verdict != e.Verdict {
		p = append(p, fmt.Sprintf("verdict %q, want %q", o.Verdict, e.Verdict))
	}
	for _, c := range e.Required {
		if !slices.Contains(o.Codes, c) {
			p = append(p, "required code "+c+" not reported")
		}
	}
	for _, c := range e.Forbidden {
		if slices.Contains(o.Codes, c) {
			p = append(p, "forbidden code "+c+" reported")
		}
	}
	if e.Canonical != "" {
		want, err := readBounded(v.FS, e.Canonical, canon.DefaultMaxBytes)
		switch {
		case err != nil:
			p = append(p, "expected canonical bytes: "+err.Error())
		case o.Canonical == nil:
			p = append(p, "no canonical text reported")
		case !bytes.Equal([]byte(*o.Canonical), want):
			p = append(p, fmt.Sprintf("canonical text differs from %s", e.Canonical))
		}
	}
	return p
}

// Tracectl is tracectl's own verifier as a VerifierFunc: package verify for
// bundle vectors (the codes of every finding, whatever its status), package
// canon for canon vectors.
func Tracectl(ctx context.Context, v *Vector) (*Outcome, error) {
	m := v.Manifest
	switch m.Kind {
	case KindBundle:
		return verifyBundle(ctx, v.FS, m.Bundle)
	case KindCanon:
		return canonicalize(v.FS, m.Canon)
	}
	return nil, fmt.Errorf("kind %q", m.Kind)
}

func verifyBundle(ctx context.Context, fsys fs.FS, o *BundleOptions) (*Outcome, error) {
	at, err := time.Parse(time.RFC3339, o.At)
	if err != nil {
		return nil, fmt.Errorf("verifier.at: %w", err)
	}
	keyPEM, err := readBounded(fsys, o.TrustedKey, sign.MaxKeyFileBytes)
	if err != nil {
		return nil, err
	}
	key, err := sign.ParsePublicKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.TrustedKey, err)
	}
	vf, err := verify.New(verify.Options{TrustedKey: key, At: at, AcceptWithheld: o.AcceptWithheld})
	if err != nil {
		return nil, err
	}
	rep, err := vf.Bundle(ctx, fsys)
	if rep == nil {
		return nil, err
	}
	return &Outcome{Verdict: string(rep.Verdict), Codes: reportCodes(rep)}, nil
}

// reportCodes returns the distinct codes of a report's findings, listed or
// omitted, sorted.
func reportCodes(rep *verify.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, string(f.Code))
	}
	for c := range rep.Omitted {
		out = append(out, string(c))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func canonicalize(fsys fs.FS, o *CanonOptions) (*Outcome, error) {
	p, err := canon.ParsePolicy(o.Policy)
	if err != nil {
		return nil, err
	}
	in, err := readBounded(fsys, o.Input, canon.DefaultMaxBytes)
	if err != nil {
		return nil, err
	}
	out, err := canon.Canonicalize(in, p)
	var ce *canon.Error
	switch {
	case err == nil:
		s := string(out)
		return &Outcome{Verdict: OutcomeCanonical, Codes: []string{}, Canonical: &s}, nil
	case errors.As(err, &ce) && ce.Code == canon.CodeUnsupportedNumber:
		return &Outcome{Verdict: OutcomeUnsupported, Codes: []string{string(ce.Code)}}, nil
	case errors.As(err, &ce):
		return &Outcome{Verdict: OutcomeRejected, Codes: []string{string(ce.Code)}}, nil
	}
	return nil, err
}

// readBounded reads a whole file of at most max bytes.
func readBounded(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: more than %d bytes", name, max)
	}
	return b, nil
}
