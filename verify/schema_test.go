package verify_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/verify"
)

func i64(n int64) *int64 { return &n }

// TestRecordSchemaMembers: a standard bundle whose record carries one
// optional member or origin form of the published v0.2 schema (or the
// newer text's references and reproducibility), honestly signed, is
// verified; the origin MUST broken is failed with origin_platform_invalid
// and nothing else in the record judged.
func TestRecordSchemaMembers(t *testing.T) {
	d := canon.SHA256([]byte("x"))
	cases := []struct {
		name string
		edit func(*sign.Record)
		want verify.Verdict
		code verify.Code
	}{
		{"appraisal.policy_ref", func(r *sign.Record) { r.Appraisal.PolicyRef = "https://example.com/policy/7" }, verify.Verified, ""},
		{"appraisal.timestamp", func(r *sign.Record) { r.Appraisal.Timestamp = i64(1785000000) }, verify.Verified, ""},
		{"appraisal.provenance_depth_verified", func(r *sign.Record) { r.Appraisal.ProvenanceDepthVerified = sign.DepthTransitive }, verify.Verified, ""},
		{"build_provenance.provenance_depth", func(r *sign.Record) { r.BuildProvenance.ProvenanceDepth = sign.DepthBuilder }, verify.Verified, ""},
		{"origin self", func(r *sign.Record) { r.Origin = &sign.Origin{Kind: sign.OriginSelf, Producer: "tracectl"} }, verify.Verified, ""},
		{"origin self on tpm2", func(r *sign.Record) {
			r.Origin = &sign.Origin{Kind: sign.OriginSelf, Producer: "tracectl"}
			r.Runtime.Platform = "tpm2"
		}, verify.Verified, ""},
		{"origin third-party-control-plane", func(r *sign.Record) {
			r.Origin = &sign.Origin{Kind: sign.OriginThirdPartyControlPlane, Producer: "gw", SourceEventID: "ev-1", IngestedAt: i64(1785000001)}
		}, verify.Verified, ""},
		{"origin log-import", func(r *sign.Record) { r.Origin = &sign.Origin{Kind: sign.OriginLogImport, Producer: "siem"} }, verify.Verified, ""},
		{"transparency", func(r *sign.Record) { r.Transparency = "https://log.example.com/e/1" }, verify.Verified, ""},
		{"references", func(r *sign.Record) {
			r.References = &[]sign.Reference{{Rel: "behavior-trace", ID: "t-1", Resolver: "https://r.example.com/", Retention: "P30D", Digest: d}}
		}, verify.Verified, ""},
		{"reproducibility", func(r *sign.Record) {
			r.Reproducibility = &sign.Reproducibility{Function: "f", CodeIdentity: d, InputClosure: []sign.InputEntry{{ID: "in", Digest: d, Resolver: "r"}}, TranscriptDigest: d}
		}, verify.Verified, ""},
		{"origin log-import on tpm2 (MUST broken)", func(r *sign.Record) {
			r.Origin = &sign.Origin{Kind: sign.OriginLogImport, Producer: "siem"}
			r.Runtime.Platform = "tpm2"
		}, verify.Failed, verify.CodeOriginPlatform},
		{"origin third-party on aws-nitro (MUST broken)", func(r *sign.Record) {
			r.Origin = &sign.Origin{Kind: sign.OriginThirdPartyControlPlane, Producer: "gw"}
			r.Runtime.Platform = "aws-nitro"
		}, verify.Failed, verify.CodeOriginPlatform},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := verifytest.Standard(t)
			b.RecordEdit, b.Lie = tc.edit, tc.code != ""
			rep, codes := verdictCodes(t, b.FS(), trusted(t))
			if rep.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s\n%s", rep.Verdict, tc.want, dump(rep))
			}
			if tc.code != "" && !slices.Equal(codes, []verify.Code{tc.code}) {
				t.Errorf("codes %v, want [%s]", codes, tc.code)
			}
		})
	}
}

