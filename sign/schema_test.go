package sign

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// schemaMembers are records with one optional member, or one form of a
// member, that the published v0.2 schema (and the newer spec text) allows.
func schemaMembers() []struct{ name, ptr, raw string } {
	d := canon.SHA256([]byte("x"))
	return []struct{ name, ptr, raw string }{
		{"appraisal.policy_ref", "/appraisal/policy_ref", `"https://example.com/policy/7"`},
		{"appraisal.timestamp", "/appraisal/timestamp", `1785000000`},
		{"appraisal.timestamp zero", "/appraisal/timestamp", `0`},
		{"appraisal.provenance_depth_verified surface", "/appraisal/provenance_depth_verified", `"surface"`},
		{"appraisal.provenance_depth_verified builder", "/appraisal/provenance_depth_verified", `"builder"`},
		{"appraisal.provenance_depth_verified transitive", "/appraisal/provenance_depth_verified", `"transitive"`},
		{"build_provenance.provenance_depth surface", "/build_provenance/provenance_depth", `"surface"`},
		{"build_provenance.provenance_depth builder", "/build_provenance/provenance_depth", `"builder"`},
		{"build_provenance.provenance_depth transitive", "/build_provenance/provenance_depth", `"transitive"`},
		{"build_provenance.builder", "/build_provenance/builder", `"github-actions"`},
		{"build_provenance.provenance_uri", "/build_provenance/provenance_uri", `"https://example.com/prov"`},
		{"model.version", "/model/version", `"4.1"`},
		{"model.weights_digest sha384", "/model/weights_digest", `"sha384:` + strings.Repeat("ab", 48) + `"`},
		{"model.aibom_uri", "/model/aibom_uri", `"https://example.com/aibom.json"`},
		{"runtime.rim_uri", "/runtime/rim_uri", `"https://example.com/rim"`},
		{"runtime.firmware_version", "/runtime/firmware_version", `"1.2"`},
		{"policy.version", "/policy/version", `"7"`},
		{"policy.policy_uri", "/policy/policy_uri", `"urn:example:policy"`},
		{"tool_transcript.transcript_uri", "/tool_transcript/transcript_uri", `"https://example.com/t.jsonl"`},
		{"delegation", "/delegation", `{"parent_record_hash":"` + d + `","credential_id":"c-1"}`},
		{"origin self", "/origin", `{"kind":"self","producer":"tracectl"}`},
		{"origin self on hardware", "/origin", `{"kind":"self","producer":"tracectl"}`},
		{"origin third-party-control-plane", "/origin", `{"kind":"third-party-control-plane","producer":"gw","source_event_id":"ev-9","ingested_at":1785000001}`},
		{"origin log-import", "/origin", `{"kind":"log-import","producer":"siem"}`},
		{"transparency", "/transparency", `"https://log.example.com/e/1"`},
		{"references registered rels", "/references", `[{"rel":"authorized-intent","id":"i","resolver":"r"},{"rel":"approval-outcome","id":"i","resolver":"r"},{"rel":"behavior-trace","id":"i","resolver":"r"},{"rel":"condition-appraisal","id":"i","resolver":"r"},{"rel":"observed-effect","id":"i","resolver":"r","retention":"P7D","digest":"` + d + `"}]`},
		{"references extension rel", "/references", `[{"rel":"https://example.com/rel/x","id":"i","resolver":"r"}]`},
		{"references empty", "/references", `[]`},
		{"reproducibility", "/reproducibility", `{"function":"f","code_identity":"c","input_closure":[],"transcript_digest":"` + d + `"}`},
		{"reproducibility full", "/reproducibility", `{"function":"f","code_identity":"c","code_resolver":"oci://r","input_closure":[{"id":"a","digest":"` + d + `","resolver":"r"}],"transcript_digest":"` + d + `"}`},
	}
}

