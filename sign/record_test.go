package sign

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature/kms"
	"github.com/sigstore/sigstore/pkg/signature/kms/fake"
	"github.com/tracectl/tracectl/canon"
)

const del = "\x00delete"

// mutate sets (or with del, removes) the member at an RFC 6901 pointer of
// a JSON object to raw JSON text, keeping number literals as written.
func mutate(t testing.TB, data []byte, ptr, raw string) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(ptr, "/")[1:]
	obj := root
	for _, p := range parts[:len(parts)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			t.Fatalf("mutate: %s: no object at %q", ptr, p)
		}
		obj = next
	}
	last := parts[len(parts)-1]
	if raw == del {
		delete(obj, last)
	} else {
		obj[last] = json.RawMessage(raw)
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatalf("mutate %s = %s: %v", ptr, raw, err)
	}
	return out
}

func unsignedRecord(t testing.TB) []byte {
	t.Helper()
	rec, err := Build(testOptions(newSigner(t, Ed25519).Public()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := canon.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseRecordShape: each record has one defect; the error must be the
// expected sentinel and, for shape errors, name the expected pointers.
func TestParseRecordShape(t *testing.T) {
	base := unsignedRecord(t)
	m := func(ptr, raw string) []byte { return mutate(t, base, ptr, raw) }
	p256 := mustJWK(t, newSigner(t, P256).Public())
	type tc struct {
		name string
		data []byte
		want error
		ptrs []string // for ErrSchemaInvalid: every problem's pointer, in order
	}
	cases := []tc{
		{"valid", base, nil, nil},
		{"valid: iat written 1785000000.0", m("/iat", "1785000000.0"), nil, nil},
		{"valid: iat written 1.785e9", m("/iat", "1.785e9"), nil, nil},
		{"valid: did subject", m("/subject", `"did:web:example.com:agents:7"`), nil, nil},
		{"valid: every optional member", withOptionals(t, base), nil, nil},
		{"valid: P-256 key", m("/cnf/jwk", p256), nil, nil},
		{"valid: jwk extra members", m("/cnf/jwk/kid", `{"any":["thing"]}`), nil, nil},
		{"valid: iat lower bound", m("/iat", "1700000000"), nil, nil},
		{"valid: iat upper bound", m("/iat", "9007199254740991"), nil, nil},
		{"valid: call_count 0", m("/tool_transcript/call_count", "0"), nil, nil},

		{"not JSON", []byte(`{"eat_profile":`), ErrMalformed, nil},
		{"trailing data", append(bytes.Clone(base), " x"...), ErrMalformed, nil},
		{"duplicate member", []byte(`{"eat_profile":"a","eat_profile":"b"}`), ErrCanonicalization, nil},
		{"not an object", []byte(`[1]`), ErrSchemaInvalid, []string{""}},
		{"profile missing", m("/eat_profile", del), ErrProfileUnsupported, nil},
		{"profile v0.1", m("/eat_profile", `"tag:agentrust-io.com,2025:trace-v0.1"`), ErrProfileUnsupported, nil},
		{"profile not a string", m("/eat_profile", `2`), ErrProfileUnsupported, nil},
		{"iat beyond 2^53-1", m("/iat", "9007199254740993"), ErrCanonicalization, nil},
		{"iat 2^53", m("/iat", "9007199254740992"), ErrCanonicalization, nil},
		{"non-integer anywhere", m("/tool_transcript/call_count", "1.5"), ErrCanonicalization, nil},
		{"1e21", m("/iat", "1e21"), ErrCanonicalization, nil},

		{"private member d", m("/cnf/jwk/d", `"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"`), ErrSchemaInvalid, []string{"/cnf/jwk/d"}},
		{"private member k", m("/cnf/jwk/k", `"x"`), ErrSchemaInvalid, []string{"/cnf/jwk/k"}},
		{"unknown top-level member", m("/extra", `1`), ErrSchemaInvalid, []string{"/extra"}},
		{"unknown nested member", m("/runtime/gpu", `"h100"`), ErrSchemaInvalid, []string{"/runtime/gpu"}},
		{"unknown member with escapes", m("/a~b", `1`), ErrSchemaInvalid, []string{"/a~0b"}},
		{"iat below range", m("/iat", "1699999999"), ErrSchemaInvalid, []string{"/iat"}},
		{"iat negative", m("/iat", "-1"), ErrSchemaInvalid, []string{"/iat"}},
		{"iat a string", m("/iat", `"1785000000"`), ErrSchemaInvalid, []string{"/iat"}},
		{"subject plain", m("/subject", `"alice"`), ErrSchemaInvalid, []string{"/subject"}},
		{"subject spiffe without path", m("/subject", `"spiffe://example.org"`), ErrSchemaInvalid, []string{"/subject"}},
		{"subject spiffe empty path", m("/subject", `"spiffe://example.org/"`), ErrSchemaInvalid, []string{"/subject"}},
		{"subject with space", m("/subject", `"spiffe://example.org/a b"`), ErrSchemaInvalid, []string{"/subject"}},
		{"subject did uppercase method", m("/subject", `"did:WEB:x"`), ErrSchemaInvalid, []string{"/subject"}},
		{"subject did without id", m("/subject", `"did:web:"`), ErrSchemaInvalid, []string{"/subject"}},
		{"platform unknown", m("/runtime/platform", `"laptop"`), ErrSchemaInvalid, []string{"/runtime/platform"}},
		{"enforcement unknown", m("/policy/enforcement_mode", `"strict"`), ErrSchemaInvalid, []string{"/policy/enforcement_mode"}},
		{"appraisal status unknown", m("/appraisal/status", `"ok"`), ErrSchemaInvalid, []string{"/appraisal/status"}},
		{"verifier not a URI", m("/appraisal/verifier", `"tracectl"`), ErrSchemaInvalid, []string{"/appraisal/verifier"}},
		{"verifier with space", m("/appraisal/verifier", `"https://x/a b"`), ErrSchemaInvalid, []string{"/appraisal/verifier"}},
		{"verifier bad percent", m("/appraisal/verifier", `"https://x/%zz"`), ErrSchemaInvalid, []string{"/appraisal/verifier"}},
		{"digest uppercase", m("/build_provenance/digest", `"sha256:`+strings.Repeat("A", 64)+`"`), ErrSchemaInvalid, []string{"/build_provenance/digest"}},
		{"digest short", m("/runtime/measurement", `"sha256:abc"`), ErrSchemaInvalid, []string{"/runtime/measurement"}},
		{"digest sha512", m("/policy/bundle_hash", `"sha512:`+strings.Repeat("a", 128)+`"`), ErrSchemaInvalid, []string{"/policy/bundle_hash"}},
		{"slsa level 4", m("/build_provenance/slsa_level", "4"), ErrSchemaInvalid, []string{"/build_provenance/slsa_level"}},
		{"nonce padded", m("/runtime/nonce", `"AQ=="`), ErrSchemaInvalid, []string{"/runtime/nonce"}},
		{"nonce empty", m("/runtime/nonce", `""`), ErrSchemaInvalid, []string{"/runtime/nonce"}},
		{"call_count negative", m("/tool_transcript/call_count", "-1"), ErrSchemaInvalid, []string{"/tool_transcript/call_count"}},
		{"tool_transcript hash missing", m("/tool_transcript/hash", del), ErrSchemaInvalid, []string{"/tool_transcript/hash"}},
		{"model missing", m("/model", del), ErrSchemaInvalid, []string{"/model"}},
		{"model not an object", m("/model", `"gpt"`), ErrSchemaInvalid, []string{"/model"}},
		{"data_class a number", m("/data_class", `3`), ErrSchemaInvalid, []string{"/data_class"}},
		{"signature a number", m("/signature", `3`), ErrSchemaInvalid, []string{"/signature"}},
		{"jwk kty RSA", m("/cnf/jwk/kty", `"RSA"`), ErrSchemaInvalid, []string{"/cnf/jwk/kty"}},
		{"jwk crv X25519", m("/cnf/jwk/crv", `"X25519"`), ErrSchemaInvalid, []string{"/cnf/jwk/crv"}},
		{"jwk x padded", m("/cnf/jwk/x", `"`+mustJWKMember(t, base, "x")+`="`), ErrSchemaInvalid, []string{"/cnf/jwk/x"}},
		{"jwk x short", m("/cnf/jwk/x", `"AAAA"`), ErrSchemaInvalid, []string{"/cnf/jwk/x"}},
		{"jwk missing", m("/cnf/jwk", del), ErrSchemaInvalid, []string{"/cnf/jwk"}},
		{"jwk EC without y", mutate(t, m("/cnf/jwk", p256), "/cnf/jwk/y", del), ErrSchemaInvalid, []string{"/cnf/jwk/y"}},
		{"jwk EC P-521", mutate(t, m("/cnf/jwk", p256), "/cnf/jwk/crv", `"P-521"`), ErrSchemaInvalid, []string{"/cnf/jwk/crv"}},
		{"jwk EC point off curve", mutate(t, m("/cnf/jwk", p256), "/cnf/jwk/y", `"`+strings.Repeat("A", 43)+`"`), ErrSchemaInvalid, []string{"/cnf/jwk"}},
		{"every problem reported", mutate(t, mutate(t, m("/subject", `"bob"`), "/runtime/platform", `"x"`), "/cnf/jwk/d", `"x"`),
			ErrSchemaInvalid, []string{"/subject", "/runtime/platform", "/cnf/jwk/d"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := ParseRecord(c.data)
			if c.want == nil {
				if err != nil || rec == nil {
					t.Fatalf("ParseRecord: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if rec != nil {
				t.Error("a record came back with an error")
			}
			var se *ShapeError
			if c.ptrs == nil {
				if errors.As(err, &se) {
					t.Errorf("unexpected shape error: %v", err)
				}
				return
			}
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *ShapeError", err)
			}
			var got []string
			for _, p := range se.Problems {
				got = append(got, p.Pointer)
			}
			if !slices.Equal(got, c.ptrs) {
				t.Errorf("pointers %q, want %q (%v)", got, c.ptrs, err)
			}
		})
	}
}

func TestParseRecordCanonError(t *testing.T) {
	data := mutate(t, unsignedRecord(t), "/iat", "9007199254740993")
	_, err := ParseRecord(data)
	var ce *canon.Error
	if !errors.Is(err, ErrCanonicalization) || !errors.As(err, &ce) {
		t.Fatalf("got %v, want ErrCanonicalization wrapping *canon.Error", err)
	}
	if got, want := ce.Pointer, "/iat"; got != want {
		t.Errorf("pointer %q, want %q", got, want)
	}
	if !errors.Is(err, canon.CodeUnsupportedNumber) {
		t.Errorf("code: %v, want unsupported_number", ce.Code)
	}
}

func TestParseRecordLimit(t *testing.T) {
	base := unsignedRecord(t)
	for _, tc := range []struct {
		size int
		want error
	}{{MaxRecordBytes, nil}, {MaxRecordBytes + 1, ErrMalformed}} {
		data := append(bytes.Clone(base), bytes.Repeat([]byte(" "), tc.size-len(base))...)
		_, err := ParseRecord(data)
		if !errors.Is(err, tc.want) {
			t.Errorf("%d bytes: got %v, want %v", tc.size, err, tc.want)
		}
	}
}

// withOptionals adds every optional member TRACE v0.2 names.
func withOptionals(t testing.TB, data []byte) []byte {
	d := canon.SHA256([]byte("x"))
	for _, kv := range [][2]string{
		{"/model/version", `"4.1"`}, {"/model/weights_digest", `"` + d + `"`}, {"/model/aibom_uri", `"https://example.com/aibom.json"`},
		{"/runtime/rim_uri", `"https://example.com/rim"`}, {"/runtime/nonce", `"AQID"`}, {"/runtime/firmware_version", `""`},
		{"/policy/version", `"1"`}, {"/policy/policy_uri", `"urn:example:policy"`},
		{"/build_provenance/builder", `"ci"`}, {"/build_provenance/provenance_uri", `"https://example.com/prov"`}, {"/build_provenance/provenance_depth", `"builder"`},
		{"/appraisal/policy_ref", `"https://example.com/policy/7"`}, {"/appraisal/timestamp", `1785000000`}, {"/appraisal/provenance_depth_verified", `"surface"`},
		{"/tool_transcript/transcript_uri", `"file:///var/run.trace/transcript.jsonl"`},
		{"/delegation", `{"parent_record_hash":"` + d + `","credential_id":"c-1"}`},
		{"/origin", `{"kind":"log-import","producer":"gateway-7","source_event_id":"e-1","ingested_at":1785000100}`},
		{"/transparency", `"https://log.example.com/e/1"`},
		{"/references", `[{"rel":"behavior-trace","id":"t-1","resolver":"https://r.example.com/","retention":"P30D","digest":"` + d + `"}]`},
		{"/reproducibility", `{"function":"f","code_identity":"` + d + `","code_resolver":"oci://x","input_closure":[{"id":"i","digest":"` + d + `","resolver":"r"}],"transcript_digest":"` + d + `"}`},
	} {
		data = mutate(t, data, kv[0], kv[1])
	}
	return data
}

func mustJWK(t testing.TB, pub crypto.PublicKey) string {
	j, err := jwkFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustJWKMember(t testing.TB, rec []byte, name string) string {
	var r struct {
		Cnf struct {
			JWK map[string]string `json:"jwk"`
		} `json:"cnf"`
	}
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatal(err)
	}
	return r.Cnf.JWK[name]
}

// TestReencode: a parsed record re-encodes to the canonical form of its
// input, optional members and JWK extras included.
func TestReencode(t *testing.T) {
	in := mutate(t, withOptionals(t, unsignedRecord(t)), "/cnf/jwk/kid", `"key-1"`)
	rec, err := ParseRecord(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := canon.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canon.Canonicalize(in, canon.PolicyV02)
	if !bytes.Equal(got, want) {
		t.Errorf("re-encoded\n%s\nwant\n%s", got, want)
	}
}

// TestVerifySignature covers the signature checks on records signed with
// each algorithm.
func TestVerifySignature(t *testing.T) {
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			s := newSigner(t, alg)
			data := signedRecord(t, s)
			rec, err := ParseRecord(data)
			if err != nil {
				t.Fatal(err)
			}
			sig := rec.Signature
			type tc struct {
				name string
				data []byte
				want error
			}
			cases := []tc{
				{"as signed", data, nil},
				// The signature covers the canonical form, so an equivalent
				// encoding of the same members verifies.
				{"reformatted", reformat(t, data), nil},
				{"tampered subject", bytes.Replace(data, []byte("unidentified-agent"), []byte("unidentified-agenT"), 1), ErrSignatureInvalid},
				{"tampered iat", bytes.Replace(data, []byte(`"iat":1785000000`), []byte(`"iat":1785000001`), 1), ErrSignatureInvalid},
				{"tampered call_count", bytes.Replace(data, []byte(`"call_count":3`), []byte(`"call_count":2`), 1), ErrSignatureInvalid},
				{"member added", mutate(t, data, "/transparency", `"https://x.example/1"`), ErrSignatureInvalid},
				{"signature missing", mutate(t, data, "/signature", del), ErrSignatureMissing},
				{"signature in the standard alphabet", mutate(t, data, "/signature", `"`+strings.NewReplacer("-", "+", "_", "/").Replace(sig)+`"`), expectAlphabet(sig)},
				{"signature with newline", mutate(t, data, "/signature", `"`+sig[:8]+`\n`+sig[8:]+`"`), ErrSignatureMalformed},
				{"signature truncated", mutate(t, data, "/signature", `"`+sig[:len(sig)-4]+`"`), ErrSignatureMalformed},
				{"signature empty", mutate(t, data, "/signature", `""`), ErrSignatureMalformed},
				{"signature of zeros", mutate(t, data, "/signature", `"`+b64(make([]byte, alg.sigSize()))+`"`), ErrSignatureInvalid},
			}
			if len(sig)%4 != 0 { // 64-byte signatures; 96 bytes encode without spare bits
				cases = append(cases,
					tc{"signature padded", mutate(t, data, "/signature", `"`+sig+padFor(sig)+`"`), ErrSignatureMalformed},
					tc{"signature trailing bits", mutate(t, data, "/signature", `"`+flipTrailingBit(sig)+`"`), ErrSignatureMalformed})
			}
			for _, c := range cases {
				rec, err := ParseRecord(c.data)
				if err != nil {
					t.Fatalf("%s: ParseRecord: %v", c.name, err)
				}
				if err := VerifySignature(c.data, rec); !errors.Is(err, c.want) {
					t.Errorf("%s: got %v, want %v", c.name, err, c.want)
				}
			}
		})
	}
}

// expectAlphabet: a signature without '-' or '_' is unchanged by the
// alphabet swap and still verifies.
func expectAlphabet(sig string) error {
	if strings.ContainsAny(sig, "-_") {
		return ErrSignatureMalformed
	}
	return nil
}

func padFor(s string) string { return strings.Repeat("=", (4-len(s)%4)%4) }

// flipTrailingBit sets an unused low bit of the last character: the same
// bytes, a different (non-canonical) text.
func flipTrailingBit(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i|1])
}

