package vectors_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/vectors"
)

// manifests returns the bytes of every committed vector.json.
func manifests(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	fsys := vectors.Embedded()
	names, err := fs.Glob(fsys, "*/"+vectors.ManifestFile)
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// TestManifestRoundTrip: every committed manifest parses, and encoding it
// gives back its exact bytes.
func TestManifestRoundTrip(t *testing.T) {
	for name, data := range manifests(t) {
		m, err := vectors.ParseManifest(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		back, err := m.Encode()
		if err != nil || !bytes.Equal(back, data) {
			t.Errorf("%s: Encode gives %s, %v", name, back, err)
		}
	}
}

// edited returns a committed manifest of the given kind with f applied,
// re-encoded canonically (so only f's change can be refused).
func edited(t *testing.T, kind string, f func(map[string]any)) []byte {
	t.Helper()
	for _, data := range manifests(t) {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] != kind || kind == vectors.KindCanon && m["expect"].(map[string]any)["canonical"] == nil {
			continue
		}
		f(m)
		b, err := canon.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("no %s manifest", kind)
	return nil
}

func TestParseManifestRejects(t *testing.T) {
	expect := func(m map[string]any) map[string]any { return m["expect"].(map[string]any) }
	for _, tc := range []struct {
		name string
		kind string
		f    func(map[string]any)
	}{
		{"format", vectors.KindBundle, func(m map[string]any) { m["format"] = "tracectl.vector/v2" }},
		{"unknown member", vectors.KindBundle, func(m map[string]any) { m["extra"] = true }},
		{"id with slash", vectors.KindBundle, func(m map[string]any) { m["id"] = "r1/x" }},
		{"id upper case", vectors.KindBundle, func(m map[string]any) { m["id"] = "R1" }},
		{"row 0", vectors.KindBundle, func(m map[string]any) { m["row"] = 0 }},
		{"row 10", vectors.KindBundle, func(m map[string]any) { m["row"] = 10 }},
		{"row name of another row", vectors.KindBundle, func(m map[string]any) { m["row_name"] = "Binding failure"; m["row"] = 1 }},
		{"case", vectors.KindBundle, func(m map[string]any) { m["case"] = "maybe" }},
		{"empty checks", vectors.KindBundle, func(m map[string]any) { m["checks"] = "" }},
		{"long checks", vectors.KindBundle, func(m map[string]any) { m["checks"] = strings.Repeat("x", vectors.MaxTextBytes+1) }},
		{"kind", vectors.KindBundle, func(m map[string]any) { m["kind"] = "proof" }},
		{"bundle without verifier", vectors.KindBundle, func(m map[string]any) { delete(m, "verifier") }},
		{"bundle with canon", vectors.KindBundle, func(m map[string]any) { m["canon"] = map[string]any{"input": "a", "policy": canon.PolicyV02ID} }},
		{"at not UTC", vectors.KindBundle, func(m map[string]any) { m["verifier"].(map[string]any)["at"] = "2026-07-01T14:05:00+02:00" }},
		{"at with fraction", vectors.KindBundle, func(m map[string]any) { m["verifier"].(map[string]any)["at"] = "2026-07-01T12:05:00.5Z" }},
		{"key path", vectors.KindBundle, func(m map[string]any) { m["verifier"].(map[string]any)["trusted_key"] = "../key.pem" }},
		{"key hidden", vectors.KindBundle, func(m map[string]any) { m["verifier"].(map[string]any)["trusted_key"] = ".key" }},
		{"verdict of canon", vectors.KindBundle, func(m map[string]any) { expect(m)["verdict"] = vectors.OutcomeCanonical }},
		{"unknown code", vectors.KindBundle, func(m map[string]any) { expect(m)["required_codes"] = []any{"no_such_code"} }},
		{"canon code in bundle", vectors.KindBundle, func(m map[string]any) { expect(m)["required_codes"] = []any{"unsupported_number"} }},
		{"code twice", vectors.KindBundle, func(m map[string]any) { expect(m)["required_codes"] = []any{"binding_failure", "binding_failure"} }},
		{"codes unsorted", vectors.KindBundle, func(m map[string]any) { expect(m)["required_codes"] = []any{"trusted_key_match", "binding_failure"} }},
		{"required and forbidden", vectors.KindBundle, func(m map[string]any) {
			expect(m)["required_codes"] = []any{"binding_failure"}
			expect(m)["forbidden_codes"] = []any{"binding_failure"}
		}},
		{"codes null", vectors.KindBundle, func(m map[string]any) { expect(m)["forbidden_codes"] = nil }},
		{"codes absent", vectors.KindBundle, func(m map[string]any) { delete(expect(m), "required_codes") }},
		{"canonical in bundle", vectors.KindBundle, func(m map[string]any) { expect(m)["canonical"] = "c.json" }},
		{"canon policy short name", vectors.KindCanon, func(m map[string]any) { m["canon"].(map[string]any)["policy"] = "v02" }},
		{"canon policy unknown", vectors.KindCanon, func(m map[string]any) { m["canon"].(map[string]any)["policy"] = "x" }},
		{"canon without expected bytes", vectors.KindCanon, func(m map[string]any) { delete(expect(m), "canonical") }},
		{"canon expected bytes are the input", vectors.KindCanon, func(m map[string]any) { expect(m)["canonical"] = "input.json" }},
		{"canon with verifier", vectors.KindCanon, func(m map[string]any) {
			m["verifier"] = map[string]any{"at": "2026-07-01T12:05:00Z", "trusted_key": "k"}
		}},
		{"canon verdict of bundle", vectors.KindCanon, func(m map[string]any) { expect(m)["verdict"] = "verified" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := edited(t, tc.kind, tc.f)
			if _, err := vectors.ParseManifest(data); !errors.Is(err, vectors.ErrManifest) {
				t.Errorf("ParseManifest(%s) = %v, want ErrManifest", data, err)
			}
		})
	}
}

// TestParseManifestBytes: the exact bytes matter (canonical form, one
// encoding), and the size limit is inclusive.
func TestParseManifestBytes(t *testing.T) {
	var data []byte
	for _, d := range manifests(t) {
		data = d
		break
	}
	for name, b := range map[string][]byte{
		"trailing newline": append(bytes.Clone(data), '\n'),
		"indented":         indent(t, data),
		"not JSON":         []byte("vector"),
		"duplicate member": append([]byte(`{"case":"x",`), data[1:]...),
	} {
		if _, err := vectors.ParseManifest(b); !errors.Is(err, vectors.ErrManifest) {
			t.Errorf("%s: %v, want ErrManifest", name, err)
		}
	}
	at := bytes.Repeat([]byte(" "), vectors.MaxManifestBytes)
	if _, err := vectors.ParseManifest(at); errors.Is(err, vectors.ErrTooLarge) || !errors.Is(err, vectors.ErrManifest) {
		t.Errorf("at the limit: %v, want a non-size rejection", err)
	}
	if _, err := vectors.ParseManifest(append(at, ' ')); !errors.Is(err, vectors.ErrTooLarge) {
		t.Errorf("one past the limit: %v, want ErrTooLarge", err)
	}
	// checks at its limit is accepted.
	long := edited(t, vectors.KindBundle, func(m map[string]any) { m["checks"] = strings.Repeat("x", vectors.MaxTextBytes) })
	if _, err := vectors.ParseManifest(long); err != nil {
		t.Errorf("checks of %d bytes: %v", vectors.MaxTextBytes, err)
	}
}

func indent(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestParseOutcome(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want vectors.Outcome
	}{
		{`{"verdict":"failed","codes":["binding_failure"]}`, true, vectors.Outcome{Verdict: "failed", Codes: []string{"binding_failure"}}},
		{" \n{\"codes\":[],\"verdict\":\"verified\",\"findings\":[{\"x\":1.5}]}\n", true, vectors.Outcome{Verdict: "verified", Codes: []string{}}},
		{`{"verdict":"canonical","codes":[],"canonical":"{\"a\":1}"}`, true, vectors.Outcome{Verdict: "canonical", Codes: []string{}}},
		{`{"verdict":"failed"}`, false, vectors.Outcome{}},
		{`{"verdict":"","codes":[]}`, false, vectors.Outcome{}},
		{`{"verdict":1,"codes":[]}`, false, vectors.Outcome{}},
		{`{"verdict":"failed","codes":[1]}`, false, vectors.Outcome{}},
		{`{"verdict":"failed","codes":"binding_failure"}`, false, vectors.Outcome{}},
		{`{"verdict":"failed","verdict":"verified","codes":[]}`, false, vectors.Outcome{}},
		{`{"verdict":"canonical","codes":[],"canonical":{}}`, false, vectors.Outcome{}},
		{`["failed"]`, false, vectors.Outcome{}},
		{`{"verdict":"failed","codes":[]} {}`, false, vectors.Outcome{}},
		{``, false, vectors.Outcome{}},
	} {
		got, err := vectors.ParseOutcome([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("ParseOutcome(%q) error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, vectors.ErrOutcome) {
				t.Errorf("ParseOutcome(%q) = %v, want ErrOutcome", tc.in, err)
			}
			continue
		}
		if got.Verdict != tc.want.Verdict || strings.Join(got.Codes, ",") != strings.Join(tc.want.Codes, ",") {
			t.Errorf("ParseOutcome(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	big := append([]byte(`{"verdict":"failed","codes":[],"pad":"`), bytes.Repeat([]byte("x"), vectors.MaxOutcomeBytes)...)
	if _, err := vectors.ParseOutcome(append(big, `"}`...)); !errors.Is(err, vectors.ErrTooLarge) {
		t.Errorf("oversized outcome: %v, want ErrTooLarge", err)
	}
	many := `{"verdict":"failed","codes":[` + strings.TrimSuffix(strings.Repeat(`"c",`, vectors.MaxOutcomeCodes), ",") + `]}`
	if _, err := vectors.ParseOutcome([]byte(many)); err != nil {
		t.Errorf("%d codes: %v", vectors.MaxOutcomeCodes, err)
	}
	many = strings.Replace(many, `[`, `["c",`, 1)
	if _, err := vectors.ParseOutcome([]byte(many)); !errors.Is(err, vectors.ErrTooLarge) {
		t.Errorf("%d codes: %v, want ErrTooLarge", vectors.MaxOutcomeCodes+1, err)
	}
}

// FuzzParseManifest: the parser never panics, and what it accepts encodes
// back to exactly the input.
func FuzzParseManifest(f *testing.F) {
	for _, d := range manifests(f) {
		f.Add(d)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := vectors.ParseManifest(data)
		if err != nil {
			if !errors.Is(err, vectors.ErrManifest) {
				t.Fatalf("error %v does not wrap ErrManifest", err)
			}
			return
		}
		back, err := m.Encode()
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("accepted %q but encodes to %q (%v)", data, back, err)
		}
	})
}

// FuzzParseOutcome: the parser never panics and honours its bounds.
func FuzzParseOutcome(f *testing.F) {
	f.Add([]byte(`{"verdict":"failed","codes":["binding_failure"]}`))
	f.Add([]byte(`{"verdict":"canonical","codes":[],"canonical":"{}"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := vectors.ParseOutcome(data)
		if err != nil {
			if !errors.Is(err, vectors.ErrOutcome) {
				t.Fatalf("error %v does not wrap ErrOutcome", err)
			}
			return
		}
		if o.Verdict == "" || o.Codes == nil || len(o.Codes) > vectors.MaxOutcomeCodes {
			t.Fatalf("accepted an outcome outside the contract: %+v", o)
		}
	})
}