// TestSchemaMembersSigned: a record with each optional member or form of
// the published schema, honestly signed, parses, re-encodes to its own
// canonical bytes and verifies, with every algorithm.
func TestSchemaMembersSigned(t *testing.T) {
	for _, alg := range algs {
		s := newSigner(t, alg)
		base := unsignedRecord(t)
		base = mutate(t, base, "/cnf/jwk", mustJWK(t, s.Public()))
		for _, m := range schemaMembers() {
			t.Run(string(alg)+" "+m.name, func(t *testing.T) {
				in := mutate(t, base, m.ptr, m.raw)
				if m.name == "origin self on hardware" {
					in = mutate(t, in, "/runtime/platform", `"intel-tdx"`)
				}
				rec, err := ParseRecord(in)
				if err != nil {
					t.Fatalf("ParseRecord: %v", err)
				}
				data, err := Sign(rec, s)
				if err != nil {
					t.Fatalf("Sign: %v", err)
				}
				if err := parseAndVerify(data, s.Public()); err != nil {
					t.Fatalf("verify: %v", err)
				}
				want, _ := canon.Canonicalize(in, canon.PolicyV02)
				got, _ := canon.Marshal(rec)
				if string(got) != string(want) {
					t.Errorf("re-encoded\n%s\nwant\n%s", got, want)
				}
			})
		}
	}
}

// TestSchemaRefusals: each member of the schema with a wrong type, enum
// value or missing required sub-member is refused at its pointer, and the
// origin MUST is its own error.
func TestSchemaRefusals(t *testing.T) {
	base := unsignedRecord(t)
	d := canon.SHA256([]byte("x"))
	cases := []struct {
		name, ptr, raw string
		want           error
		pointer        string
	}{
		{"provenance_depth integer", "/build_provenance/provenance_depth", `2`, ErrSchemaInvalid, "/build_provenance/provenance_depth"},
		{"provenance_depth unknown", "/build_provenance/provenance_depth", `"deep"`, ErrSchemaInvalid, "/build_provenance/provenance_depth"},
		{"provenance_depth_verified unknown", "/appraisal/provenance_depth_verified", `"all"`, ErrSchemaInvalid, "/appraisal/provenance_depth_verified"},
		{"policy_ref not a URI", "/appraisal/policy_ref", `"policy 7"`, ErrSchemaInvalid, "/appraisal/policy_ref"},
		{"timestamp a string", "/appraisal/timestamp", `"1785000000"`, ErrSchemaInvalid, "/appraisal/timestamp"},
		{"appraisal.method (not in the schema read)", "/appraisal/method", `"x"`, ErrSchemaInvalid, "/appraisal/method"},
		{"origin a string", "/origin", `"gateway-7"`, ErrSchemaInvalid, "/origin"},
		{"origin kind unknown", "/origin", `{"kind":"proxy","producer":"p"}`, ErrSchemaInvalid, "/origin/kind"},
		{"origin producer empty", "/origin", `{"kind":"self","producer":""}`, ErrSchemaInvalid, "/origin/producer"},
		{"origin producer missing", "/origin", `{"kind":"self"}`, ErrSchemaInvalid, "/origin/producer"},
		{"origin source_event_id empty", "/origin", `{"kind":"self","producer":"p","source_event_id":""}`, ErrSchemaInvalid, "/origin/source_event_id"},
		{"origin ingested_at too early", "/origin", `{"kind":"self","producer":"p","ingested_at":1699999999}`, ErrSchemaInvalid, "/origin/ingested_at"},
		{"origin unknown member", "/origin", `{"kind":"self","producer":"p","x":1}`, ErrSchemaInvalid, "/origin/x"},
		{"credential_id empty", "/delegation", `{"parent_record_hash":"` + d + `","credential_id":""}`, ErrSchemaInvalid, "/delegation/credential_id"},
		{"references not an array", "/references", `{}`, ErrSchemaInvalid, "/references"},
		{"references rel unknown", "/references", `[{"rel":"whatever","id":"i","resolver":"r"}]`, ErrSchemaInvalid, "/references/0/rel"},
		{"references id missing", "/references", `[{"rel":"behavior-trace","resolver":"r"}]`, ErrSchemaInvalid, "/references/0/id"},
		{"references bad digest", "/references", `[{"rel":"behavior-trace","id":"i","resolver":"r","digest":"md5:x"}]`, ErrSchemaInvalid, "/references/0/digest"},
		{"reproducibility closure missing", "/reproducibility", `{"function":"f","code_identity":"c","transcript_digest":"` + d + `"}`, ErrSchemaInvalid, "/reproducibility/input_closure"},
		{"reproducibility closure entry unknown member", "/reproducibility", `{"function":"f","code_identity":"c","input_closure":[{"id":"a","digest":"` + d + `","resolver":"r","x":1}],"transcript_digest":"` + d + `"}`, ErrSchemaInvalid, "/reproducibility/input_closure/0/x"},
		{"origin log-import on hardware", "/origin", `{"kind":"log-import","producer":"siem"}`, ErrOriginPlatform, ""},
		{"origin third-party on hardware", "/origin", `{"kind":"third-party-control-plane","producer":"gw"}`, ErrOriginPlatform, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := mutate(t, base, c.ptr, c.raw)
			if c.want == ErrOriginPlatform {
				in = mutate(t, in, "/runtime/platform", `"amd-sev-snp"`)
			}
			_, err := ParseRecord(in)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var se *ShapeError
			if c.pointer == "" {
				if errors.As(err, &se) {
					t.Errorf("a shape error: %v", err)
				}
				return
			}
			if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Pointer != c.pointer {
				t.Errorf("problems %v, want one at %s", err, c.pointer)
			}
		})
	}
}

