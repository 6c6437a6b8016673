package verify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// packed returns fsys with its blobs moved into a payload pack, the first
// attempt's request first, then in name order, and the entries' bodies'
// offsets by digest.
func packed(t testing.TB, fsys fstest.MapFS) (fstest.MapFS, map[string]int) {
	t.Helper()
	out := fstest.MapFS{}
	var names []string
	for name, f := range fsys {
		if filepath.Dir(name) == transcript.BlobDir {
			names = append(names, name)
		} else {
			out[name] = f
		}
	}
	slices.Sort(names)
	req := transcript.BlobPath(firstRequest(t, fsys))
	names = append([]string{req}, slices.DeleteFunc(names, func(n string) bool { return n == req })...)
	var pack []byte
	at := map[string]int{}
	for _, name := range names {
		d := "sha256:" + filepath.Base(name)
		data := fsys[name].Data
		pack = transcript.AppendPackHeader(pack, d, int64(len(data)), nil)
		at[d] = len(pack)
		pack = append(append(pack, data...), '\n')
	}
	out[transcript.PackFile] = &fstest.MapFile{Data: pack, Mode: 0o600}
	return out, at
}

// firstRequest returns the request digest of the transcript's first attempt.
func firstRequest(t testing.TB, fsys fstest.MapFS) string {
	t.Helper()
	for _, line := range bytes.Split(fsys[transcript.TranscriptFile].Data, []byte("\n")) {
		if ev, err := transcript.DecodeLine(line); err == nil {
			if a, ok := ev.(*transcript.Attempt); ok {
				return a.Request.Digest
			}
		}
	}
	t.Fatal("no attempt in the transcript")
	return ""
}

// TestPackLayout: a bundle whose payloads are in the pack verifies exactly
// as the same bundle with blob files, and damage to the pack is a named
// finding, never a pass.
func TestPackLayout(t *testing.T) {
	std := verifytest.Standard(t).FS()
	blobRep, _ := verdictCodes(t, std, trusted(t))
	fsys, at := packed(t, std)
	rep, codes := verdictCodes(t, fsys, trusted(t))
	if rep.Verdict != verify.Verified || rep.Counts.Payloads != blobRep.Counts.Payloads || rep.Counts.Payloads == 0 {
		t.Fatalf("packed bundle: %s with %d payloads (blob layout: %s with %d), codes %v\n%s", rep.Verdict, rep.Counts.Payloads, blobRep.Verdict, blobRep.Counts.Payloads, codes, dump(rep))
	}
	first := firstRequest(t, std) // the pack's first entry
	pack := fsys[transcript.PackFile].Data
	edit := func(f func(p []byte) []byte) fstest.MapFS {
		c := fstest.MapFS{}
		for k, v := range fsys {
			c[k] = v
		}
		c[transcript.PackFile] = &fstest.MapFile{Data: f(bytes.Clone(pack)), Mode: 0o600}
		return c
	}
	cases := []struct {
		name    string
		fsys    fstest.MapFS
		verdict verify.Verdict
		want    []verify.Code
	}{
		{"a byte of an entry's bytes flipped", edit(func(p []byte) []byte { p[at[first]] ^= 1; return p }),
			verify.Failed, []verify.Code{verify.CodeEvidenceMismatch}},
		{"an entry's header names another digest", edit(func(p []byte) []byte {
			// The first entry's header starts the pack.
			if p[0] == '0' {
				p[0] = '1'
			} else {
				p[0] = '0'
			}
			return p
		}), verify.Incomplete, []verify.Code{verify.CodeEvidenceUnavailable}},
		{"truncated", edit(func(p []byte) []byte { return p[:len(p)-3] }),
			verify.Failed, []verify.Code{verify.CodeEvidenceUnavailable, verify.CodePackMalformed}},
		{"an entry's closing LF replaced", edit(func(p []byte) []byte {
			p[bytes.IndexByte(p[at[first]:], '\n')+at[first]] = 'x'
			return p
		}), verify.Failed, []verify.Code{verify.CodeEvidenceUnavailable, verify.CodePackMalformed}},
		{"garbage appended", edit(func(p []byte) []byte { return append(p, "not an entry\n"...) }),
			verify.Failed, []verify.Code{verify.CodePackMalformed}},
		{"a length that is not the entry's", edit(func(p []byte) []byte {
			// The first entry re-framed one byte shorter: whole entries,
			// but not the length the transcript commits to.
			end := at[first] + bytes.IndexByte(p[at[first]:], '\n')
			body := p[at[first]:end]
			out := transcript.AppendPackHeader(nil, first, int64(len(body)-1), nil)
			out = append(append(out, body[:len(body)-1]...), '\n')
			return append(out, p[end+1:]...)
		}), verify.Failed, []verify.Code{verify.CodeEvidenceMismatch}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, codes := verdictCodes(t, tc.fsys, trusted(t))
			if rep.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s\n%s", rep.Verdict, tc.verdict, dump(rep))
			}
			for _, c := range tc.want {
				if !slices.Contains(codes, c) {
					t.Errorf("no %s finding (codes %v)\n%s", c, codes, dump(rep))
				}
			}
		})
	}
	t.Run("an extra entry nothing commits to", func(t *testing.T) {
		c := edit(func(p []byte) []byte {
			return append(transcript.AppendPackHeader(p, "sha256:"+strings.Repeat("0", 64), 3, nil), "abc\n"...)
		})
		if rep, codes := verdictCodes(t, c, trusted(t)); rep.Verdict != verify.Verified {
			t.Errorf("verdict %s, codes %v: an unreferenced entry carries no claim", rep.Verdict, codes)
		}
	})
}

