package verify_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// editLast rewrites the last line with old -> new (once), bypassing the
// builder's validation: the line is still signed, so its fault is the only
// one.
func editLast(t *testing.T, b *verifytest.Builder, old, new string) {
	t.Helper()
	i := len(b.Lines) - 1
	if !bytes.Contains(b.Lines[i], []byte(old)) {
		t.Fatalf("line %d has no %q: %s", i, old, b.Lines[i])
	}
	b.Lines[i] = bytes.Replace(b.Lines[i], []byte(old), []byte(new), 1)
}

// TestHistoryAndLines covers the codes and paths TestTampering does not:
// each case is a validly signed bundle with exactly one kind of fault (or
// none), and its verdict, problem codes and, where it matters, counts.
func TestHistoryAndLines(t *testing.T) {
	tests := []struct {
		name    string
		make    func(t *testing.T) fstest.MapFS
		verdict verify.Verdict
		codes   []verify.Code
		has     []verify.Code
		counts  *verify.Counts
	}{
		{
			name: "a late response after a timeout is a response",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref)
				b.Observe("a1", transcript.ObsTimeout)
				b.Respond("a1", transcript.ObsLateResponse)
				b.Attempt("a2", ref)
				b.Observe("a2", transcript.ObsTransportFailure)
				b.Attempt("a3", ref)
				b.Resolve("a3")
				b.Seal()
				return b.FS()
			},
			verdict: verify.Verified,
			has:     []verify.Code{verify.CodeOutcomeUnknown, verify.CodeHistoryConsistent},
			counts:  &verify.Counts{Lines: 10, Attempts: 3, Responses: 1, TransportFailures: 1, Unknown: 1, Snapshots: 1, Payloads: 4},
		},
		{
			name: "a transport failure after a cancellation",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Observe("a1", transcript.ObsCancelSent)
				b.Observe("a1", transcript.ObsTransportFailure)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Verified,
			counts:  &verify.Counts{Lines: 6, Attempts: 1, TransportFailures: 1, Snapshots: 1, Payloads: 1},
		},
		{
			name: "a response after a transport failure",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Observe("a1", transcript.ObsTransportFailure)
				b.Respond("a1", transcript.ObsLateResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "a late response without a timeout",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Respond("a1", transcript.ObsLateResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "an observation naming no attempt",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Respond("a9", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "a snapshot id used twice",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeIdentityConflict},
		},
		{
			name: "an attempt naming another server",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2), func(a *transcript.Attempt) { a.ServerDigest = canon.SHA256([]byte("another server")) })
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure},
		},
		{
			name: "a header naming another signing key",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Header()
				b.Lines[0] = bytes.Replace(b.Lines[0], []byte(`"name":"tracectl-test"`), []byte(`"key_thumbprint":"someone-else","name":"tracectl-test"`), 1)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure},
		},
		{
			name: "an observation claiming server authentication",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Respond("a1", transcript.ObsResponse)
				editLast(t, b, `"basis":"producer_observation"`, `"basis":"server_signed"`)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeServerProofMissing},
		},
		{
			name: "a duplicate member in a line",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Respond("a1", transcript.ObsResponse)
				editLast(t, b, `"basis":"producer_observation"`, `"basis":"producer_observation","basis":"producer_observation"`)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeDuplicateKey},
		},
		{
			name: "a number the line policy cannot hold",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Respond("a1", transcript.ObsResponse)
				editLast(t, b, `"seq":3`, `"seq":3.5`)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeValueUnsupported},
		},
		{
			name: "a header of another format",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Header()
				b.Lines[0] = bytes.Replace(b.Lines[0], []byte(transcript.Format), []byte("tracectl.transcript/v9"), 1)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeFormatUnsupported},
		},
		{
			name: "no seal line",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeTranscriptMalformed},
		},
		{
			name: "a recovery with its quarantined line",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Resolve("a1")
				torn := []byte(`{"at_ms":17`)
				d := canon.SHA256(torn)
				b.Files[transcript.QuarantinePath(d)] = &fstest.MapFile{Data: torn}
				b.Add(&transcript.Recovery{TornDigest: d, TornLength: int64(len(torn)), TornFile: transcript.QuarantinePath(d), Detail: "a torn last line"})
				b.Seal()
				return b.FS()
			},
			verdict: verify.Verified, has: []verify.Code{verify.CodeRecoveryRecorded, verify.CodeOutcomeUnknown},
		},
		{
			name: "a recovery whose quarantined line is gone",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", b.Snapshot("snap-1", 2, 2))
				b.Resolve("a1")
				d := canon.SHA256([]byte("gone"))
				b.Add(&transcript.Recovery{TornDigest: d, TornLength: 4, TornFile: transcript.QuarantinePath(d), Detail: "a torn last line"})
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "a reused snapshot naming its original and policy",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				s := verifytest.Collect(t, "cap-1", 4, 2)
				b.AddSnapshot("cap-1", s)
				m, err := snapshot.Reuse(s.Manifest, snapshot.FreshnessPolicy{Name: "ttl"})
				if err != nil {
					t.Fatal(err)
				}
				ref := b.AddSnapshot("cap-2", snapshotOf(t, m, s.Pages))
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Verified, has: []verify.Code{verify.CodeSnapshotVerified},
		},
		{
			name: "a reused snapshot without its original capture",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				s := verifytest.Collect(t, "cap-1", 4, 2)
				m := *s.Manifest
				m.Cache = snapshot.Cache{Provenance: snapshot.ProvenanceReused}
				data, err := canon.Marshal(&m) // Encode would refuse it
				if err != nil {
					t.Fatal(err)
				}
				ref := b.AddSnapshot("cap-2", &snapshot.Snapshot{Manifest: &m, Bytes: data, Digest: canon.SHA256(data), Pages: s.Pages})
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSnapshotWrong},
		},
		{
			name: "a list_changed the binding hides",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Add(&transcript.Notification{Method: "notifications/tools/list_changed", Direction: transcript.ServerToClient,
					Payload: b.Blob([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))})
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSnapshotIncomplete, verify.CodeTranscriptMalformed},
		},
		{
			name: "a tool declaration the contract cannot represent",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				c, err := verifytest.Collector("snap-1")
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Add([]byte(`{"id":1,"jsonrpc":"2.0","method":"tools/list"}`),
					[]byte(`{"id":1,"jsonrpc":"2.0","result":{"tools":[{"inputSchema":{"maximum":1e400},"name":"tool_1"}]}}`)); err != nil {
					t.Fatal(err)
				}
				s, err := c.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				b.Attempt("a1", b.AddSnapshot("snap-1", s))
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeValueUnsupported},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, codes := verdictCodes(t, tt.make(t), trusted(t))
			if rep.Verdict != tt.verdict || !slices.Equal(codes, tt.codes) {
				t.Errorf("verdict %s, codes %v; want %s, %v\n%s", rep.Verdict, codes, tt.verdict, tt.codes, dump(rep))
			}
			for _, c := range tt.has {
				if !rep.Has(c) {
					t.Errorf("no %s finding\n%s", c, dump(rep))
				}
			}
			if tt.counts != nil && rep.Counts != *tt.counts {
				t.Errorf("counts %+v, want %+v", rep.Counts, *tt.counts)
			}
		})
	}
}

