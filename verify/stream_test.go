package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// seekOnlyFS serves its files without their ReadAt: the verifier then
// reads the pack through Seek and Read, and its line reader prefetches
// nothing (a ReaderAt built on Seek allows no parallel reads), so every
// pack entry is located, read and hashed by the checker itself, the way
// a verifier with one goroutine does.
type seekOnlyFS struct{ fstest.MapFS }

type seekOnlyFile struct {
	fs.File
	s io.Seeker
}

func (f seekOnlyFile) Seek(off int64, whence int) (int64, error) { return f.s.Seek(off, whence) }

func (s seekOnlyFS) Open(name string) (fs.File, error) {
	f, err := s.MapFS.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if sk, ok := f.(io.Seeker); ok {
			return seekOnlyFile{f, sk}, nil
		}
	}
	return f, nil
}

// streamBundle records n attempts with the producer, each with a request
// and a response of about 1 KB, so the transcript spans several of the
// line reader's batches and the pack holds the entries in the order the
// lines commit to them.
func streamBundle(t *testing.T, n int) (dir string, fsys fstest.MapFS) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "run.trace")
	r := openRecorder(t, dir, transcript.DurabilityNone)
	recordSnapshot(t, r, 20, 5)
	ctx := context.Background()
	pad := strings.Repeat("x", 900)
	for i := range n {
		h, err := r.Attempt(ctx, producer.Call{Line: call(i, "tool_1", fmt.Sprintf(`{"n":%d,"text":%q}`, i, pad))})
		if err != nil {
			t.Fatal(err)
		}
		if i%97 == 5 {
			continue // no response: an unknown outcome
		}
		if err := h.Response(answer(i, fmt.Sprintf("%d %s", i, pad))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Seal(ctx, recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	fsys = fstest.MapFS{}
	for _, name := range []string{transcript.RecordFile, transcript.TranscriptFile, transcript.PackFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: data, Mode: 0o600}
	}
	return dir, fsys
}

// packEntries splits a pack into its entries (header and bytes, each
// with its closing LF).
func packEntries(t *testing.T, pack []byte) [][]byte {
	t.Helper()
	var out [][]byte
	_, err := transcript.ScanPack(bytes.NewReader(pack), func(e transcript.PackEntry, _ io.Reader) error {
		out = append(out, pack[e.Offset:e.Offset+e.Header+e.Length+1])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func reportJSON(t *testing.T, fsys fs.FS, o verify.Options) string {
	t.Helper()
	rep, err := verifier(t, o).Bundle(context.Background(), fsys)
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	j, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}

// TestStreamSameReport: the report does not depend on who read, hashed
// and derived what. A bundle of many batches, honest and damaged in ways
// that touch the line reader's work (a payload's bytes, an entry the walk
// passes over, an entry before the one a line names with the same digest,
// entries out of order, a pack that ends early, the transcript limits),
// gives the same report, byte for byte, read with the prefetching reader
// (fstest.MapFS, DirFS) as read by the checker alone (seekOnlyFS).
func TestStreamSameReport(t *testing.T) {
	if testing.Short() {
		t.Skip("records a 1,500-attempt bundle")
	}
	dir, honest := streamBundle(t, 1500)
	pack := honest[transcript.PackFile].Data
	entries := packEntries(t, pack)
	if len(entries) < 2900 {
		t.Fatalf("%d pack entries, want one per payload", len(entries))
	}
	withPack := func(p []byte) fstest.MapFS {
		c := copyFS(honest)
		c[transcript.PackFile] = &fstest.MapFile{Data: p, Mode: 0o600}
		return c
	}
	join := func(es [][]byte) []byte { return bytes.Join(es, nil) }
	late := len(entries) - 700 // inside a later batch of lines
	cases := []struct {
		name     string
		fsys     fstest.MapFS
		o        func(*verify.Options)
		verified bool
	}{
		{"honest", honest, nil, true},
		{"a late entry's byte flipped", withPack(func() []byte {
			p := bytes.Clone(pack)
			off := bytes.Index(p, entries[late]) + len(entries[late]) - 10
			p[off] ^= 1
			return p
		}()), nil, false},
		{"a damaged copy of a late entry before it", withPack(func() []byte {
			bad := bytes.Clone(entries[late])
			bad[len(bad)-10] ^= 1
			es := append([][]byte{}, entries[:late-300]...)
			es = append(es, bad)
			return join(append(es, entries[late-300:]...))
		}()), nil, false},
		{"a late entry moved to the end", withPack(func() []byte {
			es := append([][]byte{}, entries[:late]...)
			es = append(es, entries[late+1:]...)
			return join(append(es, entries[late]))
		}()), nil, true},
		{"two hundred entries moved to the end", withPack(func() []byte {
			es := append([][]byte{}, entries[:late-200]...)
			es = append(es, entries[late:]...)
			return join(append(es, entries[late-200:late]...))
		}()), nil, true},
		{"the pack cut inside a late entry", withPack(pack[:bytes.Index(pack, entries[late])+20]), nil, false},
		{"the line limit", honest, func(o *verify.Options) { o.Limits.MaxTranscriptLines = 1700 }, false},
		{"the byte limit", honest, func(o *verify.Options) {
			o.Limits.MaxTranscriptBytes = int64(len(honest[transcript.TranscriptFile].Data)) / 2
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := trusted(t)
			if tc.o != nil {
				tc.o(&o)
			}
			var prefetched, walked int64
			defer verify.StreamStats(func(p, w int64) { prefetched, walked = p, w })()
			got := reportJSON(t, tc.fsys, o)
			// The reader starts prefetching when the checker has opened
			// the pack, at the snapshot line; by then it may have read a
			// few batches ahead (so a bundle cut short by a limit may have
			// nothing prefetched), never more than four.
			if tc.o == nil && (prefetched < 100 || walked < 50) {
				t.Errorf("%s: the line reader prefetched %d entries (%d by walking the pack): the comparison would prove nothing", tc.name, prefetched, walked)
			}
			want := reportJSON(t, seekOnlyFS{tc.fsys}, o)
			if prefetched != 0 {
				t.Errorf("the line reader prefetched %d entries from a pack without ReadAt", prefetched)
			}
			if got != want {
				t.Fatalf("prefetched:\n%s\nchecker alone:\n%s", got, want)
			}
			if v := strings.Contains(got, `"verdict": "verified"`); v != tc.verified {
				t.Fatalf("verified %v, want %v:\n%s", v, tc.verified, got)
			}
			if tc.name == "honest" {
				if disk := reportJSON(t, verify.DirFS(dir), o); disk != got {
					t.Fatalf("DirFS:\n%s\nMapFS:\n%s", disk, got)
				}
			}
		})
	}
}

// TestStreamCancel: a context cancelled during verification ends it with
// the context's error, and the line reader is stopped (the race detector
// and the goroutine count see no reader left reading the closed pack).
func TestStreamCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("records a 3,000-attempt bundle")
	}
	_, fsys := streamBundle(t, 3000)
	ctx, cancel := context.WithCancel(context.Background())
	o := trusted(t)
	lines := int64(0)
	o.Progress = func(n int64) {
		if lines = n; n >= verify.ProgressEvery {
			cancel()
		}
	}
	rep, err := verifier(t, o).Bundle(ctx, fsys)
	if err != context.Canceled || rep != nil {
		t.Fatalf("Bundle = %v, %v after cancelling at line %d; want nil, context.Canceled", rep, err, lines)
	}
}
