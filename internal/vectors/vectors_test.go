package vectors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/internal/snapfile"
	"github.com/tracectl/tracectl/internal/vectors"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

var update = flag.Bool("update", false, "rewrite testdata/v4 from the generator")

// TestVectors runs every committed vector through tracectl's verifier.
func TestVectors(t *testing.T) {
	res, err := vectors.Run(context.Background(), vectors.Embedded(), vectors.Tracectl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s (row %d): error %q, problems %q; got %+v", r.ID, r.Row, r.Error, r.Problems, r.Got)
		}
	}
}

// TestFrozenVectors: the vectors published for earlier transcript formats
// (testdata/v1: blob files; testdata/v2: frames and the payload pack,
// unsalted digests; never regenerated) still verify as they say. A bundle
// stays verifiable after the format moved on.
func TestFrozenVectors(t *testing.T) {
	for _, dir := range vectors.FrozenDirs {
		res, err := vectors.Run(context.Background(), os.DirFS(dir), vectors.Tracectl)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) < 40 {
			t.Fatalf("%s: %d frozen vectors, want at least 40", dir, len(res))
		}
		for _, r := range res {
			if !r.Pass {
				t.Errorf("%s: %s (row %d): error %q, problems %q; got %+v", dir, r.ID, r.Row, r.Error, r.Problems, r.Got)
			}
		}
	}
}

