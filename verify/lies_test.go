package verify_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestResignedLies: histories a key holder can sign whose every digest
// matches, and which still contradict their own bytes: failed, with the
// lie's own code and nothing else failing.
func TestResignedLies(t *testing.T) {
	respondWith := func(b *verifytest.Builder, attempt, idText string) {
		resp := fmt.Sprintf(`{"id":%s,"jsonrpc":"2.0","result":{"content":[{"text":"done","type":"text"}]}}`, idText)
		p := b.Blob([]byte(resp))
		b.Add(&transcript.Observation{AttemptID: attempt, Kind: transcript.ObsResponse, ResultType: "complete", Response: &p, Terminator: mcpwire.TermLF, Basis: transcript.BasisProducer})
	}
	cases := []struct {
		name  string
		build func(t *testing.T) *verifytest.Builder
		want  verify.Code // "" for an honest control
	}{
		{"control: responses answer their own ids", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 3, 3)
			b.Attempt("a1", ref)
			b.Attempt("a2", ref)
			respondWith(b, "a1", `"a1"`)
			respondWith(b, "a2", `"a2"`)
			b.Seal()
			return b
		}, ""},
		{"a1's observation commits to a2's response", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 3, 3)
			b.Attempt("a1", ref)
			b.Attempt("a2", ref)
			respondWith(b, "a1", `"a2"`)
			respondWith(b, "a2", `"a2"`)
			b.Seal()
			return b
		}, verify.CodeResponseIDMismatch},
		{"same id, another JSON type", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 3, 3)
			b.Attempt("7", ref)
			respondWith(b, "7", `7`)
			b.Seal()
			return b
		}, verify.CodeResponseIDMismatch},
		{"response without an id", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 3, 3)
			b.Attempt("a1", ref)
			respondWith(b, "a1", `null`)
			b.Seal()
			return b
		}, verify.CodeResponseIDMismatch},
		{"late response for another request", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 3, 3)
			b.Attempt("a1", ref)
			b.Observe("a1", transcript.ObsTimeout)
			resp := `{"id":"a9","jsonrpc":"2.0","result":{"content":[]}}`
			p := b.Blob([]byte(resp))
			b.Add(&transcript.Observation{AttemptID: "a1", Kind: transcript.ObsLateResponse, ResultType: "complete", Response: &p, Terminator: mcpwire.TermLF, Basis: transcript.BasisProducer})
			b.Seal()
			return b
		}, verify.CodeResponseIDMismatch},
		{"control: declared tool", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 2, 3) // tool_0, tool_1
			b.Attempt("a1", ref)
			b.Respond("a1", transcript.ObsResponse)
			b.Seal()
			return b
		}, ""},
		{"tool missing from the complete bound snapshot", func(t *testing.T) *verifytest.Builder {
			b := verifytest.New(t)
			ref := b.Snapshot("snap-1", 1, 3) // tool_0 only; the attempt calls tool_1
			b.Attempt("a1", ref)
			b.Respond("a1", transcript.ObsResponse)
			b.Seal()
			return b
		}, verify.CodeToolNotDeclared},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, codes := verdictCodes(t, tc.build(t).FS(), trusted(t))
			if tc.want == "" {
				if rep.Verdict != verify.Verified {
					t.Fatalf("honest control: verdict %s\n%s", rep.Verdict, dump(rep))
				}
				return
			}
			if rep.Verdict != verify.Failed || !slices.Equal(codes, []verify.Code{tc.want}) {
				t.Fatalf("verdict %s codes %v, want failed [%s]\n%s", rep.Verdict, codes, tc.want, dump(rep))
			}
			if tc.want == verify.CodeResponseIDMismatch && rep.Has(verify.CodePayloadsVerified) {
				t.Errorf("payloads_verified alongside a lie\n%s", dump(rep))
			}
		})
	}
}

// TestUndeclaredToolRefused: an agent calling a tool name the server
// never declared (a hallucinated name), refused with a JSON-RPC error, is
// consistent evidence: verified, with tool_not_declared as info only. A
// call with no response recorded is the same (unknown, not a lie).
func TestUndeclaredToolRefused(t *testing.T) {
	for _, refused := range []bool{true, false} {
		b := verifytest.New(t)
		ref := b.Snapshot("snap-1", 1, 3) // tool_0 only; the attempt calls tool_1
		b.Attempt("a1", ref)
		if refused {
			resp := `{"error":{"code":-32602,"message":"unknown tool"},"id":"a1","jsonrpc":"2.0"}`
			p := b.Blob([]byte(resp))
			code := int64(-32602)
			b.Add(&transcript.Observation{AttemptID: "a1", Kind: transcript.ObsResponse, ResultType: transcript.ResultTypeError, ErrorCode: &code, Response: &p, Terminator: mcpwire.TermLF, Basis: transcript.BasisProducer})
		}
		b.Seal()
		rep, codes := verdictCodes(t, b.FS(), trusted(t))
		if rep.Verdict == verify.Failed || len(codes) != 0 {
			t.Fatalf("refused %v: verdict %s codes %v\n%s", refused, rep.Verdict, codes, dump(rep))
		}
		if f := rep.Find(verify.CodeToolNotDeclared); len(f) != 1 || f[0].Status != verify.StatusInfo {
			t.Errorf("refused %v: want one info tool_not_declared\n%s", refused, dump(rep))
		}
	}
}