// reformat re-encodes a record with indentation and reversed member order.
func reformat(t testing.TB, data []byte) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(mapsKeys(m))
	slices.Reverse(keys)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "  %q : %s", k, m[k])
	}
	b.WriteString("\n}\n")
	return b.Bytes()
}

func mapsKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestVerifySignatureMisuse(t *testing.T) {
	data := signedRecord(t, newSigner(t, Ed25519))
	other := signedRecord(t, newSigner(t, P256))
	rec, err := ParseRecord(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifySignature(data, rec); err == nil {
		t.Error("VerifySignature accepted a record parsed from other bytes")
	}
	if err := VerifySignature(data, nil); err == nil {
		t.Error("VerifySignature accepted a nil record")
	}
}

func TestCheckTrust(t *testing.T) {
	s := newSigner(t, Ed25519)
	rec, err := ParseRecord(signedRecord(t, s))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		trusted crypto.PublicKey
		want    error
	}{
		{"the signer's key", s.Public(), nil},
		{"another Ed25519 key", mustGenerate(t, Ed25519, "other").Public(), ErrCnfKeyMismatch},
		{"a P-256 key", newSigner(t, P256).Public(), ErrCnfKeyMismatch},
		{"no key", nil, ErrTrustedKeyMissing},
	} {
		if err := CheckTrust(rec, tc.trusted); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func mustGenerate(t testing.TB, alg Alg, label string) crypto.Signer {
	k, err := Generate(alg, seeded(label))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignRefusals(t *testing.T) {
	s := newSigner(t, Ed25519)
	rec, err := Build(testOptions(s.Public()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sign(rec, newSigner(t, P384)); !errors.Is(err, ErrCnfKeyMismatch) {
		t.Errorf("signing with a key other than cnf.jwk: got %v, want ErrCnfKeyMismatch", err)
	}
	bad := *rec
	bad.Subject = "mallory"
	if _, err := Sign(&bad, s); !errors.Is(err, ErrSchemaInvalid) {
		t.Errorf("signing a shape-invalid record: got %v, want ErrSchemaInvalid", err)
	}
	// A signature already present is replaced, not signed over.
	rec.Signature = "stale"
	data, err := Sign(rec, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := parseAndVerify(data, s.Public()); err != nil {
		t.Error(err)
	}
	if rec.Signature != "stale" {
		t.Error("Sign changed its argument")
	}
}

func TestBuild(t *testing.T) {
	pub := newSigner(t, Ed25519).Public()
	rec, err := Build(testOptions(pub))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"eat_profile", rec.EATProfile, Profile},
		{"subject", rec.Subject, defaultSubject},
		{"model.provider", rec.Model.Provider, defaultModelProvider},
		{"model.model_id", rec.Model.ModelID, defaultModelID},
		{"runtime.platform", rec.Runtime.Platform, platformSoftwareOnly},
		{"runtime.measurement", rec.Runtime.Measurement, testOptions(pub).Digest},
		{"build_provenance.digest", rec.BuildProvenance.Digest, testOptions(pub).Digest},
		{"policy.bundle_hash", rec.Policy.BundleHash, emptyPolicyHash},
		{"policy.enforcement_mode", rec.Policy.EnforcementMode, enforcementDeclared},
		{"data_class", rec.DataClass, defaultDataClass},
		{"appraisal.status", rec.Appraisal.Status, appraisalNone},
		{"appraisal.verifier", rec.Appraisal.Verifier, defaultVerifier},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if rec.IAT != 1785000000 || rec.BuildProvenance.SLSALevel != 0 || *rec.ToolTranscript.CallCount != 3 {
		t.Errorf("iat %d, slsa_level %d, call_count %d", rec.IAT, rec.BuildProvenance.SLSALevel, *rec.ToolTranscript.CallCount)
	}
	if got, want := emptyPolicyHash, canon.SHA256(nil); got != want {
		t.Errorf("emptyPolicyHash = %s, want %s", got, want)
	}

	for _, tc := range []struct {
		name   string
		change func(*RecordOptions)
		ptr    string // "" when the refusal is not a shape error
	}{
		{"iat before 2023-11-14", func(o *RecordOptions) { o.IssuedAt = testTime.AddDate(-10, 0, 0) }, "/iat"},
		{"no time", func(o *RecordOptions) { o.IssuedAt = time.Time{} }, ""},
		{"no key", func(o *RecordOptions) { o.Key = nil }, ""},
		{"no digest", func(o *RecordOptions) { o.Digest = "" }, "/build_provenance/digest"},
		{"no transcript hash", func(o *RecordOptions) { o.TranscriptHash = "" }, "/tool_transcript/hash"},
		{"negative call count", func(o *RecordOptions) { o.CallCount = -1 }, ""},
		{"bad subject", func(o *RecordOptions) { o.Subject = "alice" }, "/subject"},
		{"bad platform", func(o *RecordOptions) { o.Platform = "vm" }, "/runtime/platform"},
		{"slsa level 5", func(o *RecordOptions) { o.SLSALevel = 5 }, "/build_provenance/slsa_level"},
		{"bad nonce", func(o *RecordOptions) { o.Nonce = "a b" }, "/runtime/nonce"},
	} {
		o := testOptions(pub)
		tc.change(&o)
		_, err := Build(o)
		if err == nil {
			t.Errorf("%s: Build succeeded", tc.name)
			continue
		}
		var se *ShapeError
		if tc.ptr == "" {
			if errors.As(err, &se) {
				t.Errorf("%s: unexpected shape error %v", tc.name, err)
			}
			continue
		}
		if !errors.As(err, &se) || !slices.ContainsFunc(se.Problems, func(p ShapeProblem) bool { return p.Pointer == tc.ptr }) {
			t.Errorf("%s: got %v, want a shape problem at %s", tc.name, err, tc.ptr)
		}
	}
}

// TestThumbprintRFC8037 checks RFC 7638 against the Ed25519 key of RFC 8037
// appendix A.2, whose thumbprint appendix A.3 gives.
func TestThumbprintRFC8037(t *testing.T) {
	const (
		jwk  = `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`
		want = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
	)
	j, err := ParseJWK([]byte(jwk))
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Thumbprint()
	if err != nil || got != want {
		t.Errorf("JWK.Thumbprint = %q, %v; want %q", got, err, want)
	}
	pub, err := ParsePublicKey([]byte(jwk))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Thumbprint(pub); got != want {
		t.Errorf("Thumbprint(key) = %q, want %q", got, want)
	}
	// Extra members never change the thumbprint.
	j2, err := ParseJWK([]byte(`{"kid":"k1","use":"sig","kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := j2.Thumbprint(); got != want {
		t.Errorf("with kid and use: %q, want %q", got, want)
	}
	// The private key of RFC 8037 A.1 must be refused.
	_, err = ParseJWK([]byte(`{"kty":"OKP","crv":"Ed25519","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	var se *ShapeError
	if !errors.As(err, &se) || se.Problems[0].Pointer != "/d" {
		t.Errorf("private JWK: got %v, want a shape problem at /d", err)
	}
}

func TestJWKRoundTrip(t *testing.T) {
	for _, alg := range algs {
		pub := newSigner(t, alg).Public()
		j, err := jwkFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		back, err := j.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(back) {
			t.Errorf("%s: JWK round trip changed the key", alg)
		}
		b, _ := json.Marshal(j)
		if _, err := ParsePublicKey(b); err != nil {
			t.Errorf("%s: ParsePublicKey(%s): %v", alg, b, err)
		}
	}
	if _, err := json.Marshal(JWK{Kty: "OKP", Crv: "Ed25519", X: "x", Extra: map[string]json.RawMessage{"d": []byte(`"x"`)}}); err == nil {
		t.Error("MarshalJSON wrote a private member")
	}
}

func TestFakeKMS(t *testing.T) {
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			ctx := context.WithValue(context.Background(), fake.KmsCtxKey{}, crypto.PrivateKey(genKey(t, alg)))
			s, err := LoadKMS(ctx, "fakekms://tracectl-test")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.Alg(), alg; got != want {
				t.Errorf("Alg() = %s, want %s", got, want)
			}
			if err := parseAndVerify(signedRecord(t, s), genKey(t, alg).Public()); err != nil {
				t.Error(err)
			}
		})
	}
	if !IsKMSRef("fakekms://x") || IsKMSRef("keys/a.key") || IsKMSRef("C:/x") || IsKMSRef("://x") {
		t.Error("IsKMSRef misclassifies")
	}
	_, err := LoadKMS(context.Background(), "tracectl-no-such-plugin://key")
	var pnf *kms.ProviderNotFoundError
	if !errors.As(err, &pnf) {
		t.Errorf("missing plugin: got %v, want *kms.ProviderNotFoundError", err)
	}
}

func TestWriteRecordFile(t *testing.T) {
	dir := t.TempDir()
	data := signedRecord(t, newSigner(t, Ed25519))
	if err := writeRecordFile(dir, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, recordFileName)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if err := writeRecordFile(dir, []byte("other")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second write: got %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Error("a refused write changed record.json")
	}
	if err := replaceRecordFile(dir, []byte("other")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "other" {
		t.Errorf("after replace: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only record.json", len(entries))
	}
	if err := writeRecordFile(filepath.Join(dir, "missing"), data); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestParentRecordHash(t *testing.T) {
	data := signedRecord(t, newSigner(t, Ed25519))
	got, err := ParentRecordHash(data)
	if err != nil {
		t.Fatal(err)
	}
	// record.json is canonical, so the hash is over its exact bytes, and
	// any equivalent encoding has the same hash.
	if want := canon.SHA256(data); got != want {
		t.Errorf("ParentRecordHash = %s, want %s", got, want)
	}
	if again, _ := ParentRecordHash(reformat(t, data)); again != got {
		t.Errorf("reformatted parent: %s, want %s", again, got)
	}
	if _, err := ParentRecordHash(mutate(t, data, "/iat", "1.5")); !errors.Is(err, ErrCanonicalization) {
		t.Errorf("non-integer: got %v, want ErrCanonicalization", err)
	}
	// And a child that names it is valid.
	o := testOptions(newSigner(t, Ed25519).Public())
	o.Delegation = &Delegation{ParentRecordHash: got, CredentialID: "delegation-1"}
	if _, err := Build(o); err != nil {
		t.Error(err)
	}
}

func TestDERToRaw(t *testing.T) {
	// r = 1, s = 2: each left-padded to 32 bytes.
	der := []byte{0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02}
	raw, err := derToRaw(P256, der)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64)
	want[31], want[63] = 1, 2
	if !bytes.Equal(raw, want) {
		t.Errorf("raw = %x", raw)
	}
	for _, bad := range [][]byte{
		append(bytes.Clone(der), 0),                      // trailing data
		{0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x02}, // r = 0
		{0x30, 0x06, 0x02, 0x01, 0xff, 0x02, 0x01, 0x02}, // r negative
		{0x30, 0x00},
	} {
		if _, err := derToRaw(P256, bad); err == nil {
			t.Errorf("derToRaw(%x) succeeded", bad)
		}
	}
}
