package sign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
)

// MaxRecordBytes bounds a record. A Trust Record is a few hundred bytes of
// identifiers, digests and one key; 64 KiB leaves room for long URIs and
// JWK metadata while keeping a hostile file from costing anything.
const MaxRecordBytes = 64 << 10

// minIAT is the smallest iat TRACE v0.2 admits (2023-11-14T22:13:20Z); the
// largest is canon.MaxSafeInteger.
const minIAT = 1700000000

// ShapeProblem is one way a record (or JWK) departs from the v0.2 shape: the
// RFC 6901 pointer of the offending or missing member, and what is wrong.
type ShapeProblem struct {
	Pointer string
	Problem string
}

// ShapeError lists every shape problem found, in document order of the
// checks. It is ErrSchemaInvalid.
type ShapeError struct {
	Problems []ShapeProblem
}

func (e *ShapeError) Error() string {
	const show = 8
	var b strings.Builder
	b.WriteString(ErrSchemaInvalid.Error())
	for i, p := range e.Problems {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-show)
			break
		}
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = `""`
		}
		fmt.Fprintf(&b, "%s%s %s", sep, ptr, p.Problem)
	}
	return b.String()
}

// Is makes a *ShapeError match ErrSchemaInvalid.
func (e *ShapeError) Is(target error) bool { return target == ErrSchemaInvalid }

// ParseRecord parses and checks a TRACE v0.2 Trust Record, in this order,
// stopping at the first failing step:
//
//  1. at most MaxRecordBytes of strict JSON (canon's parser): otherwise
//     ErrMalformed (wrapping the *canon.Error);
//  2. duplicate member names or lone surrogates: ErrCanonicalization;
//  3. eat_profile present and equal to Profile: otherwise
//     ErrProfileUnsupported (another profile's shape is not ours to judge);
//  4. the whole record canonicalizes under canon.PolicyV02 (every number an
//     integer within ±(2^53-1)): otherwise ErrCanonicalization wrapping the
//     *canon.Error with its pointer;
//  5. the v0.2 shape (spec/signing.md): otherwise a *ShapeError listing
//     every problem.
//
// The signature is not checked here (VerifySignature), and neither is trust
// (CheckTrust) nor freshness (the caller's reference time).
func ParseRecord(data []byte) (*Record, error) {
	c, err := checkRecord(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(c))
	dec.DisallowUnknownFields()
	rec := new(Record)
	if err := dec.Decode(rec); err != nil {
		// The shape check admits only what Record holds: reaching this is a
		// bug in one of the two, reported rather than hidden.
		return nil, fmt.Errorf("%w: decode: %w", ErrSchemaInvalid, err)
	}
	return rec, nil
}

// envelopeKind names a known envelope around a Trust Record (a cMCP
// RuntimeClaim: cmcp_version and the record under "trace"), or "".
func envelopeKind(root canon.Value) string {
	_, cmcp := root.Get("cmcp_version")
	tr, hasTrace := root.Get("trace")
	if cmcp || (hasTrace && tr.Kind() == canon.KindObject) {
		return "a cMCP RuntimeClaim envelope (its Trust Record is under \"trace\")"
	}
	return ""
}

// PeekProfile returns the eat_profile of data when data is a bounded JSON
// object whose eat_profile is a string; nothing else is checked. A
// verifier uses it to apply its accepted profile set before judging the
// shape of a profile it may not implement.
func PeekProfile(data []byte) (string, bool) {
	doc, err := parseRecordDoc(data)
	if err != nil {
		return "", false
	}
	p, ok := doc.Root().Get("eat_profile")
	if !ok {
		return "", false
	}
	return p.Str()
}

// checkRecord is ParseRecord without the decoding: it returns the
// record's canonical bytes.
func checkRecord(data []byte) ([]byte, error) {
	doc, err := parseRecordDoc(data)
	if err != nil {
		return nil, err
	}
	root := doc.Root()
	if root.Kind() == canon.KindObject {
		p, ok := root.Get("eat_profile")
		if s, isStr := p.Str(); !ok || !isStr || s != Profile {
			what := "absent"
			if env := envelopeKind(root); !ok && env != "" {
				return nil, fmt.Errorf("%w: %s, not a Trust Record: envelope not supported (verify the TRACE record it wraps on its own)", ErrProfileUnsupported, env)
			}
			switch {
			case isStr:
				what = strconv.Quote(string(bounded([]byte(s))))
			case ok:
				what = "not a string: " + string(bounded(p.Raw()))
			}
			return nil, fmt.Errorf("%w: eat_profile %s (this parser implements %s)", ErrProfileUnsupported, what, Profile)
		}
	}
	c, err := root.Canonical(canon.PolicyV02)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCanonicalization, err)
	}
	var v validator
	v.object(root, recordShape)
	if err := v.err(); err != nil {
		return nil, err
	}
	if err := originRule(root); err != nil {
		return nil, err
	}
	return c, nil
}

