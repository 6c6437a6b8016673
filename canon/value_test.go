package canon

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string, o ParseOptions) *Doc {
	t.Helper()
	d, err := Parse([]byte(s), o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestValueNavigation(t *testing.T) {
	const in = `{"z":[true,null,"a\u00e9\n"],"a/b":{"m~n":[0,{"":-1.50}]},"y":false}`
	d := mustParse(t, in, ParseOptions{})
	root := d.Root()
	if root.Kind() != KindObject || root.Len() != 3 || root.Pointer() != "" || root.Offset() != 0 || string(root.Raw()) != in {
		t.Fatalf("root: kind %v len %d ptr %q off %d", root.Kind(), root.Len(), root.Pointer(), root.Offset())
	}
	// Members in document order with unescaped names.
	var names []string
	for _, m := range root.Members() {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "z,a/b,y" {
		t.Errorf("Members order = %s", got)
	}
	z, ok := root.Get("z")
	if !ok || z.Kind() != KindArray || z.Len() != 3 {
		t.Fatalf("Get(z) = %v %v", z.Kind(), ok)
	}
	el := z.Elems()
	if b, ok := el[0].Bool(); !ok || !b {
		t.Errorf("Bool = %v %v", b, ok)
	}
	if el[1].Kind() != KindNull {
		t.Errorf("Kind = %v", el[1].Kind())
	}
	if s, ok := el[2].Str(); !ok || s != "a\u00e9\n" {
		t.Errorf("Str = %q %v", s, ok)
	}
	if string(el[2].Raw()) != `"a\u00e9\n"` || el[2].Pointer() != "/z/2" {
		t.Errorf("Raw %s Pointer %s", el[2].Raw(), el[2].Pointer())
	}
	ab, _ := root.Get("a/b")
	mn, _ := ab.Get("m~n")
	inner := mn.Elems()[1]
	neg, ok := inner.Get("")
	if !ok || neg.Pointer() != "/a~1b/m~0n/1/" || string(neg.Raw()) != "-1.50" {
		t.Errorf("Get(\"\") = %s at %q", neg.Raw(), neg.Pointer())
	}
	if neg.Offset() != int64(strings.Index(in, "-1.50")) {
		t.Errorf("Offset = %d", neg.Offset())
	}
	if c, err := inner.Canonical(PolicyMCPDecl); err != nil || string(c) != `{"":-1.5}` {
		t.Errorf("subtree Canonical = %s, %v", c, err)
	}
	_, err := inner.Canonical(PolicyV02)
	checkErr(t, err, CodeUnsupportedNumber, "/a~1b/m~0n/1/", neg.Offset())

	// Wrong-kind accessors report false or empty, never panic.
	if _, ok := z.Get("x"); ok {
		t.Error("Get on an array")
	}
	if _, ok := z.Str(); ok {
		t.Error("Str on an array")
	}
	if _, ok := el[2].Bool(); ok {
		t.Error("Bool on a string")
	}
	if el[2].Len() != 0 || el[2].Elems() != nil || el[2].Members() != nil {
		t.Error("container accessors on a string")
	}
	if _, ok := root.Get("missing"); ok {
		t.Error("Get(missing)")
	}
}

func TestZeroValue(t *testing.T) {
	var v Value
	if v.Valid() || v.Kind() != 0 || v.Raw() != nil || v.Offset() != 0 || v.Pointer() != "" || v.Len() != 0 || v.HasDuplicates() {
		t.Error("zero Value accessors")
	}
	if _, ok := v.Get("a"); ok {
		t.Error("zero Value Get")
	}
	if _, err := v.Canonical(PolicyV02); err == nil {
		t.Error("zero Value Canonical")
	}
	if _, err := v.Digest(PolicyV02); err == nil {
		t.Error("zero Value Digest")
	}
}

// TestAllowDuplicateKeys: one ambiguous tool does not make the rest of a
// page unusable, but the ambiguity is never resolved or canonicalized.
func TestAllowDuplicateKeys(t *testing.T) {
	const in = `{"tools":[{"name":"a","x":1,"\u0078":2},{"name":"b","y":0.5}]}`
	if _, err := Parse([]byte(in), ParseOptions{}); !errors.Is(err, CodeDuplicateKey) {
		t.Fatalf("strict Parse: %v", err)
	}
	d := mustParse(t, in, ParseOptions{AllowDuplicateKeys: true})
	tools, _ := d.Root().Get("tools")
	a, b := tools.Elems()[0], tools.Elems()[1]
	if !a.HasDuplicates() || b.HasDuplicates() || d.Root().HasDuplicates() {
		t.Errorf("HasDuplicates: a %v b %v root %v", a.HasDuplicates(), b.HasDuplicates(), d.Root().HasDuplicates())
	}
	if _, ok := a.Get("x"); ok {
		t.Error("Get resolved an ambiguous name")
	}
	if n, ok := a.Get("name"); !ok || string(n.Raw()) != `"a"` {
		t.Error("Get of an unambiguous name in a marked object")
	}
	if len(a.Members()) != 3 {
		t.Errorf("Members hides a duplicate: %d", len(a.Members()))
	}
	wantOff := int64(strings.Index(in, `"\u0078"`))
	for _, v := range []Value{a, tools, d.Root()} {
		_, err := v.Canonical(PolicyMCPDecl)
		checkErr(t, err, CodeDuplicateKey, "/tools/0/x", wantOff)
		_, err = v.Digest(PolicyMCPDecl)
		checkErr(t, err, CodeDuplicateKey, "/tools/0/x", wantOff)
	}
	if c, err := b.Canonical(PolicyMCPDecl); err != nil || string(c) != `{"name":"b","y":0.5}` {
		t.Errorf("sibling Canonical = %s, %v", c, err)
	}
	// An unsupported number before the repeated name is reported first.
	d = mustParse(t, `{"a":1e400,"b":0,"a":2}`, ParseOptions{AllowDuplicateKeys: true})
	_, err := d.Root().Canonical(PolicyV02)
	checkErr(t, err, CodeUnsupportedNumber, "/a", 5)
	d = mustParse(t, `{"a":0,"a":2,"b":1e400}`, ParseOptions{AllowDuplicateKeys: true})
	_, err = d.Root().Canonical(PolicyV02)
	checkErr(t, err, CodeDuplicateKey, "/a", 7)
}

func TestDigest(t *testing.T) {
	in := []byte(`{"b":[1.0,1e3,-0],"a":"\u0041"}`)
	c, err := Canonicalize(in, PolicyV02)
	if err != nil || string(c) != `{"a":"A","b":[1,1000,0]}` {
		t.Fatalf("Canonicalize = %s, %v", c, err)
	}
	sum := sha256.Sum256(c)
	d, err := Digest(in, PolicyV02)
	if err != nil || d != SHA256(c) {
		t.Fatalf("Digest = %s, %v; want %s", d, err, SHA256(c))
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(d) {
		t.Errorf("digest form %q", d)
	}
	got, err := ParseDigest(d)
	if err != nil || got != sum {
		t.Errorf("ParseDigest(%s) = %x, %v", d, got, err)
	}
	for _, bad := range []string{
		"", "sha256:", strings.ToUpper(d), strings.Replace(d, "sha256", "sha512", 1), d + "0", d[:len(d)-1],
		"sha256:" + strings.Repeat("g", 64), "SHA256:" + d[7:], " " + d,
	} {
		if _, err := ParseDigest(bad); err == nil {
			t.Errorf("ParseDigest(%q) accepted", bad)
		}
	}
	// Streaming over a large document equals hashing the materialized bytes.
	doc := toolsListDoc(500)
	c, err = Canonicalize(doc, PolicyMCPDecl)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Digest(doc, PolicyMCPDecl); err != nil || d != SHA256(c) {
		t.Errorf("streamed digest %s, %v; want %s", d, err, SHA256(c))
	}
}

// chunkWriter records the size of every Write, and fails after limit bytes.
type chunkWriter struct {
	buf    bytes.Buffer
	writes []int
	limit  int
}

var errDiskFull = errors.New("disk full")

func (w *chunkWriter) Write(p []byte) (int, error) {
	if w.limit > 0 && w.buf.Len()+len(p) > w.limit {
		n := w.limit - w.buf.Len()
		w.buf.Write(p[:n])
		return n, errDiskFull
	}
	w.writes = append(w.writes, len(p))
	return w.buf.Write(p)
}

func TestWriteCanonical(t *testing.T) {
	doc := toolsListDoc(2000)
	want, err := Canonicalize(doc, PolicyMCPDecl)
	if err != nil {
		t.Fatal(err)
	}
	var w chunkWriter
	n, err := WriteCanonical(&w, doc, PolicyMCPDecl, Limits{})
	if err != nil || n != int64(len(want)) || !bytes.Equal(w.buf.Bytes(), want) {
		t.Fatalf("WriteCanonical = %d, %v; equal %v", n, err, bytes.Equal(w.buf.Bytes(), want))
	}
	if len(w.writes) < 2 {
		t.Errorf("output was not streamed: %v", w.writes)
	}
	for _, s := range w.writes {
		if s > 2*flushAt {
			t.Errorf("a write of %d bytes: the encoder buffered more than it should", s)
		}
	}
	// A failing writer stops the output and its error is returned.
	fw := chunkWriter{limit: 100_000}
	n, err = WriteCanonical(&fw, doc, PolicyMCPDecl, Limits{})
	if !errors.Is(err, errDiskFull) || n != 100_000 {
		t.Errorf("WriteCanonical to a failing writer = %d, %v", n, err)
	}
	if n, err := WriteCanonical(io.Discard, doc, PolicyV02, Limits{}); !errors.Is(err, CodeUnsupportedNumber) || n != 0 {
		t.Errorf("refused document: %d, %v", n, err)
	}
}

func TestCheck(t *testing.T) {
	if err := Check([]byte(`{"a":[1,"x"],"b":0.5}`), PolicyMCPDecl); err != nil {
		t.Errorf("canonical input: %v", err)
	}
	for _, in := range []string{`{"b":1,"a":2}`, `{"a": 1}`, `[1.0]`, `"\u0041"`, `[-0]`, ` 1`, `1 `} {
		if err := Check([]byte(in), PolicyMCPDecl); !errors.Is(err, ErrNotCanonical) {
			t.Errorf("Check(%s) = %v, want ErrNotCanonical", in, err)
		}
	}
	if err := Check([]byte(`{"a":0.5}`), PolicyV02); !errors.Is(err, CodeUnsupportedNumber) {
		t.Errorf("Check under v02 = %v", err)
	}
}

func TestMarshal(t *testing.T) {
	type rec struct {
		Z     string         `json:"z"`
		A     int64          `json:"a"`
		M     map[string]int `json:"m"`
		Empty []int          `json:"empty"`
	}
	got, err := Marshal(rec{Z: "<&>", A: MaxSafeInteger, M: map[string]int{"\ufb33": 2, "\U0001f600": 1}, Empty: []int{}})
	want := "{\"a\":9007199254740991,\"empty\":[],\"m\":{\"\U0001f600\":1,\"\ufb33\":2},\"z\":\"<&>\"}"
	if err != nil || string(got) != want {
		t.Errorf("Marshal = %s, %v; want %s", got, err, want)
	}
	if _, err := Marshal(map[string]any{"f": 0.5}); !errors.Is(err, CodeUnsupportedNumber) {
		t.Errorf("Marshal of a float: %v", err)
	}
	if _, err := Marshal(map[string]any{"n": int64(MaxSafeInteger + 1)}); !errors.Is(err, CodeUnsupportedNumber) {
		t.Errorf("Marshal of 2^53: %v", err)
	}
}
