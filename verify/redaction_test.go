package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// secretSamples are credentials of the built-in classes, as an agent might
// pass them in arguments or a server return them (made-up values of the
// real shapes).
var secretSamples = []string{
	"ghp_" + strings.Repeat("aB3dE6gH9j", 3) + "kLmNoP",
	"github_pat_11ABCDEFG0" + strings.Repeat("x1Y2z3", 10),
	"glpat-" + "Ab3De6Gh9Jk2Mn5Pq8St",
	"sk-proj-" + strings.Repeat("Ab3De6Gh9J", 5),
	"sk-ant-api03-" + strings.Repeat("Ab3De6Gh9J", 9) + "-AAAA",
	"AKIAIOSFODNN7EXAMPLE",
	"AIzaSyA-" + strings.Repeat("b3De6Gh9J", 3) + "kLmNo",
	"xoxb-123456789012-1234567890123-" + strings.Repeat("aB3dE6gH", 3),
	"sk_live_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1),
	"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
	"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----",
}

// TestRedactedBundle: secrets of every built-in class, in arguments,
// results and _meta, reach no file of the bundle; the bundle verifies, with
// one payload_redacted finding; a forged redaction list fails.
func TestRedactedBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	r := openRecorder(t, dir, transcript.DurabilityStrict)
	ctx := context.Background()
	recordSnapshot(t, r, 3, 3)
	for i, s := range secretSamples {
		q := fmt.Sprintf("%q", s)
		req := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"tool_1","arguments":{"query":"weather","note":%s},"_meta":{"x-auth":%s}}}`+"\n", i+1, q, q)
		h, err := r.Attempt(ctx, producer.Call{Line: req})
		if err != nil {
			t.Fatal(err)
		}
		resp := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%s}],"structuredContent":{"password":"hunter2"}}}`+"\n", i+1, q)
		if err := h.Response(resp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Seal(ctx, recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	// No secret, nor its JSON-escaped form, in any file of the bundle.
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range append(slices.Clone(secretSamples), "hunter2") {
			esc := strings.Trim(fmt.Sprintf("%q", s), `"`)
			for _, form := range []string{s, esc, s[:min(len(s), 24)]} {
				if bytes.Contains(data, []byte(form)) {
					t.Errorf("%s holds a secret in clear: %.24q", filepath.Base(p), form)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
	red := rep.Find(verify.CodePayloadRedacted)
	if rep.Verdict != verify.Verified || len(codes) != 0 || len(red) != 1 {
		t.Fatalf("verdict %s, problems %v, payload_redacted %v\n%s", rep.Verdict, codes, red, dump(rep))
	}
	if want := fmt.Sprintf("%d payloads retained redacted", 2*len(secretSamples)); !strings.HasPrefix(red[0].Detail, want) {
		t.Errorf("detail %q, want prefix %q", red[0].Detail, want)
	}

	// A forged list: the transcript names another pointer for one value
	// (re-signed, so only the list lies). The copy no longer matches it.
	tr := filepath.Join(dir, transcript.TranscriptFile)
	data, _ := os.ReadFile(tr)
	forged := bytes.Replace(data, []byte(`"pointer":"/params/arguments/note"`), []byte(`"pointer":"/params/arguments/query"`), 1)
	if bytes.Equal(forged, data) {
		t.Fatal("no redaction of /params/arguments/note in the transcript")
	}
	if err := os.WriteFile(tr, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, codes = verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Failed || !slices.Contains(codes, verify.CodeEvidenceMismatch) {
		t.Errorf("a forged redaction list: verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
}

// TestNoRedaction: with redaction off the exact bytes are retained (the
// secret is in the pack), the header declares no policy, and no
// payload_redacted finding appears.
func TestNoRedaction(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	r, err := producer.Open(dir, producer.Options{Clock: clock(verifytest.Issued), Entropy: &counterEntropy{}, NoRedaction: true,
		Producer: transcript.Producer{Name: "verify-test", Version: "0"}, Server: transcript.Server{Transport: transcript.TransportInProcess}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Attempt(context.Background(), producer.Call{Line: call(1, "t", fmt.Sprintf(`{"k":%q}`, secretSamples[0]))}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seal(context.Background(), recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	pack, _ := os.ReadFile(filepath.Join(dir, transcript.PackFile))
	head, _ := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if !bytes.Contains(pack, []byte(secretSamples[0])) || bytes.Contains(head, []byte(`"redaction"`)) {
		t.Errorf("NoRedaction: the exact bytes are not retained, or a policy is declared")
	}
	if rep, _ := verdictCodes(t, os.DirFS(dir), trusted(t)); rep.Has(verify.CodePayloadRedacted) {
		t.Errorf("payload_redacted without redaction")
	}
}

// TestUnredactableWithheldVerify: a payload the declared redaction policy
// withheld (it holds a secret that cannot be hidden in a checkable form)
// keeps the verdict incomplete, named as withheld, and is accepted with
// AcceptWithheld.
func TestUnredactableWithheldVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	r := openRecorder(t, dir, transcript.DurabilityStrict)
	recordSnapshot(t, r, 3, 3)
	h, err := r.Attempt(context.Background(), producer.Call{Line: call(1, "tool_1", `{"`+strings.Repeat("n", 2000)+`":{"password":"hunter2"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Response(answer(1, "ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seal(context.Background(), recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
	un := rep.Find(verify.CodeEvidenceUnavailable)
	if rep.Verdict != verify.Incomplete || !slices.Equal(codes, []verify.Code{verify.CodeEvidenceUnavailable}) || len(un) != 1 || !strings.Contains(un[0].Detail, "withheld by the declared redaction policy") {
		t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
	o := trusted(t)
	o.AcceptWithheld = true
	if rep, codes := verdictCodes(t, os.DirFS(dir), o); rep.Verdict != verify.Verified || !rep.Has(verify.CodeWithheldAccepted) {
		t.Errorf("accepted: verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
}