// TestPackTornUnsealed: a transcript signed before it was sealed (a
// producer that died) may end with a pack cut inside its last entry: that
// entry's bytes are unavailable, not damage; the same tear in a sealed
// bundle is pack_malformed.
func TestPackTornUnsealed(t *testing.T) {
	b := verifytest.New(t)
	ref := b.Snapshot("snap-1", 2, 2)
	b.Attempt("a1", ref)
	b.Respond("a1", transcript.ObsResponse)
	fsys, _ := packed(t, b.FS())
	pack := fsys[transcript.PackFile].Data
	fsys[transcript.PackFile] = &fstest.MapFile{Data: pack[:len(pack)-2], Mode: 0o600}
	rep, codes := verdictCodes(t, fsys, trusted(t))
	if rep.Has(verify.CodePackMalformed) || !slices.Contains(codes, verify.CodeEvidenceUnavailable) {
		t.Errorf("codes %v: an unsealed bundle's torn last entry is unavailable evidence, not pack_malformed\n%s", codes, dump(rep))
	}
}

// FuzzVerifyPack: whatever bytes the payload pack holds, verification
// returns a consistent report, and it is Verified only when every payload
// the transcript commits to opens from those bytes, as it does from the
// honest pack. Seed corpus: testdata/fuzz/FuzzVerifyPack.
func FuzzVerifyPack(f *testing.F) {
	std := verifytest.Standard(f).FS()
	honest, _ := packed(f, std)
	pack := honest[transcript.PackFile].Data
	f.Add(pack)
	f.Add(pack[:len(pack)/2])
	f.Add(append(bytes.Clone(pack), "x"...))
	f.Add([]byte{})
	o := trusted(f)
	want, _ := verdictCodesTB(f, honest, o)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := fstest.MapFS{}
		for k, v := range honest {
			c[k] = v
		}
		c[transcript.PackFile] = &fstest.MapFile{Data: data, Mode: 0o600}
		v, err := verify.New(o)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := v.Bundle(context.Background(), c)
		consistent(t, rep, err)
		if rep.Verdict == verify.Verified && rep.Counts.Payloads != want.Counts.Payloads {
			t.Fatalf("verified with %d payloads checked, the honest pack has %d", rep.Counts.Payloads, want.Counts.Payloads)
		}
	})
}

// verdictCodesTB is verdictCodes for a testing.TB.
func verdictCodesTB(tb testing.TB, fsys fs.FS, o verify.Options) (*verify.Report, error) {
	tb.Helper()
	v, err := verify.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return v.Bundle(context.Background(), fsys)
}

// TestPackEntriesBounded: the pack index is bounded by
// Limits.MaxPackEntries (16 bytes of memory per entry): entries appended
// to a sealed bundle's pack change nothing the evidence says (verified),
// but they are counted (pack_unreferenced), and past the bound the rest
// of the pack is not read and the verdict is
// incomplete (limit_exceeded), never pack_malformed and never a pass on
// bytes not read.
func TestPackEntriesBounded(t *testing.T) {
	fsys, _ := packed(t, verifytest.Standard(t).FS())
	junk := bytes.Clone(fsys[transcript.PackFile].Data)
	for i := range 3 {
		body := []byte(strings.Repeat("x", 10+i))
		junk = transcript.AppendPackHeader(junk, canonSHA256(body), int64(len(body)), nil)
		junk = append(append(junk, body...), '\n')
	}
	appended := fstest.MapFS{}
	for k, v := range fsys {
		appended[k] = v
	}
	appended[transcript.PackFile] = &fstest.MapFile{Data: junk, Mode: 0o600}
	rep, codes := verdictCodes(t, appended, trusted(t))
	if rep.Verdict != verify.Verified || len(codes) != 0 {
		t.Fatalf("appended entries: verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
	// They are counted (pack_unreferenced, info); the honest pack has none.
	if f := rep.Find(verify.CodePackUnreferenced); len(f) != 1 || f[0].Status != verify.StatusInfo || !strings.HasPrefix(f[0].Detail, "3 of ") {
		t.Fatalf("appended entries: pack_unreferenced %v, want one info finding counting 3", f)
	}
	if honest, _ := verdictCodes(t, fsys, trusted(t)); honest.Has(verify.CodePackUnreferenced) {
		t.Fatalf("the honest pack: %v", honest.Find(verify.CodePackUnreferenced))
	}
	o := trusted(t)
	o.Limits.MaxPackEntries = 2
	rep, codes = verdictCodes(t, appended, o)
	f := rep.Find(verify.CodeLimitExceeded)
	if rep.Verdict != verify.Incomplete || len(f) == 0 || f[0].Subject != transcript.PackFile || rep.Has(verify.CodePackMalformed) {
		t.Fatalf("MaxPackEntries 2: verdict %s, codes %v\n%s", rep.Verdict, codes, dump(rep))
	}
	o.Limits.MaxPackEntries = -1
	if _, err := verify.New(o); err == nil {
		t.Error("a negative MaxPackEntries is accepted")
	}
}

func canonSHA256(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}
