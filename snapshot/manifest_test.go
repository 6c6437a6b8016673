package snapshot

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

func twoPages(t *testing.T) *Snapshot {
	t.Helper()
	c2 := "c2"
	s, _ := collect(t, Limits{},
		ex{listReq("1", nil), page("1", &c2, tool("a"), tool("b"))},
		ex{listReq("2", &c2), page("2", nil, `{"name":"c","description":"third","inputSchema":{"type":"object","minimum":0.5}}`)})
	return s
}

func TestParseManifestRejects(t *testing.T) {
	s := twoPages(t)
	good := string(s.Bytes)
	tests := []struct {
		name string
		data string
	}{
		{"whitespace", " " + good},
		{"not canonical order", `{"format":"` + ManifestFormat + `",` + strings.Replace(good[1:], `"format":"`+ManifestFormat+`",`, "", 1)},
		{"unknown member", strings.Replace(good, `"complete":true,`, `"complete":true,"extra":1,`, 1)},
		{"complete contradicts facts", strings.Replace(good, `"terminal_reached":true`, `"terminal_reached":false`, 1)},
		{"claims complete when incomplete", strings.Replace(good, `"list_changed_during_collection":false`, `"list_changed_during_collection":true`, 1)},
		{"explicit null", strings.Replace(good, `"collection":{`, `"collection":{"stop":null,`, 1)},
		{"wrong format", strings.Replace(good, ManifestFormat, "tracectl.snapshot.manifest/v0", 1)},
		{"float", strings.Replace(good, `"tools":2`, `"tools":2.5`, 1)},
		{"duplicate key", strings.Replace(good, `"complete":true,`, `"complete":true,"complete":true,`, 1)},
		{"tool count", strings.Replace(good, `"tools":2`, `"tools":3`, 1)},
		{"retained bytes", strings.Replace(good, `"retained_bytes":`, `"retained_bytes":1`, 1)},
		{"reused without original", strings.Replace(good, `"provenance":"fresh"`, `"provenance":"reused"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.data == good {
				t.Fatal("test case does not change the manifest")
			}
			if _, err := ParseManifest([]byte(tt.data)); !errors.Is(err, errManifest) {
				t.Errorf("got %v, want ErrManifest", err)
			}
		})
	}
	if _, err := ParseManifest([]byte(good)); err != nil {
		t.Fatalf("good manifest: %v", err)
	}
}

func TestParseManifestSizeLimit(t *testing.T) {
	// Limit+1 is refused before any parsing; the limit itself reaches the
	// parser (and fails there for other reasons: it is not a manifest).
	big := bytes.Repeat([]byte(" "), MaxManifestBytes+1)
	big[0] = 'x' // fails at once when it reaches the parser
	if _, err := ParseManifest(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("limit+1: %v", err)
	}
	if _, err := ParseManifest(big[:MaxManifestBytes]); err == nil || strings.Contains(err.Error(), "limit") {
		t.Errorf("at limit: %v", err)
	}
}

func TestVerifyPages(t *testing.T) {
	s := twoPages(t)
	m := s.Manifest
	load := snapshotLoader(s)
	t.Run("all there", func(t *testing.T) {
		if p := VerifyPages(m, load); len(p) != 0 {
			t.Fatal(p)
		}
	})
	t.Run("missing page is unavailable", func(t *testing.T) {
		probs := VerifyPages(m, func(d string) ([]byte, error) {
			if d == m.Pages[1].Response.Digest {
				return nil, fs.ErrNotExist
			}
			return load(d)
		})
		if len(probs) != 1 || probs[0].Kind != ProblemUnavailable || probs[0].Pointer != "/pages/1/response" {
			t.Fatalf("%v", probs)
		}
	})
	t.Run("changed bytes are a mismatch", func(t *testing.T) {
		probs := VerifyPages(m, func(d string) ([]byte, error) {
			b, err := load(d)
			if d == m.Pages[1].Response.Digest {
				b = bytes.Replace(b, []byte("third"), []byte("THIRD"), 1)
			}
			return b, err
		})
		if len(probs) != 1 || probs[0].Kind != ProblemMismatch || probs[0].Pointer != "/pages/1/response" {
			t.Fatalf("%v", probs)
		}
	})
	t.Run("manifest lying about a tool digest", func(t *testing.T) {
		m2 := *m
		m2.Tools = append([]Tool{}, m.Tools...)
		m2.Tools[2].Declaration.Digest = canon.SHA256([]byte("other"))
		probs := VerifyPages(&m2, load)
		if len(probs) != 1 || probs[0].Kind != ProblemMismatch || probs[0].Pointer != "/tools/2/declaration" {
			t.Fatalf("%v", probs)
		}
	})
	t.Run("manifest lying about a cursor", func(t *testing.T) {
		m2 := *m
		m2.Pages = append([]Page{}, m.Pages...)
		m2.Pages[0].NextCursor = Field{State: statePresent, Value: ptr("zz")}
		probs := VerifyPages(&m2, load)
		if len(probs) != 1 || probs[0].Kind != ProblemMismatch || probs[0].Pointer != "/pages/0/next_cursor" {
			t.Fatalf("%v", probs)
		}
	})
}

func TestReuse(t *testing.T) {
	s := twoPages(t)
	r, err := Reuse(s.Manifest, FreshnessPolicy{Name: "ttl", MaxAgeMs: ptr(int64(60000)), AgeMs: ptr(int64(1200))})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if canon.SHA256(b) == s.Digest {
		t.Error("a reuse has the original's digest")
	}
	o := r.Cache.Original
	if r.Cache.Provenance != ProvenanceReused || o.CaptureID != s.Manifest.CaptureID || o.ManifestDigest != s.Digest {
		t.Errorf("cache %+v", r.Cache)
	}
	if _, err := ParseManifest(b); err != nil {
		t.Fatal(err)
	}
	if p := VerifyPages(r, snapshotLoader(s)); len(p) != 0 {
		t.Fatal(p)
	}
	// Reuse of a reuse names the capture that fetched the pages.
	rr, err := Reuse(r, FreshnessPolicy{Name: "max_age"})
	if err != nil || rr.Cache.Original.CaptureID != s.Manifest.CaptureID {
		t.Fatalf("%v %+v", err, rr.Cache)
	}
	if _, err := Reuse(s.Manifest, FreshnessPolicy{}); err == nil {
		t.Error("reuse without a policy name accepted")
	}
	changed := markListChangedBeforeDispatch(r)
	if changed.Complete || changed.IncompleteReason() != reasonListChangedBeforeDispatch || !r.Complete {
		t.Errorf("mark: %v %q (original complete %v)", changed.Complete, changed.IncompleteReasons, r.Complete)
	}
}
