//go:build unix

package verify_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// hostileDeadline is how long a verification of hostile input may take
// before the test calls it hung.
const hostileDeadline = 2 * time.Second

// writeBundle writes a MapFS bundle to a fresh directory.
func writeBundle(t *testing.T, fsys fstest.MapFS) string {
	t.Helper()
	dir := t.TempDir()
	for name, f := range fsys {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bundleWithin verifies dir on a goroutine and fails the test if it has
// not returned within hostileDeadline: a FIFO would block an open that no
// context can interrupt, so the deadline is the test's, not the verifier's.
func bundleWithin(t *testing.T, dir string, o verify.Options) (*verify.Report, error) {
	t.Helper()
	type result struct {
		rep *verify.Report
		err error
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		rep, err := verifier(t, o).Bundle(ctx, verify.DirFS(dir))
		done <- result{rep, err}
	}()
	select {
	case r := <-done:
		return r.rep, r.err
	case <-ctx.Done():
		t.Fatalf("verify did not return within %s", hostileDeadline)
		return nil, nil
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// firstBlob returns the bundle path of some blob of fsys.
func firstBlob(fsys fstest.MapFS) string {
	var names []string
	for name := range fsys {
		if filepath.Dir(name) == transcript.BlobDir {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names[0]
}

// TestHostileFiles: a bundle file that is a FIFO, a device or a link (to
// anything, the endless /dev/zero and an honest copy outside the bundle
// included) is never read: verify returns within the deadline with
// file_refused, and a record.json that is not a regular file is an error.
func TestHostileFiles(t *testing.T) {
	fsys := verifytest.Standard(t).FS()
	blob := firstBlob(fsys)
	outside := t.TempDir()
	cases := []struct {
		name      string
		fault     func(t *testing.T, dir string)
		wantErr   bool // no report: record.json refused
		wantCodes []verify.Code
	}{
		{"transcript FIFO", func(t *testing.T, dir string) { mkfifo(t, filepath.Join(dir, transcript.TranscriptFile)) }, false, []verify.Code{verify.CodeFileRefused}},
		{"transcript to /dev/zero", func(t *testing.T, dir string) {
			symlink(t, "/dev/zero", filepath.Join(dir, transcript.TranscriptFile))
		}, false, []verify.Code{verify.CodeFileRefused}},
		{"transcript to an honest copy outside", func(t *testing.T, dir string) {
			p := filepath.Join(outside, "t.jsonl")
			if err := os.WriteFile(p, fsys[transcript.TranscriptFile].Data, 0o600); err != nil {
				t.Fatal(err)
			}
			symlink(t, p, filepath.Join(dir, transcript.TranscriptFile))
		}, false, []verify.Code{verify.CodeFileRefused}},
		{"transcript is a directory", func(t *testing.T, dir string) {
			p := filepath.Join(dir, transcript.TranscriptFile)
			os.Remove(p)
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, false, []verify.Code{verify.CodeFileRefused}},
		{"blob FIFO", func(t *testing.T, dir string) { mkfifo(t, filepath.Join(dir, blob)) }, false, []verify.Code{verify.CodeFileRefused}},
		{"blob to an honest copy outside", func(t *testing.T, dir string) {
			p := filepath.Join(outside, "blob")
			if err := os.WriteFile(p, fsys[blob].Data, 0o600); err != nil {
				t.Fatal(err)
			}
			symlink(t, p, filepath.Join(dir, blob))
		}, false, []verify.Code{verify.CodeFileRefused}},
		{"blobs directory is a link", func(t *testing.T, dir string) {
			p := filepath.Join(outside, "blobs")
			if err := os.Rename(filepath.Join(dir, transcript.BlobDir), p); err != nil {
				t.Fatal(err)
			}
			symlink(t, p, filepath.Join(dir, transcript.BlobDir))
		}, false, []verify.Code{verify.CodeFileRefused}},
		{"blob to /dev/urandom", func(t *testing.T, dir string) { symlink(t, "/dev/urandom", filepath.Join(dir, blob)) }, false, []verify.Code{verify.CodeFileRefused}},
		{"record FIFO", func(t *testing.T, dir string) { mkfifo(t, filepath.Join(dir, transcript.RecordFile)) }, true, nil},
		{"record to /dev/zero", func(t *testing.T, dir string) {
			symlink(t, "/dev/zero", filepath.Join(dir, transcript.RecordFile))
		}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, fsys)
			tc.fault(t, dir)
			rep, err := bundleWithin(t, dir, trusted(t))
			if tc.wantErr {
				if rep != nil || !errors.Is(err, verify.ErrNotRegular) {
					t.Fatalf("got report %v, error %v; want no report and ErrNotRegular", rep != nil, err)
				}
				return
			}
			if rep == nil {
				t.Fatalf("no report: %v", err)
			}
			checkErr(t, rep, err)
			if rep.Verdict != verify.Failed {
				t.Errorf("verdict %s, want failed\n%s", rep.Verdict, dump(rep))
			}
			for _, c := range tc.wantCodes {
				if !rep.Has(c) {
					t.Errorf("no %s finding\n%s", c, dump(rep))
				}
			}
			if rep.Has(verify.CodeTranscriptBound) && rep.Has(verify.CodeFileRefused) && strings.HasPrefix(tc.name, "transcript") {
				t.Errorf("a refused transcript was still bound\n%s", dump(rep))
			}
		})
	}
	t.Run("honest on disk", func(t *testing.T) {
		rep, err := bundleWithin(t, writeBundle(t, fsys), trusted(t))
		if err != nil || rep.Verdict != verify.Verified {
			t.Fatalf("verdict %v, error %v\n%s", rep.Verdict, err, dump(rep))
		}
	})
}

// TestMapFSNonRegular: the regular-file check holds for any fs.FS, not
// only DirFS (a MapFS symlink is resolved by MapFS itself).
func TestMapFSNonRegular(t *testing.T) {
	for _, mode := range []os.FileMode{os.ModeNamedPipe, os.ModeSocket, os.ModeDevice | os.ModeCharDevice} {
		fsys := verifytest.Standard(t).FS()
		fsys[transcript.TranscriptFile].Mode = mode | 0o600
		_, codes := verdictCodes(t, fsys, trusted(t))
		if !slices.Contains(codes, verify.CodeFileRefused) {
			t.Errorf("mode %v: codes %v, want %s", mode, codes, verify.CodeFileRefused)
		}
	}
}

// TestTranscriptLimits: a transcript at a limit verifies; one byte or one
// line beyond stops reading with limit_exceeded (unsupported: incomplete,
// never verified on unread lines). A generated 2 MiB endless-looking
// transcript under a 1 MiB limit returns within the deadline.
func TestTranscriptLimits(t *testing.T) {
	fsys := verifytest.Standard(t).FS()
	data := fsys[transcript.TranscriptFile].Data
	size, lines := int64(len(data)), int64(bytes.Count(data, []byte{'\n'}))
	cases := []struct {
		name   string
		limits verify.Limits
		want   verify.Verdict
	}{
		{"bytes at limit", verify.Limits{MaxTranscriptBytes: size}, verify.Verified},
		{"bytes over limit", verify.Limits{MaxTranscriptBytes: size - 1}, verify.Incomplete},
		{"bytes far over limit", verify.Limits{MaxTranscriptBytes: 10}, verify.Incomplete},
		{"lines at limit", verify.Limits{MaxTranscriptLines: lines}, verify.Verified},
		{"lines over limit", verify.Limits{MaxTranscriptLines: lines - 1}, verify.Incomplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := trusted(t)
			o.Limits = tc.limits
			rep, err := bundleWithin(t, writeBundle(t, fsys), o)
			if rep == nil {
				t.Fatal(err)
			}
			checkErr(t, rep, err)
			if rep.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s\n%s", rep.Verdict, tc.want, dump(rep))
			}
			if got := rep.Has(verify.CodeLimitExceeded); got != (tc.want != verify.Verified) {
				t.Errorf("limit_exceeded %v\n%s", got, dump(rep))
			}
			if tc.want != verify.Verified && (rep.Root != "" || rep.Has(verify.CodeTranscriptBound)) {
				t.Errorf("a transcript read in part was bound (root %q)", rep.Root)
			}
		})
	}
	t.Run("oversized generated transcript", func(t *testing.T) {
		dir := writeBundle(t, fsys)
		line := append(bytes.Repeat([]byte("x"), 1023), '\n')
		big := bytes.Repeat(line, 2048) // 2 MiB, in t.TempDir only
		if err := os.WriteFile(filepath.Join(dir, transcript.TranscriptFile), big, 0o600); err != nil {
			t.Fatal(err)
		}
		o := trusted(t)
		o.Limits = verify.Limits{MaxTranscriptBytes: 1 << 20}
		rep, _ := bundleWithin(t, dir, o)
		if rep == nil || !rep.Has(verify.CodeLimitExceeded) || rep.Verdict == verify.Verified {
			t.Fatalf("want limit_exceeded and not verified, got\n%s", dump(rep))
		}
	})
}

// TestLinksAnywhere: a symbolic link or FIFO the checks would never read
// (an extra file, one inside blobs/) is still a finding: file_refused at
// its path, never followed.
func TestLinksAnywhere(t *testing.T) {
	fsys := verifytest.Standard(t).FS()
	for _, tc := range []struct{ name, path string }{
		{"top-level link", "notes.txt"},
		{"link among blobs", transcript.BlobDir + "/extra"},
		{"FIFO in a new directory", "quarantine/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, fsys)
			p := filepath.Join(dir, filepath.FromSlash(tc.path))
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(tc.name, "FIFO") {
				mkfifo(t, p)
			} else {
				symlink(t, "/etc/passwd", p)
			}
			rep, err := bundleWithin(t, dir, trusted(t))
			if rep == nil {
				t.Fatal(err)
			}
			f := rep.Find(verify.CodeFileRefused)
			if rep.Verdict != verify.Failed || len(f) != 1 || f[0].Subject != tc.path {
				t.Fatalf("verdict %s, file_refused %+v\n%s", rep.Verdict, f, dump(rep))
			}
		})
	}
}

// TestSparsePayload: a payload committed as 8 GiB and backed by a sparse
// file (which would take minutes to hash) is limit_exceeded without being
// read, within the deadline; a payload exactly at the limit is read, one
// byte over is not.
func TestSparsePayload(t *testing.T) {
	const huge = 8 << 30
	data := []byte("sparse")
	digest := "sha256:" + strings.Repeat("ab", 32)
	b := verifytest.New(t)
	ref := b.Snapshot("snap-1", 2, 2)
	b.Attempt("a1", ref, func(a *transcript.Attempt) {
		a.Request = transcript.Payload{Digest: digest, Length: huge, Retained: true}
	})
	b.Observe("a1", transcript.ObsTimeout)
	b.Seal()
	dir := writeBundle(t, b.FS())
	p := filepath.Join(dir, filepath.FromSlash(transcript.BlobPath(digest)))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, huge); err != nil {
		t.Skipf("sparse file: %v", err)
	}
	rep, err := bundleWithin(t, dir, trusted(t))
	if rep == nil {
		t.Fatal(err)
	}
	f := rep.Find(verify.CodeLimitExceeded)
	if rep.Verdict != verify.Incomplete || len(f) != 1 || f[0].Check != "payload" {
		t.Fatalf("verdict %s, limit_exceeded %+v\n%s", rep.Verdict, f, dump(rep))
	}
	// The limit and the limit + 1: the largest payload of the standard
	// bundle is read at a limit equal to its length, refused one below.
	sb := verifytest.Standard(t)
	var largest int64
	for _, l := range sb.Lines {
		switch e, _ := transcript.DecodeLine(l); e := e.(type) {
		case *transcript.Attempt:
			largest = max(largest, e.Request.Length)
		case *transcript.Observation:
			if e.Response != nil {
				largest = max(largest, e.Response.Length)
			}
		}
	}
	std := sb.FS()
	for _, tc := range []struct {
		max  int64
		want verify.Verdict
	}{{largest, verify.Verified}, {largest - 1, verify.Incomplete}} {
		o := trusted(t)
		o.Limits.MaxPayloadBytes = tc.max
		rep, _ := verdictCodes(t, std, o)
		if rep.Verdict != tc.want || rep.Has(verify.CodeLimitExceeded) != (tc.want != verify.Verified) {
			t.Errorf("MaxPayloadBytes %d (largest payload %d): verdict %s\n%s", tc.max, largest, rep.Verdict, dump(rep))
		}
	}
}