// TestToolNotDeclaredNotJudged: a call outside a snapshot that is
// incomplete or followed by list_changed is not tool_not_declared: that
// set is not known to be the whole catalog at dispatch.
func TestToolNotDeclaredNotJudged(t *testing.T) {
	b := verifytest.New(t)
	ref := b.Snapshot("snap-1", 1, 3)
	b.Add(&transcript.Notification{Direction: "server_to_client", Method: "notifications/tools/list_changed", Payload: b.Blob([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))})
	b.Attempt("a1", ref, func(a *transcript.Attempt) { a.Snapshot.ListChangedSince = true })
	b.Respond("a1", transcript.ObsResponse)
	b.Seal()
	rep, codes := verdictCodes(t, b.FS(), trusted(t))
	if slices.Contains(codes, verify.CodeToolNotDeclared) || rep.Verdict == verify.Failed {
		t.Fatalf("verdict %s codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
}

// TestWithheldPayloadsSummarized: digest-only retention of many payloads
// is one finding with the count, not one per payload; the verdict is
// incomplete, never verified on bytes nobody kept, unless the caller
// accepts what the declared policy withheld (AcceptWithheld): then it is
// verified, with one withheld_accepted finding saying what was not checked.
// A payload not retained under a header that declares full retention is
// missing, accepted or not.
func TestWithheldPayloadsSummarized(t *testing.T) {
	build := func(n int, retention string) *verifytest.Builder {
		b := verifytest.New(t)
		b.Retention = retention
		ref := b.Snapshot("snap-1", 3, 3)
		for i := 0; i < n; i++ {
			b.Attempt(fmt.Sprintf("a%d", i), ref, func(a *transcript.Attempt) {
				a.Request.Retained = false
				delete(b.Files, transcript.BlobPath(a.Request.Digest))
			})
			b.Observe(fmt.Sprintf("a%d", i), transcript.ObsTimeout)
		}
		b.Seal()
		return b
	}
	for _, n := range []int{1, 500} {
		fsys := build(n, transcript.RetainDigest).FS()
		rep, codes := verdictCodes(t, fsys, trusted(t))
		got := rep.Find(verify.CodeEvidenceUnavailable)
		if rep.Verdict != verify.Incomplete || !slices.Equal(codes, []verify.Code{verify.CodeEvidenceUnavailable}) || len(got) != 1 {
			t.Fatalf("n=%d: verdict %s, codes %v, %d evidence_unavailable findings, want incomplete and one", n, rep.Verdict, codes, len(got))
		}
		if want := fmt.Sprintf("%d payloads withheld by the producer's declared digest-only retention (first: attempt a0 request), not missing", n); !strings.HasPrefix(got[0].Detail, want) || got[0].Subject != "withheld payloads" {
			t.Errorf("finding %s %q, want subject \"withheld payloads\" and prefix %q", got[0].Subject, got[0].Detail, want)
		}
		o := trusted(t)
		o.AcceptWithheld = true
		rep, codes = verdictCodes(t, fsys, o)
		acc := rep.Find(verify.CodeWithheldAccepted)
		if rep.Verdict != verify.Verified || len(codes) != 0 || len(acc) != 1 || !strings.HasPrefix(acc[0].Detail, fmt.Sprintf("%d payloads withheld by the producer's declared policy", n)) {
			t.Errorf("n=%d accepted: verdict %s, codes %v, withheld_accepted %+v; want verified with one", n, rep.Verdict, codes, acc)
		}
	}
	o := trusted(t)
	o.AcceptWithheld = true
	rep, codes := verdictCodes(t, build(2, transcript.RetainFull).FS(), o)
	if rep.Verdict != verify.Incomplete || len(rep.Find(verify.CodeEvidenceUnavailable)) != 2 || rep.Has(verify.CodeWithheldAccepted) {
		t.Errorf("full retention, two payloads not retained, accepted: verdict %s, codes %v; want incomplete, each missing\n%s", rep.Verdict, codes, dump(rep))
	}
}
