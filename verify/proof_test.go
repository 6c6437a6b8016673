package verify_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

func proveFS(t *testing.T, files map[string][]byte, attempt string) []byte {
	t.Helper()
	p, err := verify.ProveAttempt(bytes.NewReader(files[transcript.TranscriptFile]), attempt)
	if err != nil {
		t.Fatal(err)
	}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func bundleFiles(b *verifytest.Builder) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range b.FS() {
		out[k] = v.Data
	}
	return out
}

func verifyProof(t *testing.T, record, proof []byte, o verify.Options) (*verify.Report, []verify.Code) {
	t.Helper()
	rep, err := verifier(t, o).Proof(context.Background(), record, proof)
	checkErr(t, rep, err)
	return rep, problems(rep)
}

func TestProof(t *testing.T) {
	files := bundleFiles(verifytest.Standard(t))
	record := files[transcript.RecordFile]

	t.Run("sound", func(t *testing.T) {
		// A valid proof is verified: withholding the other lines and the
		// payload bytes is what a proof is for, and its scope finding says
		// what it does not show.
		rep, codes := verifyProof(t, record, proveFS(t, files, "a3"), trusted(t))
		if rep.Verdict != verify.Verified || len(codes) != 0 {
			t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
		}
		if sc := rep.Find(verify.CodeProofScopeLimited); len(sc) != 1 || !strings.Contains(sc[0].Detail, "3 payload and manifest commitments, disclosed by digest only") {
			t.Errorf("the scope finding does not say what the proof withholds\n%s", dump(rep))
		}
		if n := len(rep.Find(verify.CodeInclusionProofOK)); n != 5 {
			t.Errorf("%d lines proven, want 5 (header, snapshot, attempt, response, seal)\n%s", n, dump(rep))
		}
		if rep.Counts.Attempts != 1 || rep.Counts.Responses != 1 || !rep.Has(verify.CodeProofScopeLimited) || !rep.Has(verify.CodeHistoryConsistent) {
			t.Errorf("counts %+v\n%s", rep.Counts, dump(rep))
		}
		if !strings.HasPrefix(rep.Root, "sha256:") {
			t.Errorf("root %q", rep.Root)
		}
	})

	t.Run("outcome lines left out", func(t *testing.T) {
		// The holder of a disclosure drops an attempt's response line from
		// the proof (each entry proves itself, so the rest still
		// verifies): the report names what was left out instead of calling
		// the outcome unknown. With an unknown attempt elsewhere the seal
		// cannot say which outcome was left out; with every other attempt
		// answered it says it was a response.
		allAnswered := verifytest.New(t)
		ref := allAnswered.Snapshot("snap-1", 2, 3)
		for _, id := range []string{"a1", "a2", "a3"} {
			allAnswered.Attempt(id, ref)
			allAnswered.Respond(id, transcript.ObsResponse)
		}
		allAnswered.Seal()
		for _, tc := range []struct {
			name  string
			files map[string][]byte
			want  string
		}{
			{"standard", files, "its outcome lines were withheld from the disclosure"},
			{"all answered", bundleFiles(allAnswered), "its response line was withheld from the disclosure"},
		} {
			p, err := transcript.ParseProof(proveFS(t, tc.files, "a3"))
			if err != nil {
				t.Fatal(err)
			}
			kept := p.Entries[:0]
			for _, e := range p.Entries {
				if !strings.Contains(e.Line, `"type":"observation"`) {
					kept = append(kept, e)
				}
			}
			if len(kept) != len(p.Entries)-1 {
				t.Fatalf("%s: %d of %d entries kept, want one dropped", tc.name, len(kept), len(p.Entries))
			}
			p.Entries = kept
			data, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			rep, codes := verifyProof(t, tc.files[transcript.RecordFile], data, trusted(t))
			if rep.Verdict != verify.Verified || len(codes) != 0 || rep.Has(verify.CodeOutcomeUnknown) {
				t.Fatalf("%s: verdict %s, codes %v\n%s", tc.name, rep.Verdict, codes, dump(rep))
			}
			f := rep.Find(verify.CodeOutcomeUndisclosed)
			if len(f) != 1 || f[0].Subject != "attempt a3" || !strings.Contains(f[0].Detail, tc.want) {
				t.Errorf("%s: outcome_not_disclosed %+v, want %q\n%s", tc.name, f, tc.want, dump(rep))
			}
		}
	})

	t.Run("unknown stays unknown as disclosed", func(t *testing.T) {
		rep, _ := verifyProof(t, record, proveFS(t, files, "a2"), trusted(t))
		unk := rep.Find(verify.CodeOutcomeUnknown)
		if len(unk) != 1 || !strings.HasPrefix(unk[0].Detail, "as disclosed") {
			t.Errorf("outcome_unknown %+v", unk)
		}
	})

	t.Run("a changed disclosed line", func(t *testing.T) {
		proof := proveFS(t, files, "a3")
		// The response's at_ms, one digit changed: still a valid line,
		// no longer the one the record signs.
		p, err := transcript.ParseProof(proof)
		if err != nil {
			t.Fatal(err)
		}
		l := []byte(p.Entries[3].Line)
		i := bytes.Index(l, []byte(`"at_ms":`)) + len(`"at_ms":`) + 3
		l[i] = "0123456789"[(l[i]-'0'+1)%10]
		p.Entries[3].Line = string(l)
		data, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rep, codes := verifyProof(t, record, data, trusted(t))
		if rep.Verdict != verify.Failed || !slices.Equal(codes, []verify.Code{verify.CodeInclusionProofFailed}) {
			t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
		}
	})

	t.Run("another record", func(t *testing.T) {
		ob := verifytest.New(t)
		ob.Attempt("a1", ob.Snapshot("snap-1", 1, 1))
		ob.Seal()
		other := bundleFiles(ob)
		rep, codes := verifyProof(t, other[transcript.RecordFile], proveFS(t, files, "a3"), trusted(t))
		if rep.Verdict != verify.Failed || !slices.Equal(codes, []verify.Code{verify.CodeInclusionProofFailed}) {
			t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
		}
	})

	t.Run("a replaced outcome among the disclosed lines", func(t *testing.T) {
		b := verifytest.New(t)
		ref := b.Snapshot("snap-1", 2, 2)
		b.Attempt("a1", ref)
		b.Respond("a1", transcript.ObsResponse)
		b.Respond("a1", transcript.ObsResponse)
		b.Seal()
		f := bundleFiles(b)
		rep, codes := verifyProof(t, f[transcript.RecordFile], proveFS(t, f, "a1"), trusted(t))
		if rep.Verdict != verify.Failed || !slices.Equal(codes, []verify.Code{verify.CodeHistoryConflict}) {
			t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
		}
	})

	t.Run("call_count against the disclosed seal", func(t *testing.T) {
		b := verifytest.Standard(t)
		b.RecordOpts = func(o *sign.RecordOptions) { o.CallCount = 7 }
		f := bundleFiles(b)
		rep, codes := verifyProof(t, f[transcript.RecordFile], proveFS(t, f, "a1"), trusted(t))
		if !slices.Contains(codes, verify.CodeCallCountMismatch) {
			t.Fatalf("codes %v\n%s", codes, dump(rep))
		}
	})

	t.Run("not a proof", func(t *testing.T) {
		rep, codes := verifyProof(t, record, []byte(`{"format":"x"}`), trusted(t))
		if !slices.Equal(codes, []verify.Code{verify.CodeInclusionProofFailed}) {
			t.Fatalf("codes %v\n%s", codes, dump(rep))
		}
	})

	t.Run("unknown attempt", func(t *testing.T) {
		_, err := verify.ProveAttempt(bytes.NewReader(files[transcript.TranscriptFile]), "nope")
		if !errors.Is(err, verify.ErrAttemptNotFound) {
			t.Fatalf("error %v", err)
		}
	})
}