// originRule applies the schema's allOf (spec 3.1.1, a MUST): a record
// whose claims come from a third-party control plane or a log import
// cannot claim a hardware-attested runtime. The shape is already valid.
func originRule(root canon.Value) error {
	o, ok := root.Get("origin")
	if !ok {
		return nil
	}
	kv, _ := o.Get("kind")
	kind, _ := kv.Str()
	if kind == OriginSelf {
		return nil
	}
	rt, _ := root.Get("runtime")
	pv, _ := rt.Get("platform")
	platform, _ := pv.Str()
	if platform == platformSoftwareOnly {
		return nil
	}
	return fmt.Errorf("%w: origin.kind %s with runtime.platform %s (want %s)", ErrOriginPlatform, kind, platform, platformSoftwareOnly)
}

// parseRecordDoc applies the size bound and canon's strict parser.
func parseRecordDoc(data []byte) (*canon.Doc, error) {
	if len(data) > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte record limit", ErrMalformed, len(data), MaxRecordBytes)
	}
	doc, err := canon.Parse(data, canon.ParseOptions{})
	if err != nil {
		return nil, classifyCanon(err)
	}
	return doc, nil
}

// classifyCanon separates input that is not JSON (ErrMalformed) from JSON
// that has no canonical form (ErrCanonicalization), keeping the *canon.Error.
func classifyCanon(err error) error {
	var ce *canon.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case canon.CodeDuplicateKey, canon.CodeUnsupportedNumber, canon.CodeLoneSurrogate:
			return fmt.Errorf("%w: %w", ErrCanonicalization, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

func bounded(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// validator collects shape problems.
type validator struct {
	problems []ShapeProblem
}

func (v *validator) add(ptr, problem string) {
	v.problems = append(v.problems, ShapeProblem{Pointer: ptr, Problem: problem})
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &ShapeError{Problems: v.problems}
}

// shape is the rule for one value of the record: an object (closed, its
// members), an array (its items), or a leaf checked by check. desc is the
// rule as the schema table in spec/signing.md states it; a test keeps the
// two in step (shapeTable).
type shape struct {
	desc    string
	check   func(v *validator, val canon.Value)
	members []member // a closed object
	items   *shape   // an array of items of this shape
}

// member describes one member of a closed object.
type member struct {
	name     string
	required bool
	shape    shape
}

// value checks val against s.
func (v *validator) value(val canon.Value, s shape) {
	switch {
	case s.members != nil:
		v.object(val, s.members)
	case s.items != nil:
		if val.Kind() != canon.KindArray {
			v.add(val.Pointer(), "want an array, found "+kindName(val))
			return
		}
		for _, it := range val.Elems() {
			v.value(it, *s.items)
		}
	default:
		s.check(v, val)
	}
}

// object checks a closed object: required members present, each member
// valid, no member it does not name.
func (v *validator) object(val canon.Value, members []member) {
	if val.Kind() != canon.KindObject {
		v.add(val.Pointer(), "want an object, found "+kindName(val))
		return
	}
	for _, m := range members {
		got, ok := val.Get(m.name)
		if !ok {
			if m.required {
				v.add(childPointer(val.Pointer(), m.name), "required member missing")
			}
			continue
		}
		v.value(got, m.shape)
	}
	for _, m := range val.Members() {
		if !knows(members, m.Name) {
			v.add(m.Value.Pointer(), "unknown member")
		}
	}
}

func knows(members []member, name string) bool {
	for _, m := range members {
		if m.name == name {
			return true
		}
	}
	return false
}

func childPointer(parent, name string) string {
	name = strings.ReplaceAll(name, "~", "~0")
	return parent + "/" + strings.ReplaceAll(name, "/", "~1")
}

func kindName(val canon.Value) string { return val.Kind().String() }

// str returns the string value or records a problem.
func (v *validator) str(val canon.Value) (string, bool) {
	s, ok := val.Str()
	if !ok {
		v.add(val.Pointer(), "want a string, found "+kindName(val))
	}
	return s, ok
}

var anyString = shape{desc: "string", check: func(v *validator, val canon.Value) { v.str(val) }}

// nonEmpty is the schema's string with minLength 1.
var nonEmpty = shape{desc: "string, non-empty", check: func(v *validator, val canon.Value) {
	if s, ok := v.str(val); ok && s == "" {
		v.add(val.Pointer(), "want a non-empty string")
	}
}}

func obj(members ...member) shape { return shape{desc: "object", members: members} }

func arrayOf(item shape) shape { return shape{desc: "array", items: &item} }

func enum(values ...string) shape {
	return shape{desc: "one of " + strings.Join(values, ", "), check: func(v *validator, val canon.Value) {
		s, ok := v.str(val)
		if !ok {
			return
		}
		for _, e := range values {
			if s == e {
				return
			}
		}
		v.add(val.Pointer(), fmt.Sprintf("%s is not one of %s", strconv.Quote(s), strings.Join(values, ", ")))
	}}
}

// integer checks an integer within [lo, hi]. The record has already been
// canonicalized under PolicyV02, so every number is an integer within
// ±(2^53-1) and its canonical text is plain decimal.
func integer(lo, hi int64) shape {
	desc := fmt.Sprintf("integer %d … %d", lo, hi)
	return shape{desc: desc, check: func(v *validator, val canon.Value) {
		if val.Kind() != canon.KindNumber {
			v.add(val.Pointer(), "want an integer, found "+kindName(val))
			return
		}
		c, err := val.Canonical(canon.PolicyV02)
		n, perr := strconv.ParseInt(string(c), 10, 64)
		if err != nil || perr != nil {
			v.add(val.Pointer(), "want an integer within ±9007199254740991")
			return
		}
		if n < lo || n > hi {
			v.add(val.Pointer(), fmt.Sprintf("%d is outside %d..%d", n, lo, hi))
		}
	}}
}

// digest checks "sha256:<64 lowercase hex>" or "sha384:<96 lowercase hex>".
var digest = shape{desc: "digest", check: checkDigest}

func checkDigest(v *validator, val canon.Value) {
	s, ok := v.str(val)
	if ok && !isDigest(s) {
		v.add(val.Pointer(), "want sha256:<64 lowercase hex> or sha384:<96 lowercase hex>")
	}
}

func isDigest(s string) bool {
	var hexPart string
	switch {
	case strings.HasPrefix(s, "sha256:"):
		hexPart = s[len("sha256:"):]
		if len(hexPart) != 64 {
			return false
		}
	case strings.HasPrefix(s, "sha384:"):
		hexPart = s[len("sha384:"):]
		if len(hexPart) != 96 {
			return false
		}
	default:
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

var uri = shape{desc: "URI", check: checkURI}

func checkURI(v *validator, val canon.Value) {
	s, ok := v.str(val)
	if ok && !isURI(s) {
		v.add(val.Pointer(), "want an absolute URI (RFC 3986: scheme \":\" then URI characters only)")
	}
}

// isURI accepts an RFC 3986 absolute URI: a scheme, ":", and only URI
// characters with well-formed percent-encoding (no spaces, controls or
// non-ASCII: IRIs must be percent-encoded first).
func isURI(s string) bool {
	i := strings.IndexByte(s, ':')
	if i < 1 || !isAlpha(s[0]) {
		return false
	}
	for j := 1; j < i; j++ {
		if c := s[j]; !(isAlpha(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case isAlpha(c) || c >= '0' && c <= '9' || strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%' && j+2 < len(s) && isHex(s[j+1]) && isHex(s[j+2]):
			j += 2
		default:
			return false
		}
	}
	_, err := url.Parse(s)
	return err == nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isHex(c byte) bool   { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// subject checks "spiffe://<host>/<path>" or "did:<method>:<id>": the
// forms TRACE v0.2 names, without whitespace or control characters.
var subject = shape{desc: "`spiffe://<host>/<path>` or `did:<method>:<id>`", check: checkSubject}

func checkSubject(v *validator, val canon.Value) {
	s, ok := v.str(val)
	if ok && !isSubject(s) {
		v.add(val.Pointer(), "want spiffe://<host>/<path> or did:<method>:<id>")
	}
}

func isSubject(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	if rest, ok := strings.CutPrefix(s, "spiffe://"); ok {
		host, path, ok := strings.Cut(rest, "/")
		return ok && host != "" && path != ""
	}
	if rest, ok := strings.CutPrefix(s, "did:"); ok {
		method, id, ok := strings.Cut(rest, ":")
		if !ok || method == "" || id == "" {
			return false
		}
		for i := 0; i < len(method); i++ {
			if c := method[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return false
			}
		}
		return true
	}
	return false
}

// nonce checks non-empty canonical unpadded base64url.
var nonce = shape{desc: "base64url, non-empty, canonical", check: checkNonce}

func checkNonce(v *validator, val canon.Value) {
	s, ok := v.str(val)
	if !ok {
		return
	}
	if _, valid := decodeB64URL(s); !valid || s == "" {
		v.add(val.Pointer(), "want non-empty canonical unpadded base64url")
	}
}

// jwk checks a public JWK (see ParseJWK). Unknown members are allowed;
// private key members are not.
func (v *validator) jwk(val canon.Value) {
	if val.Kind() != canon.KindObject {
		v.add(val.Pointer(), "want a JWK object, found "+kindName(val))
		return
	}
	for _, m := range val.Members() {
		if privateJWKMembers[m.Name] {
			v.add(m.Value.Pointer(), "private key member: must never appear")
		}
	}
	get := func(name string) (string, bool) {
		m, ok := val.Get(name)
		if !ok {
			v.add(childPointer(val.Pointer(), name), "required member missing")
			return "", false
		}
		return v.str(m)
	}
	kty, ok := get("kty")
	if !ok {
		return
	}
	var alg Alg
	crv, crvOK := get("crv")
	switch kty {
	case "OKP":
		if crvOK && crv != "Ed25519" {
			v.add(childPointer(val.Pointer(), "crv"), strconv.Quote(crv)+" is not a supported OKP curve (Ed25519)")
		}
		alg = Ed25519
	case "EC":
		switch {
		case !crvOK:
		case crv == "P-256":
			alg = P256
		case crv == "P-384":
			alg = P384
		default:
			v.add(childPointer(val.Pointer(), "crv"), strconv.Quote(crv)+" is not a supported EC curve (P-256, P-384)")
		}
	default:
		v.add(childPointer(val.Pointer(), "kty"), strconv.Quote(kty)+" is not a supported key type (OKP, EC)")
		return
	}
	if alg == "" {
		return // the coordinates of an unknown curve have no length to check
	}
	size := 32
	if alg == P384 {
		size = 48
	}
	coord := func(name string) bool {
		s, ok := get(name)
		if !ok {
			return false
		}
		if b, valid := decodeB64URL(s); !valid || len(b) != size {
			v.add(childPointer(val.Pointer(), name), fmt.Sprintf("want canonical unpadded base64url of %d bytes", size))
			return false
		}
		return true
	}
	xOK := coord("x")
	if kty != "EC" {
		return
	}
	if yOK := coord("y"); xOK && yOK {
		x, _ := val.Get("x")
		y, _ := val.Get("y")
		xs, _ := x.Str()
		ys, _ := y.Str()
		if _, err := (JWK{Kty: kty, Crv: crv, X: xs, Y: ys}).PublicKey(); err != nil {
			v.add(val.Pointer(), "x, y is not a point on "+crv)
		}
	}
}

// Origin kinds (TRACE v0.2 schema and spec section 3.1.1).
const (
	OriginSelf                   = "self"
	OriginThirdPartyControlPlane = "third-party-control-plane"
	OriginLogImport              = "log-import"
)

// Provenance depths (build_provenance.provenance_depth,
// appraisal.provenance_depth_verified).
const (
	DepthSurface    = "surface"
	DepthBuilder    = "builder"
	DepthTransitive = "transitive"
)

// Registered references[].rel values (newer TRACE v0.2 spec text).
var referenceRels = []string{"authorized-intent", "approval-outcome", "behavior-trace", "condition-appraisal", "observed-effect"}

// The v0.2 record shape: the published JSON Schema (schema/trace-claim.json)
// member by member, plus the newer spec text's references and
// reproducibility blocks (reference/trace-v0.2.md; spec/signing.md, whose
// schema table shapeTable generates). Free-text members are any string;
// members named as digests, URIs, enums, the subject and the nonce have
// their patterns.
var (
	depth     = enum(DepthSurface, DepthBuilder, DepthTransitive)
	jwkShape  = shape{desc: "public JWK (see `cnf.jwk` below)", check: func(v *validator, val canon.Value) { v.jwk(val) }}
	sigShape  = shape{desc: "string; its form is judged by `VerifySignature`", check: anyString.check}
	relShape  = shape{desc: "one of " + strings.Join(referenceRels, ", ") + ", or a URI (an extension relation)", check: checkRel}
	recordMap = obj(
		member{"eat_profile", true, enum(Profile)},
		member{"iat", true, integer(minIAT, canon.MaxSafeInteger)},
		member{"subject", true, subject},
		member{"model", true, obj(
			member{"provider", true, anyString},
			member{"model_id", true, anyString},
			member{"version", false, anyString},
			member{"weights_digest", false, digest},
			member{"aibom_uri", false, uri},
		)},
		member{"runtime", true, obj(
			member{"platform", true, enum(platforms...)},
			member{"measurement", true, digest},
			member{"rim_uri", false, uri},
			member{"nonce", false, nonce},
			member{"firmware_version", false, anyString},
		)},
		member{"policy", true, obj(
			member{"bundle_hash", true, digest},
			member{"enforcement_mode", true, enum(enforcementEnforce, enforcementAdvisory, enforcementSilent, enforcementDeclared)},
			member{"version", false, anyString},
			member{"policy_uri", false, uri},
		)},
		member{"data_class", true, anyString},
		member{"build_provenance", true, obj(
			member{"slsa_level", true, integer(0, 3)},
			member{"digest", true, digest},
			member{"builder", false, anyString},
			member{"provenance_uri", false, uri},
			member{"provenance_depth", false, depth},
		)},
		member{"appraisal", true, obj(
			member{"status", true, enum(appraisalAffirming, appraisalWarning, appraisalContraindicated, appraisalNone)},
			member{"verifier", true, uri},
			member{"policy_ref", false, uri},
			member{"timestamp", false, integer(-canon.MaxSafeInteger, canon.MaxSafeInteger)},
			member{"provenance_depth_verified", false, depth},
		)},
		member{"cnf", true, obj(
			member{"jwk", true, jwkShape},
		)},
		member{"tool_transcript", false, obj(
			member{"hash", true, digest},
			member{"call_count", false, integer(0, canon.MaxSafeInteger)},
			member{"transcript_uri", false, uri},
		)},
		member{"delegation", false, obj(
			member{"parent_record_hash", true, digest},
			member{"credential_id", true, nonEmpty},
		)},
		member{"origin", false, obj(
			member{"kind", true, enum(OriginSelf, OriginThirdPartyControlPlane, OriginLogImport)},
			member{"producer", true, nonEmpty},
			member{"source_event_id", false, nonEmpty},
			member{"ingested_at", false, integer(minIAT, canon.MaxSafeInteger)},
		)},
		member{"transparency", false, uri},
		member{"references", false, arrayOf(obj(
			member{"rel", true, relShape},
			member{"id", true, nonEmpty},
			member{"resolver", true, nonEmpty},
			member{"retention", false, nonEmpty},
			member{"digest", false, digest},
		))},
		member{"reproducibility", false, obj(
			member{"function", true, nonEmpty},
			member{"code_identity", true, nonEmpty},
			member{"code_resolver", false, nonEmpty},
			member{"input_closure", true, arrayOf(obj(
				member{"id", true, nonEmpty},
				member{"digest", true, digest},
				member{"resolver", true, nonEmpty},
			))},
			member{"transcript_digest", true, digest},
		)},
		member{"signature", false, sigShape},
	)
	recordShape = recordMap.members
)

func checkRel(v *validator, val canon.Value) {
	s, ok := v.str(val)
	if !ok {
		return
	}
	for _, r := range referenceRels {
		if s == r {
			return
		}
	}
	if !isURI(s) {
		v.add(val.Pointer(), fmt.Sprintf("%s is not a registered relation (%s) or an extension URI", strconv.Quote(s), strings.Join(referenceRels, ", ")))
	}
}

// shapeRow is one row of the record's schema table: a member's JSON
// Pointer (N stands for any array index), whether it is required where
// its parent is present, and its rule.
type shapeRow struct {
	Pointer  string
	Required bool
	Rule     string
}

// shapeTable returns the record shape ParseRecord enforces as rows, in
// document order: the table spec/signing.md prints and a test compares.
func shapeTable() []shapeRow {
	var rows []shapeRow
	var walk func(prefix string, s shape)
	walk = func(prefix string, s shape) {
		switch {
		case s.members != nil:
			for _, m := range s.members {
				p := childPointer(prefix, m.name)
				rows = append(rows, shapeRow{Pointer: p, Required: m.required, Rule: m.shape.desc})
				walk(p, m.shape)
			}
		case s.items != nil:
			walk(prefix+"/N", *s.items)
		}
	}
	walk("", recordMap)
	return rows
}