func snapshotOf(t *testing.T, m *snapshot.Manifest, pages []snapshot.PageBytes) *snapshot.Snapshot {
	t.Helper()
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &snapshot.Snapshot{Manifest: m, Bytes: data, Digest: canon.SHA256(data), Pages: pages}
}

// TestFindingsBounded: past MaxFindingsPerCode findings of one code the
// rest are counted, and the verdict still accounts for them.
func TestFindingsBounded(t *testing.T) {
	b := verifytest.New(t)
	const n = verify.MaxFindingsPerCode + 5
	for i := range n {
		b.Attempt(fmt.Sprintf("a%d", i), transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot})
	}
	b.Seal()
	rep, _ := verdictCodes(t, b.FS(), trusted(t))
	if got := len(rep.Find(verify.CodeOutcomeUnknown)); got != verify.MaxFindingsPerCode {
		t.Errorf("%d outcome_unknown findings listed, want %d", got, verify.MaxFindingsPerCode)
	}
	if rep.Omitted[verify.CodeOutcomeUnknown] != 5 || len(rep.Omitted) != 1 {
		t.Errorf("omitted %v", rep.Omitted)
	}
	// Attempts that bind no snapshot are one summary finding with the count.
	if f := rep.Find(verify.CodeEvidenceUnavailable); len(f) != 1 || f[0].Subject != fmt.Sprintf("%d attempts", n) {
		t.Errorf("unbound attempts: %+v", f)
	}
	if rep.Verdict != verify.Incomplete || rep.Counts.Unknown != n {
		t.Errorf("verdict %s, counts %+v", rep.Verdict, rep.Counts)
	}
}

// TestLineLimit: a line of transcript.MaxLineBytes bytes is read (and
// judged on its content); one byte more is too_long, and the commitment is
// then not recomputed (the line cannot be held).
func TestLineLimit(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{
		{transcript.MaxLineBytes, "not_canonical"},
		{transcript.MaxLineBytes + 1, "too_long"},
	} {
		b := verifytest.Standard(t)
		fsys := b.FS()
		line := bytes.Repeat([]byte(" "), tt.n)
		line[0], line[tt.n-1] = '{', '}'
		data := fsys[transcript.TranscriptFile].Data
		fsys[transcript.TranscriptFile] = &fstest.MapFile{Data: slices.Concat(data, line, []byte("\n"))}
		rep, codes := verdictCodes(t, fsys, trusted(t))
		mal := rep.Find(verify.CodeTranscriptMalformed)
		if len(mal) != 1 || !bytes.HasPrefix([]byte(mal[0].Detail), []byte(tt.want+":")) || mal[0].Subject != "line 9" {
			t.Errorf("%d bytes: findings %+v, want one %s at line 9", tt.n, mal, tt.want)
		}
		wantCodes := []verify.Code{verify.CodeBindingFailure, verify.CodeTranscriptMalformed}
		if tt.want == "too_long" {
			wantCodes = []verify.Code{verify.CodeTranscriptMalformed}
		}
		if !slices.Equal(codes, wantCodes) {
			t.Errorf("%d bytes: codes %v, want %v\n%s", tt.n, codes, wantCodes, dump(rep))
		}
	}
}