// TestRecordAlone: a record that commits to a transcript is incomplete
// without it; everything else about the record is checked.
func TestRecordAlone(t *testing.T) {
	files := bundleFiles(verifytest.Standard(t))
	rep, err := verifier(t, trusted(t)).Record(context.Background(), files[transcript.RecordFile])
	checkErr(t, rep, err)
	if rep.Verdict != verify.Incomplete || !slices.Equal(problems(rep), []verify.Code{verify.CodeEvidenceUnavailable}) || rep.TrustBasis != verify.TrustKey {
		t.Fatalf("verdict %s, trust %s, codes %v\n%s", rep.Verdict, rep.TrustBasis, problems(rep), dump(rep))
	}
	rep, err = verifier(t, trusted(t)).Record(context.Background(), []byte("not json"))
	checkErr(t, rep, err)
	if rep.Verdict != verify.Failed || !slices.Equal(problems(rep), []verify.Code{verify.CodeSchemaInvalid}) {
		t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, problems(rep), dump(rep))
	}
}

func TestOptions(t *testing.T) {
	key := verifytest.Key(t, 1).Public()
	tests := []struct {
		name string
		o    verify.Options
		ok   bool
	}{
		{"trusted key", verify.Options{TrustedKey: key, At: verifytest.At}, true},
		{"embedded key", verify.Options{AllowEmbeddedKey: true, At: verifytest.At}, true},
		{"any age", verify.Options{TrustedKey: key, At: verifytest.At, AllowAnyAge: true}, true},
		{"no time", verify.Options{TrustedKey: key}, false},
		{"no key", verify.Options{At: verifytest.At}, false},
		{"both keys", verify.Options{TrustedKey: key, AllowEmbeddedKey: true, At: verifytest.At}, false},
		{"negative age", verify.Options{TrustedKey: key, At: verifytest.At, MaxAge: -1}, false},
		{"negative skew", verify.Options{TrustedKey: key, At: verifytest.At, FutureSkew: -1}, false},
		{"age and any age", verify.Options{TrustedKey: key, At: verifytest.At, MaxAge: 1, AllowAnyAge: true}, false},
		{"unsupported key", verify.Options{TrustedKey: "a string", At: verifytest.At}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify.New(tt.o)
			if (err == nil) != tt.ok {
				t.Fatalf("error %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, verify.ErrOptions) {
				t.Fatalf("error %v is not ErrOptions", err)
			}
		})
	}
}

// TestProofSnapshotUndisclosed: a proof that leaves out the snapshot line
// the attempt binds cannot show the binding: unavailable, not a failure.
func TestProofSnapshotUndisclosed(t *testing.T) {
	files := bundleFiles(verifytest.Standard(t))
	lines := bytes.Split(bytes.TrimSuffix(files[transcript.TranscriptFile], []byte("\n")), []byte("\n"))
	p, err := transcript.Prove(lines, []int64{0, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rep, codes := verifyProof(t, files[transcript.RecordFile], data, trusted(t))
	if rep.Verdict != verify.Incomplete || !slices.Equal(codes, []verify.Code{verify.CodeEvidenceUnavailable}) || len(rep.Find(verify.CodeEvidenceUnavailable)) != 1 {
		t.Fatalf("verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
}
