package verify_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

func verifier(t testing.TB, o verify.Options) *verify.Verifier {
	t.Helper()
	if o.At.IsZero() {
		o.At = verifytest.At
	}
	v, err := verify.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func trusted(t testing.TB) verify.Options {
	return verify.Options{TrustedKey: verifytest.Key(t, 1).Public(), At: verifytest.At}
}

// verdictCodes verifies fsys and returns the verdict and the codes of the
// findings that are not pass or info, sorted and each once.
func verdictCodes(t *testing.T, fsys fs.FS, o verify.Options) (*verify.Report, []verify.Code) {
	t.Helper()
	rep, err := verifier(t, o).Bundle(context.Background(), fsys)
	if rep == nil {
		t.Fatalf("Bundle: no report: %v", err)
	}
	checkErr(t, rep, err)
	return rep, problems(rep)
}

// problems are the codes of findings that weigh on the verdict (not pass,
// info or warning).
func problems(rep *verify.Report) []verify.Code {
	var codes []verify.Code
	for _, f := range rep.Findings {
		if f.Status != verify.StatusPass && f.Status != verify.StatusInfo && f.Status != verify.StatusWarning && !slices.Contains(codes, f.Code) {
			codes = append(codes, f.Code)
		}
	}
	slices.Sort(codes)
	return codes
}

// checkErr holds the error contract: nil iff verified, else a
// *VerdictError with the same report that matches the verdict's sentinel.
func checkErr(t *testing.T, rep *verify.Report, err error) {
	t.Helper()
	if rep.Verdict == verify.Verified {
		if err != nil {
			t.Fatalf("verified with error %v", err)
		}
		return
	}
	var ve *verify.VerdictError
	if !errors.As(err, &ve) || ve.Report != rep {
		t.Fatalf("verdict %s: error %v is not a *VerdictError carrying the report", rep.Verdict, err)
	}
	want := verify.ErrFailed
	if rep.Verdict == verify.Incomplete {
		want = verify.ErrIncomplete
	}
	if !errors.Is(err, want) {
		t.Fatalf("verdict %s: errors.Is(err, %v) is false", rep.Verdict, want)
	}
}

func dump(rep *verify.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString("  " + string(f.Status) + " " + string(f.Code) + " [" + f.Subject + "] " + f.Detail + "\n")
	}
	return b.String()
}