// TestEveryRowCovered requires, for each of the nine rows, a positive
// control and at least one negative or boundary case.
func TestEveryRowCovered(t *testing.T) {
	vs, err := vectors.Load(vectors.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	pos, neg := map[int64]int{}, map[int64]int{}
	for _, v := range vs {
		if v.Manifest.Case == vectors.CasePositive {
			pos[v.Manifest.Row]++
		} else {
			neg[v.Manifest.Row]++
		}
	}
	for row := int64(1); row <= 9; row++ {
		if pos[row] == 0 || neg[row] == 0 {
			t.Errorf("row %d: %d positive, %d negative or boundary vectors", row, pos[row], neg[row])
		}
	}
}

// TestGenerateDeterministic regenerates every vector and requires the
// committed files byte for byte (go test -update rewrites them).
func TestGenerateDeterministic(t *testing.T) {
	got, err := vectors.Generate()
	if err != nil {
		t.Fatal(err)
	}
	again, err := vectors.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(got, again, bytes.Equal) {
		t.Fatal("two runs of Generate differ")
	}
	if *update {
		if err := os.RemoveAll(vectors.EmbeddedDir); err != nil {
			t.Fatal(err)
		}
		if err := vectors.WriteDir(vectors.EmbeddedDir, got); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := vectors.ReadTree(os.DirFS(vectors.EmbeddedDir), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		c, ok := committed[name]
		switch {
		case !ok:
			t.Errorf("%s: generated, not committed (go test ./internal/vectors -run TestGenerateDeterministic -update)", name)
		case !bytes.Equal(c, got[name]):
			t.Errorf("%s: the committed bytes differ from the generator's (a format changed? go test ./internal/vectors -run TestGenerateDeterministic -update)", name)
		}
	}
	for name := range committed {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: committed, not generated", name)
		}
	}
	// The binary carries the same files.
	embedded, err := vectors.ReadTree(vectors.Embedded(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !*update && !maps.EqualFunc(embedded, committed, bytes.Equal) {
		t.Error("the embedded vectors differ from testdata/v4")
	}
	var size int
	for _, b := range committed {
		size += len(b)
	}
	if size > 2<<20 {
		t.Errorf("the vectors hold %d bytes; keep them well under 5 MB", size)
	}
}

// TestWriteDirExclusive: generation never overwrites.
func TestWriteDirExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	files := map[string][]byte{"a/vector.json": []byte("x")}
	if err := vectors.WriteDir(dir, files); err != nil {
		t.Fatal(err)
	}
	if err := vectors.WriteDir(dir, files); err == nil {
		t.Fatal("WriteDir into an existing directory succeeded")
	}
	for _, bad := range []string{"../x", "/abs", "a/../../x", `a\b`} {
		if err := vectors.WriteDir(filepath.Join(t.TempDir(), "w"), map[string][]byte{bad: nil}); err == nil {
			t.Errorf("WriteDir accepted path %q", bad)
		}
	}
}

// TestRunDetectsWrongOutcomes: a verifier that reports the wrong verdict,
// misses a required code, reports a forbidden one, or fails, fails the
// vector and says why.
func TestRunDetectsWrongOutcomes(t *testing.T) {
	fsys := vectors.Embedded()
	for _, tc := range []struct {
		name string
		f    vectors.VerifierFunc
		want string
	}{
		{"always verified", func(context.Context, *vectors.Vector) (*vectors.Outcome, error) {
			return &vectors.Outcome{Verdict: "verified", Codes: []string{}}, nil
		}, "required code"},
		{"every code", func(_ context.Context, v *vectors.Vector) (*vectors.Outcome, error) {
			return &vectors.Outcome{Verdict: v.Manifest.Expect.Verdict, Codes: vectors.Codes(v.Manifest.Kind)}, nil
		}, "forbidden code"},
		{"error", func(context.Context, *vectors.Vector) (*vectors.Outcome, error) {
			return nil, os.ErrNotExist
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := vectors.Run(context.Background(), fsys, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, r := range res {
				if r.Pass {
					continue
				}
				failed++
				if tc.want != "" && !strings.Contains(strings.Join(r.Problems, "; "), tc.want) && r.Got.Verdict == r.Expected.Verdict {
					t.Errorf("%s: problems %q, want one with %q", r.ID, r.Problems, tc.want)
				}
				if tc.want == "" && r.Error == "" {
					t.Errorf("%s: no error recorded", r.ID)
				}
			}
			if failed == 0 {
				t.Error("no vector failed")
			}
		})
	}
}

// TestCanonTextCompared: a canon vector passes only with the exact
// canonical text.
func TestCanonTextCompared(t *testing.T) {
	vs, err := vectors.Load(vectors.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range vs {
		if v.Manifest.Expect.Canonical == "" {
			continue
		}
		n++
		o, err := vectors.Tracectl(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		if p := vectors.Compare(v, o); len(p) != 0 {
			t.Fatalf("%s: %q", v.Dir, p)
		}
		bad := *o.Canonical + " "
		o.Canonical = &bad
		if p := vectors.Compare(v, o); len(p) != 1 {
			t.Errorf("%s: a changed canonical text gave %q", v.Dir, p)
		}
		o.Canonical = nil
		if p := vectors.Compare(v, o); len(p) != 1 {
			t.Errorf("%s: a missing canonical text gave %q", v.Dir, p)
		}
	}
	if n == 0 {
		t.Fatal("no canon vector with canonical bytes")
	}
}

// TestLoadRejects: a vectors directory with a bad vector is not run.
func TestLoadRejects(t *testing.T) {
	good, err := vectors.ReadTree(vectors.Embedded(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(edit func(fstest.MapFS)) fstest.MapFS {
		m := fstest.MapFS{}
		for k, v := range good {
			m[k] = &fstest.MapFile{Data: v}
		}
		edit(m)
		return m
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no manifest":   mk(func(m fstest.MapFS) { delete(m, "r1-snapshot-matches/vector.json") }),
		"id is not dir": mk(func(m fstest.MapFS) { m["r1-other/vector.json"] = m["r1-snapshot-matches/vector.json"] }),
		"bad manifest":  mk(func(m fstest.MapFS) { m["r1-snapshot-matches/vector.json"] = &fstest.MapFile{Data: []byte("{}")} }),
		"empty":         {},
	} {
		if _, err := vectors.Load(fsys); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
	// A README at the top level is ignored.
	if _, err := vectors.Load(mk(func(m fstest.MapFS) { m["README.md"] = &fstest.MapFile{Data: []byte("x")} })); err != nil {
		t.Errorf("README: %v", err)
	}
}

// TestSpecListsVectors keeps spec/vectors.md's table of vectors in step
// with the committed vectors: every id, its row and its expected verdict.
func TestSpecListsVectors(t *testing.T) {
	spec, err := os.ReadFile("../../spec/vectors.md")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vectors.Load(vectors.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(spec), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) > 3 && strings.HasPrefix(strings.TrimSpace(cells[2]), "`r") {
			listed[strings.Trim(strings.TrimSpace(cells[2]), "`")] = true
		}
	}
	for _, v := range vs {
		m := v.Manifest
		row := "| " + itoa(m.Row) + " | `" + m.ID + "` | " + m.Case + " | " + m.Expect.Verdict + " |"
		if !strings.Contains(string(spec), row) {
			t.Errorf("spec/vectors.md lacks the row %q", row)
		}
		delete(listed, m.ID)
	}
	for id := range listed {
		t.Errorf("spec/vectors.md lists %s, which is not a vector", id)
	}
}

func itoa(n int64) string { return string(rune('0' + n)) }

// TestCodesDocumented: every code a vector names is a documented verify or
// canon code (ParseManifest enforces the closed lists; this checks that the
// lists are the spec's).
func TestCodesDocumented(t *testing.T) {
	verification, err := os.ReadFile("../../spec/verification.md")
	if err != nil {
		t.Fatal(err)
	}
	canonSpec, err := os.ReadFile("../../spec/canonicalization.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range vectors.Codes(vectors.KindBundle) {
		if !bytes.Contains(verification, []byte("| `"+c+"` |")) {
			t.Errorf("bundle code %s is not in spec/verification.md's table", c)
		}
	}
	if len(vectors.Codes(vectors.KindBundle)) != len(verify.AllCodes()) {
		t.Error("bundle codes are not verify.AllCodes")
	}
	for _, c := range vectors.Codes(vectors.KindCanon) {
		if !bytes.Contains(canonSpec, []byte("`"+c+"`")) {
			t.Errorf("canon code %s is not in spec/canonicalization.md", c)
		}
	}
}

// TestSpecReadme keeps spec/README.md honest: it names every format id and
// media type, and its wire-shape examples are still lines of the vector
// files they are quoted from.
func TestSpecReadme(t *testing.T) {
	data, err := os.ReadFile("../../spec/README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for _, id := range []string{sign.Profile, transcript.Format, transcript.Profile, transcript.MerkleAlg,
		canon.PolicyV02ID, canon.PolicyMCPDeclID, snapshot.ManifestFormat, snapfile.Format, "tracectl.inclusion-proof/v1",
		verify.MediaType, vectors.Format, vectors.RunMediaType} {
		if !strings.Contains(readme, "| `"+id+"` |") {
			t.Errorf("spec/README.md's identifier table lacks %s", id)
		}
	}
	quoted := regexp.MustCompile("`internal/vectors/testdata/v4/([a-z0-9-]+/[a-z.]+)`")
	var source string
	var block []string
	inBlock, checked := false, 0
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case !inBlock && strings.HasPrefix(line, "```json"):
			inBlock, block = true, nil
		case inBlock && line == "```":
			inBlock = false
			if len(block) == 0 || !strings.HasPrefix(block[0], "{") {
				continue // an excerpt, reformatted
			}
			if source == "" {
				t.Errorf("an example block quotes no vector file: %.60s", block[0])
				continue
			}
			file, err := fs.ReadFile(vectors.Embedded(), source)
			if err != nil {
				t.Errorf("spec/README.md quotes %s: %v", source, err)
				continue
			}
			lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
			for _, l := range block {
				if !slices.Contains(lines, l) {
					t.Errorf("spec/README.md quotes a line that is not in %s (regenerated vectors? copy the new lines): %.80s", source, l)
				}
			}
			checked++
		case inBlock:
			block = append(block, line)
		default:
			if m := quoted.FindAllStringSubmatch(line, -1); m != nil {
				source = m[len(m)-1][1]
			}
		}
	}
	if checked < 2 {
		t.Errorf("%d example blocks checked, want the transcript and the record", checked)
	}
}

// TestOutcomeContract: tracectl's outcome for every vector, printed as
// 'tracectl vectors verify' prints it and read back as 'vectors run
// --verifier' reads it, still passes: the external-verifier contract loses
// nothing.
func TestOutcomeContract(t *testing.T) {
	vs, err := vectors.Load(vectors.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		o, err := vectors.Tracectl(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		back, err := vectors.ParseOutcome(b)
		if err != nil {
			t.Fatalf("%s: %v", v.Dir, err)
		}
		if p := vectors.Compare(v, back); len(p) != 0 {
			t.Errorf("%s: after the JSON round trip: %q", v.Dir, p)
		}
	}
}

// TestCountsAgree: the one count model holds for every bundle vector, of
// the current set and the frozen ones: the classes show, export, the
// report and the OTLP spans count by (inspect's Outcome.Class) equal the
// verifier's counts and, when the seal line was read and the history has
// no conflict, the seal's.
func TestCountsAgree(t *testing.T) {
	sets := map[string]fs.FS{"embedded": vectors.Embedded()}
	for _, d := range vectors.FrozenDirs {
		sets[d] = os.DirFS(d)
	}
	checked := 0
	for name, fsys := range sets {
		vs, err := vectors.Load(fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			m := v.Manifest
			if m.Kind != vectors.KindBundle {
				continue
			}
			at, err := time.Parse(time.RFC3339, m.Bundle.At)
			if err != nil {
				t.Fatal(err)
			}
			pem, err := fs.ReadFile(v.FS, m.Bundle.TrustedKey)
			if err != nil {
				t.Fatal(err)
			}
			key, err := sign.ParsePublicKey(pem)
			if err != nil {
				t.Fatal(err)
			}
			vf, err := verify.New(verify.Options{TrustedKey: key, At: at, AcceptWithheld: m.Bundle.AcceptWithheld})
			if err != nil {
				t.Fatal(err)
			}
			rep, _ := vf.Bundle(context.Background(), v.FS)
			b, err := inspect.Load(context.Background(), v.FS, inspect.Options{})
			if rep == nil || err != nil || b.Problem != "" || rep.Has(verify.CodeHistoryConflict) || rep.Has(verify.CodeIdentityConflict) || rep.Has(verify.CodeTranscriptMalformed) {
				continue // no single history to count
			}
			n := map[string]int64{}
			for _, a := range b.Attempts {
				n[a.Outcome.Class()]++
			}
			c := rep.Counts
			if c.Attempts != int64(len(b.Attempts)) || c.Responses != n[inspect.ClassResponse] || c.TransportFailures != n[inspect.ClassTransportFailure] || c.Unknown != n[inspect.ClassUnknown] {
				t.Errorf("%s/%s: verify counts %d attempts %d/%d/%d, show classes %d attempts %v", name, m.ID, c.Attempts, c.Responses, c.TransportFailures, c.Unknown, len(b.Attempts), n)
			}
			if s := b.Seal; s != nil && (s.Responses != c.Responses || s.TransportFailures != c.TransportFailures || s.Unknown != c.Unknown) {
				t.Errorf("%s/%s: seal counts %d/%d/%d, verify %d/%d/%d", name, m.ID, s.Responses, s.TransportFailures, s.Unknown, c.Responses, c.TransportFailures, c.Unknown)
			}
			for _, r := range b.Records() {
				if r.OutcomeClass == "" {
					t.Errorf("%s/%s: export record %s has no outcome_class", name, m.ID, r.AttemptID)
				}
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("counts compared for %d bundle vectors, want at least 100", checked)
	}
	t.Logf("counts agree for %d bundle vectors", checked)
}