// TestShapeTableInSpec keeps spec/signing.md's schema table equal to the
// shape ParseRecord enforces, row by row.
func TestShapeTableInSpec(t *testing.T) {
	data, err := os.ReadFile("../spec/signing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n### Schema table\n")
	if !ok {
		t.Fatal("spec/signing.md has no \"### Schema table\" section")
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (yes|no) \\| (.+) \\|$")
	var got []shapeRow
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got = append(got, shapeRow{Pointer: m[1], Required: m[2] == "yes", Rule: m[3]})
	}
	want := shapeTable()
	var text strings.Builder
	for _, r := range want {
		req := "no"
		if r.Required {
			req = "yes"
		}
		text.WriteString("| `" + r.Pointer + "` | " + req + " | " + r.Rule + " |\n")
	}
	if len(got) != len(want) {
		t.Fatalf("spec has %d rows, the shape %d; the table should read:\n%s", len(got), len(want), text.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: spec %+v, shape %+v; the table should read:\n%s", i, got[i], want[i], text.String())
			return
		}
	}
}

// TestEnvelopeNotARecord: a cMCP RuntimeClaim is refused as an envelope,
// not as a record whose eat_profile is absent; the profile is quoted once.
func TestEnvelopeNotARecord(t *testing.T) {
	env := []byte(`{"cmcp_version":"0.1","signature":"AAAA","trace":{"eat_profile":"` + Profile + `"}}`)
	_, err := ParseRecord(env)
	if !errors.Is(err, ErrProfileUnsupported) || !strings.Contains(err.Error(), "envelope not supported") || strings.Contains(err.Error(), "absent") {
		t.Errorf("envelope: %v", err)
	}
	_, err = ParseRecord(mutate(t, unsignedRecord(t), "/eat_profile", `"tag:agentrust-io.com,2025:trace-v0.1"`))
	if !errors.Is(err, ErrProfileUnsupported) || !strings.Contains(err.Error(), `eat_profile "tag:agentrust-io.com,2025:trace-v0.1"`) || strings.Contains(err.Error(), `\"`) {
		t.Errorf("v0.1: %v (want the profile quoted once)", err)
	}
}