// TestAcceptProfiles: the accepted set is reported with the record's
// profile; a record outside it is profile_unsupported, as is an accepted
// profile whose shape this verifier does not implement; an empty set is
// refused before any evidence is read.
func TestAcceptProfiles(t *testing.T) {
	const v01 = "tag:agentrust-io.com,2025:trace-v0.1"
	fsys := verifytest.Standard(t).FS()
	cases := []struct {
		name   string
		accept []string
		want   verify.Verdict
	}{
		{"default", nil, verify.Verified},
		{"v0.2 named", []string{sign.Profile}, verify.Verified},
		{"v0.2 and another", []string{sign.Profile, "urn:example:other"}, verify.Verified},
		{"v0.1 only", []string{v01}, verify.Failed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := trusted(t)
			o.AcceptProfiles = tc.accept
			rep, codes := verdictCodes(t, fsys, o)
			if rep.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s\n%s", rep.Verdict, tc.want, dump(rep))
			}
			want := tc.accept
			if want == nil {
				want = []string{sign.Profile}
			}
			if !slices.Equal(rep.AcceptedProfiles, slices.Sorted(slices.Values(want))) || rep.Profile != sign.Profile {
				t.Errorf("profile %q, accepted %q", rep.Profile, rep.AcceptedProfiles)
			}
			if tc.want == verify.Failed && !slices.Equal(codes, []verify.Code{verify.CodeProfileUnsupported}) {
				t.Errorf("codes %v", codes)
			}
		})
	}
	t.Run("accepted but not implemented", func(t *testing.T) {
		rec := verifytest.Standard(t).FS()["record.json"].Data
		other := []byte(string(rec))
		other = []byte(strings.Replace(string(other), sign.Profile, v01, 1))
		o := trusted(t)
		o.AcceptProfiles = []string{sign.Profile, v01}
		rep, _ := verifier(t, o).Record(context.Background(), other)
		if rep.Verdict != verify.Failed || !rep.Has(verify.CodeProfileUnsupported) || rep.Profile != v01 {
			t.Fatalf("verdict %s profile %q\n%s", rep.Verdict, rep.Profile, dump(rep))
		}
		f := rep.Find(verify.CodeProfileUnsupported)[0]
		if want := `eat_profile "` + v01 + `"`; !strings.Contains(f.Detail, want) || strings.Contains(f.Detail, `\"`) {
			t.Errorf("detail %q: want the profile quoted once (%s)", f.Detail, want)
		}
	})
	t.Run("empty set refused", func(t *testing.T) {
		o := trusted(t)
		o.AcceptProfiles = []string{}
		if _, err := verify.New(o); !errors.Is(err, verify.ErrOptions) {
			t.Fatalf("New: %v, want ErrOptions", err)
		}
	})
}

// TestFreshnessForAuditors: a record checked a month later is stale (the
// detail says it is old, not tampered, and how to check it: --at issued or
// --max-age); AtIssued verifies it as of its own iat; At and AtIssued
// together are refused.
func TestFreshnessForAuditors(t *testing.T) {
	fsys := verifytest.Standard(t).FS()
	late := trusted(t)
	late.At = verifytest.At.Add(30 * 24 * time.Hour)
	rep, codes := verdictCodes(t, fsys, late)
	if rep.Verdict != verify.Failed || !slices.Equal(codes, []verify.Code{verify.CodeRecordStale}) {
		t.Fatalf("verdict %s codes %v", rep.Verdict, codes)
	}
	d := rep.Find(verify.CodeRecordStale)[0].Detail
	for _, want := range []string{"not that it was tampered with", "--at issued", "--max-age (for example 31d"} {
		if !strings.Contains(d, want) {
			t.Errorf("stale detail %q lacks %q", d, want)
		}
	}
	issued := verify.Options{TrustedKey: verifytest.Key(t, 1).Public(), AtIssued: true}
	v, err := verify.New(issued)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = v.Bundle(context.Background(), fsys)
	checkErr(t, rep, err)
	codes = problems(rep)
	if rep.Verdict != verify.Verified || len(codes) != 0 || !rep.ReferenceTime.Equal(verifytest.Issued) {
		t.Fatalf("AtIssued: verdict %s codes %v reference %s, want verified at %s", rep.Verdict, codes, rep.ReferenceTime, verifytest.Issued)
	}
	both := issued
	both.At = verifytest.At
	if _, err := verify.New(both); !errors.Is(err, verify.ErrOptions) {
		t.Errorf("At with AtIssued: %v, want ErrOptions", err)
	}
}

// TestOversizedRecord: a record.json over sign.MaxRecordBytes is not a
// record to judge: no report, ErrTooLarge (the CLI's exit 2); at the limit
// it is parsed (and refused as a record by its shape).
func TestOversizedRecord(t *testing.T) {
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{{sign.MaxRecordBytes, false}, {sign.MaxRecordBytes + 1, true}} {
		fsys := verifytest.Standard(t).FS()
		fsys["record.json"].Data = []byte(`{"x":"` + strings.Repeat("a", tc.size-8) + `"}`)
		rep, err := verifier(t, trusted(t)).Bundle(context.Background(), fsys)
		if got := errors.Is(err, verify.ErrTooLarge) && rep == nil; got != tc.wantErr {
			t.Errorf("size %d: report %v, error %v; want ErrTooLarge %v", len(fsys["record.json"].Data), rep != nil, err, tc.wantErr)
		}
	}
}
