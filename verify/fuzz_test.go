package verify_test

import (
	"bytes"
	"context"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// consistent checks a report against the verdict rule and the error
// contract, whatever the input.
func consistent(t *testing.T, rep *verify.Report, err error) {
	t.Helper()
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	worst := verify.StatusPass
	for _, f := range rep.Findings {
		switch {
		case f.Status == verify.StatusFail:
			worst = verify.StatusFail
		case (f.Status == verify.StatusUnavailable || f.Status == verify.StatusUnsupported) && worst != verify.StatusFail:
			worst = verify.StatusUnavailable
		}
	}
	want := verify.Verified
	switch {
	case worst == verify.StatusFail:
		want = verify.Failed
	case worst == verify.StatusUnavailable || rep.TrustBasis != verify.TrustKey:
		want = verify.Incomplete
	}
	if len(rep.Omitted) == 0 && rep.Verdict != want {
		t.Fatalf("verdict %s, the findings give %s", rep.Verdict, want)
	}
	if (err == nil) != (rep.Verdict == verify.Verified) {
		t.Fatalf("verdict %s with error %v", rep.Verdict, err)
	}
}

func copyFS(fsys fstest.MapFS) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range fsys {
		out[k] = &fstest.MapFile{Data: v.Data, Mode: v.Mode}
	}
	return out
}

// FuzzVerifyRecord mutates record.json of a valid bundle. It never panics,
// and it is verified only when the mutation leaves the record's canonical
// form unchanged (the signature covers the RFC 8785 bytes, so whitespace
// and member order are not content; every content change is caught).
func FuzzVerifyRecord(f *testing.F) {
	base := verifytest.Standard(f).FS()
	orig := base[transcript.RecordFile].Data
	origCanon, err := canon.Canonicalize(orig, canon.PolicyV02)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(orig)
	f.Add(bytes.Replace(orig, []byte(`"iat":`), []byte(` "iat" : `), 1))
	f.Add(bytes.Replace(orig, []byte(`"signature":"`), []byte(`"signature":"A`), 1))
	f.Add(bytes.Replace(orig, []byte(`"call_count":3`), []byte(`"call_count":3.0`), 1))
	f.Add(bytes.Replace(orig, []byte(`"jwk":{`), []byte(`"jwk":{"d":"AA",`), 1))
	f.Add([]byte(`{}`))
	v := verifier(f, verify.Options{TrustedKey: verifytest.Key(f, 1).Public(), At: verifytest.At})
	f.Fuzz(func(t *testing.T, record []byte) {
		fsys := copyFS(base)
		fsys[transcript.RecordFile] = &fstest.MapFile{Data: record}
		rep, err := v.Bundle(context.Background(), fsys)
		consistent(t, rep, err)
		if rep.Verdict == verify.Verified {
			c, cerr := canon.Canonicalize(record, canon.PolicyV02)
			if cerr != nil || !bytes.Equal(c, origCanon) {
				t.Fatalf("verified a record with other content:\n%s", record)
			}
		}
	})
}

// FuzzVerifyTranscript mutates transcript.jsonl under the original signed
// record. It never panics, and it is verified only for the original bytes.
func FuzzVerifyTranscript(f *testing.F) {
	base := verifytest.Standard(f).FS()
	orig := base[transcript.TranscriptFile].Data
	f.Add(orig)
	lines := bytes.SplitAfter(orig, []byte("\n"))
	f.Add(bytes.Join(lines[:len(lines)-2], nil))
	f.Add(append(bytes.Clone(orig), '\n'))
	f.Add(bytes.TrimSuffix(orig, []byte("\n")))
	f.Add(bytes.Replace(orig, []byte(`"kind":"timeout"`), []byte(`"kind":"response"`), 1))
	v := verifier(f, verify.Options{TrustedKey: verifytest.Key(f, 1).Public(), At: verifytest.At})
	f.Fuzz(func(t *testing.T, tr []byte) {
		fsys := copyFS(base)
		fsys[transcript.TranscriptFile] = &fstest.MapFile{Data: tr}
		rep, err := v.Bundle(context.Background(), fsys)
		consistent(t, rep, err)
		if rep.Verdict == verify.Verified && !bytes.Equal(tr, orig) {
			t.Fatalf("verified a mutated transcript:\n%s", tr)
		}
	})
}

// FuzzVerifyLines mutates the transcript and then signs a record over the
// mutated lines, so the mutation reaches the line, history, snapshot and
// payload checks instead of stopping at the commitment. It never panics and
// its reports obey the verdict rule; the mutated history may legitimately
// verify.
func FuzzVerifyLines(f *testing.F) {
	b := verifytest.Standard(f)
	base := b.FS()
	key := verifytest.Key(f, 1)
	f.Add(base[transcript.TranscriptFile].Data)
	f.Add(bytes.Replace(base[transcript.TranscriptFile].Data, []byte(`"retry_of":"a2"`), []byte(`"retry_of":"a3"`), 1))
	f.Add(bytes.Replace(base[transcript.TranscriptFile].Data, []byte(`"attempt_id":"a3"`), []byte(`"attempt_id":"a1"`), 2))
	v := verifier(f, verify.Options{TrustedKey: key.Public(), At: verifytest.At})
	f.Fuzz(func(t *testing.T, tr []byte) {
		lines := bytes.Split(bytes.TrimSuffix(tr, []byte("\n")), []byte("\n"))
		fsys := copyFS(base)
		fsys[transcript.TranscriptFile] = &fstest.MapFile{Data: tr}
		fsys[transcript.RecordFile] = &fstest.MapFile{Data: verifytest.SignRecord(t, sign.RecordOptions{IssuedAt: verifytest.Issued, Key: key.Public(),
			Digest: canon.SHA256([]byte("x")), TranscriptHash: transcript.Root(lines), CallCount: int64(bytes.Count(tr, []byte(`"type":"attempt"`)))}, key)}
		rep, err := v.Bundle(context.Background(), fsys)
		consistent(t, rep, err)
	})
}

// FuzzVerifyProof mutates an inclusion proof. It never panics, and when no
// inclusion_proof_failed is reported every disclosed line is the
// transcript's line at that index.
func FuzzVerifyProof(f *testing.F) {
	base := verifytest.Standard(f).FS()
	tr := base[transcript.TranscriptFile].Data
	lines := bytes.Split(bytes.TrimSuffix(tr, []byte("\n")), []byte("\n"))
	p, err := verify.ProveAttempt(bytes.NewReader(tr), "a3")
	if err != nil {
		f.Fatal(err)
	}
	proof, err := p.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(proof)
	f.Add(bytes.Replace(proof, []byte(`"index":6`), []byte(`"index":5`), 1))
	record := base[transcript.RecordFile].Data
	v := verifier(f, verify.Options{TrustedKey: verifytest.Key(f, 1).Public(), At: verifytest.At})
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := v.Proof(context.Background(), record, data)
		consistent(t, rep, err)
		if rep.Verdict == verify.Verified && (!rep.Has(verify.CodeInclusionProofOK) || !rep.Has(verify.CodeProofScopeLimited)) {
			t.Fatal("a proof verified without a proven line and its scope statement")
		}
		if rep.Has(verify.CodeInclusionProofFailed) {
			return
		}
		q, err := transcript.ParseProof(data)
		if err != nil {
			t.Fatalf("no inclusion_proof_failed for an unparseable proof: %v", err)
		}
		for _, e := range q.Entries {
			if e.Index >= int64(len(lines)) || e.Line != string(lines[e.Index]) {
				t.Fatalf("line %d accepted but not the transcript's: %s", e.Index, e.Line)
			}
		}
	})
}