func TestVerifyStandardBundle(t *testing.T) {
	fsys := verifytest.Standard(t).FS()
	rep, codes := verdictCodes(t, fsys, trusted(t))
	if rep.Verdict != verify.Verified || len(codes) != 0 {
		t.Fatalf("verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
	}
	if got, want := rep.Counts, (verify.Counts{Lines: 9, Attempts: 3, Responses: 2, Unknown: 1, Snapshots: 1, Payloads: 5}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if rep.TrustBasis != verify.TrustKey {
		t.Errorf("trust basis %q", rep.TrustBasis)
	}
	for _, c := range []verify.Code{verify.CodeSignatureValid, verify.CodeTrustedKeyMatch, verify.CodeRecordFresh, verify.CodeTranscriptBound,
		verify.CodeSnapshotVerified, verify.CodePayloadsVerified, verify.CodeHistoryConsistent, verify.CodeRetryLinked, verify.CodeProducerObservation} {
		if !rep.Has(c) {
			t.Errorf("no %s finding\n%s", c, dump(rep))
		}
	}
	// Unknown remains unknown: the timed-out attempt is reported unknown
	// even though its retry was answered, and the retry is named.
	unk := rep.Find(verify.CodeOutcomeUnknown)
	if len(unk) != 1 || unk[0].Subject != "attempt a2" || unk[0].Status != verify.StatusInfo || !strings.Contains(unk[0].Detail, "retried by a3") {
		t.Errorf("outcome_unknown findings %+v", unk)
	}
}

// edit rewrites the transcript's lines with f, then re-signs the record
// over the new commitment: the fault f introduces is the only one left.
func resign(t *testing.T, b *verifytest.Builder, f func(lines [][]byte) [][]byte) fstest.MapFS {
	t.Helper()
	b.Lines = f(b.Lines)
	return b.FS()
}

func flipByte(data []byte, at int, to byte) []byte {
	c := bytes.Clone(data)
	c[at] = to
	return c
}

// lineIndex returns the index of the first line containing s.
func lineIndex(t *testing.T, lines [][]byte, s string) int {
	t.Helper()
	for i, l := range lines {
		if bytes.Contains(l, []byte(s)) {
			return i
		}
	}
	t.Fatalf("no line contains %q", s)
	return -1
}

func transcriptLines(fsys fstest.MapFS) [][]byte {
	data := fsys[transcript.TranscriptFile].Data
	return bytes.SplitAfter(data, []byte("\n"))
}

func setTranscript(fsys fstest.MapFS, lines [][]byte) {
	fsys[transcript.TranscriptFile] = &fstest.MapFile{Data: bytes.Join(lines, nil)}
}

// TestTampering: each fault, with its exact codes and verdict.
func TestTampering(t *testing.T) {
	key2 := verifytest.Key(t, 2)
	tests := []struct {
		name    string
		make    func(t *testing.T) fstest.MapFS
		opts    func(o *verify.Options)
		verdict verify.Verdict
		codes   []verify.Code
	}{
		{
			name: "one byte in a transcript line",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				lines := transcriptLines(fsys)
				// at_ms of line 3 (an attempt) changes by one digit: still a
				// valid, canonical line, no longer the signed one.
				i := bytes.Index(lines[3], []byte(`"at_ms":`)) + len(`"at_ms":`)
				d := lines[3][i]
				lines[3] = flipByte(lines[3], i, "123456789"[d%9])
				setTranscript(fsys, lines)
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure},
		},
		{
			name: "a byte that breaks a line",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				lines := transcriptLines(fsys)
				lines[4] = flipByte(lines[4], 0, '[')
				setTranscript(fsys, lines)
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure, verify.CodeTranscriptMalformed},
		},
		{
			name: "one byte in a payload",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				fsys := b.FS()
				p := firstPayload(t, b, `"type":"attempt"`, "request")
				fsys[p].Data = flipByte(fsys[p].Data, 5, 'X')
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeEvidenceMismatch},
		},
		{
			name: "a missing payload is unavailable, not a mismatch",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				fsys := b.FS()
				delete(fsys, firstPayload(t, b, `"kind":"response"`, "response"))
				return fsys
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "one byte in a snapshot page (an uncalled tool)",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				fsys := b.FS()
				s := verifytest.Collect(t, "snap-1", 5, 3)
				page := transcript.BlobPath(canon.SHA256(s.Pages[1].Response))
				i := bytes.Index(fsys[page].Data, []byte("Tool number 4"))
				fsys[page].Data = flipByte(fsys[page].Data, i, 't')
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSnapshotMismatch},
		},
		{
			name: "a missing snapshot page is unavailable",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				fsys := b.FS()
				s := verifytest.Collect(t, "snap-1", 5, 3)
				delete(fsys, transcript.BlobPath(canon.SHA256(s.Pages[0].Response)))
				return fsys
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "a missing manifest is unavailable",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				fsys := b.FS()
				s := verifytest.Collect(t, "snap-1", 5, 3)
				delete(fsys, transcript.BlobPath(s.Digest))
				return fsys
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "one byte in the record",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				rec := fsys[transcript.RecordFile].Data
				i := bytes.Index(rec, []byte(`"data_class":"internal"`)) + len(`"data_class":"`)
				fsys[transcript.RecordFile].Data = flipByte(rec, i, 'I')
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSignatureInvalid},
		},
		{
			name: "a removed line",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				lines := transcriptLines(fsys)
				setTranscript(fsys, slices.Delete(lines, 4, 5))
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure, verify.CodeTranscriptMalformed},
		},
		{
			name: "a reordered line",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				lines := transcriptLines(fsys)
				lines[3], lines[4] = lines[4], lines[3]
				setTranscript(fsys, lines)
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure, verify.CodeTranscriptMalformed},
		},
		{
			name: "a snapshot digest moved outside the signed boundary",
			make: func(t *testing.T) fstest.MapFS {
				// The snapshot event is not among the signed lines; its
				// manifest and pages are still in blobs/, found by content
				// address only.
				b := verifytest.New(t)
				s := verifytest.Collect(t, "snap-1", 5, 3)
				unsigned := verifytest.New(t)
				ref := unsigned.AddSnapshot("snap-1", s)
				for k, v := range unsigned.Files {
					b.Files[k] = v
				}
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure},
		},
		{
			name: "an attempt binding other bytes than the snapshot event",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 5, 3)
				ref.ManifestDigest = canon.SHA256([]byte("another manifest"))
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure},
		},
		{
			name: "a reused attempt id",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Attempt("a1", ref)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeIdentityConflict},
		},
		{
			name: "a retry pointing forward",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref, func(a *transcript.Attempt) { a.RetryOf, a.RetryBasis = "a2", transcript.BasisInferred })
				b.Respond("a1", transcript.ObsResponse)
				b.Attempt("a2", ref)
				b.Respond("a2", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "a replaced outcome",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref)
				b.Observe("a1", transcript.ObsTimeout)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "two responses for one attempt",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "a resolution after a response",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Resolve("a1")
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeHistoryConflict},
		},
		{
			name: "call_count differs from the attempts",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				b.RecordOpts = func(o *sign.RecordOptions) { o.CallCount = 2 }
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeCallCountMismatch},
		},
		{
			name:    "wrong trusted key",
			make:    func(t *testing.T) fstest.MapFS { return verifytest.Standard(t).FS() },
			opts:    func(o *verify.Options) { o.TrustedKey = key2.Public() },
			verdict: verify.Failed, codes: []verify.Code{verify.CodeCnfKeyMismatch},
		},
		{
			name:    "embedded key only",
			make:    func(t *testing.T) fstest.MapFS { return verifytest.Standard(t).FS() },
			opts:    func(o *verify.Options) { o.TrustedKey, o.AllowEmbeddedKey = nil, true },
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeTrustedKeyMissing},
		},
		{
			name:    "stale record",
			make:    func(t *testing.T) fstest.MapFS { return verifytest.Standard(t).FS() },
			opts:    func(o *verify.Options) { o.At = verifytest.At.Add(25 * time.Hour) },
			verdict: verify.Failed, codes: []verify.Code{verify.CodeRecordStale},
		},
		{
			name:    "record in the future",
			make:    func(t *testing.T) fstest.MapFS { return verifytest.Standard(t).FS() },
			opts:    func(o *verify.Options) { o.At = verifytest.Issued.Add(-6 * time.Minute) },
			verdict: verify.Failed, codes: []verify.Code{verify.CodeRecordInFuture},
		},
		{
			name:    "an old record with the maximum age disabled",
			make:    func(t *testing.T) fstest.MapFS { return verifytest.Standard(t).FS() },
			opts:    func(o *verify.Options) { o.At = verifytest.At.Add(1000 * time.Hour); o.AllowAnyAge = true },
			verdict: verify.Verified,
		},
		{
			name: "non-canonical base64url signature",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				fsys[transcript.RecordFile].Data = editSignature(t, fsys[transcript.RecordFile].Data)
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSignatureMalformed},
		},
		{
			name: "a private member in cnf.jwk",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				rec := fsys[transcript.RecordFile].Data
				fsys[transcript.RecordFile].Data = bytes.Replace(rec, []byte(`"jwk":{`), []byte(`"jwk":{"d":"AAAA",`), 1)
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSchemaInvalid},
		},
		{
			name: "an integer beyond 2^53-1 in the record",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				rec := fsys[transcript.RecordFile].Data
				i := bytes.Index(rec, []byte(`"iat":`)) + len(`"iat":`)
				j := i + bytes.IndexByte(rec[i:], ',')
				fsys[transcript.RecordFile].Data = slices.Concat(rec[:i], []byte("9007199254740993"), rec[j:])
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeCanonicalizationFailed},
		},
		{
			name: "another profile",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				fsys[transcript.RecordFile].Data = bytes.Replace(fsys[transcript.RecordFile].Data, []byte("trace-v0.2"), []byte("trace-v0.3"), 1)
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeProfileUnsupported},
		},
		{
			name: "a missing transcript is unavailable",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				delete(fsys, transcript.TranscriptFile)
				return fsys
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "an incomplete snapshot",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				c, err := verifytest.Collector("snap-1")
				if err != nil {
					t.Fatal(err)
				}
				// One page offering a next page that was never fetched.
				if err := c.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"t"}],"nextCursor":"more"}}`)); err != nil {
					t.Fatal(err)
				}
				s, err := c.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				ref := b.AddSnapshot("snap-1", s)
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeSnapshotIncomplete},
		},
		{
			name: "a snapshot captured after the dispatch",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				s := verifytest.Collect(t, "snap-late", 3, 3)
				ref := transcript.SnapshotRef{SnapshotID: "snap-late", ManifestDigest: s.Digest, Complete: true}
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.AddSnapshot("snap-late", s)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeSnapshotWrong},
		},
		{
			name: "a list_changed after the snapshot",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				ref := b.Snapshot("snap-1", 2, 2)
				b.Add(&transcript.Notification{Method: "notifications/tools/list_changed", Direction: transcript.ServerToClient,
					Payload: b.Blob([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))})
				ref.ListChangedSince = true
				b.Attempt("a1", ref)
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeSnapshotIncomplete},
		},
		{
			name: "an attempt without a snapshot",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Attempt("a1", transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot})
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "digest-only retention",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.New(t)
				b.Retention = transcript.RetainDigest
				ref := b.Snapshot("snap-1", 2, 2)
				b.Attempt("a1", ref, func(a *transcript.Attempt) { a.Request.Retained = false })
				b.Respond("a1", transcript.ObsResponse)
				b.Seal()
				return b.FS()
			},
			verdict: verify.Incomplete, codes: []verify.Code{verify.CodeEvidenceUnavailable},
		},
		{
			name: "a transcript the record does not commit to",
			make: func(t *testing.T) fstest.MapFS {
				fsys := verifytest.Standard(t).FS()
				fsys[transcript.RecordFile].Data = verifytest.SignRecord(t, sign.RecordOptions{IssuedAt: verifytest.Issued, Key: verifytest.Key(t, 1).Public(),
					Digest: canon.SHA256([]byte("x")), TranscriptHash: canon.SHA256([]byte("another transcript")), CallCount: 3}, verifytest.Key(t, 1))
				return fsys
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeBindingFailure},
		},
		{
			name: "a seal whose counts disagree",
			make: func(t *testing.T) fstest.MapFS {
				b := verifytest.Standard(t)
				return resign(t, b, func(lines [][]byte) [][]byte {
					last := len(lines) - 1
					lines[last] = bytes.Replace(lines[last], []byte(`"responses":2`), []byte(`"responses":3`), 1)
					lines[last] = bytes.Replace(lines[last], []byte(`"unknown":1`), []byte(`"unknown":0`), 1)
					return lines
				})
			},
			verdict: verify.Failed, codes: []verify.Code{verify.CodeTranscriptMalformed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := trusted(t)
			if tt.opts != nil {
				tt.opts(&o)
			}
			rep, codes := verdictCodes(t, tt.make(t), o)
			if rep.Verdict != tt.verdict || !slices.Equal(codes, tt.codes) {
				t.Errorf("verdict %s, codes %v; want %s, %v\n%s", rep.Verdict, codes, tt.verdict, tt.codes, dump(rep))
			}
		})
	}
}

// firstPayload returns the blob path of the named payload of the first line
// containing marker.
func firstPayload(t *testing.T, b *verifytest.Builder, marker, member string) string {
	t.Helper()
	ev, err := transcript.DecodeLine(b.Lines[lineIndex(t, b.Lines, marker)])
	if err != nil {
		t.Fatal(err)
	}
	switch e := ev.(type) {
	case *transcript.Attempt:
		return transcript.BlobPath(e.Request.Digest)
	case *transcript.Observation:
		return transcript.BlobPath(e.Response.Digest)
	}
	t.Fatalf("no %s payload in %T", member, ev)
	return ""
}

// editSignature makes the signature non-canonical base64url: the last
// character's unused low bits set, which a lenient decoder maps to the same
// bytes.
func editSignature(t *testing.T, rec []byte) []byte {
	t.Helper()
	i := bytes.Index(rec, []byte(`"signature":"`)) + len(`"signature":"`)
	j := i + bytes.IndexByte(rec[i:], '"')
	sig := rec[i:j]
	// 64 bytes -> 86 characters; the last carries 2 bits of data and 4
	// unused bits.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	return slices.Concat(rec[:j-1], []byte{alphabet[last|1]}, rec[j:])
}
