package independent_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"golang.org/x/mod/sumdb/note"
)

// TestIndependentAnchors checks an anchored bundle's receipts
// (testdata/anchored: made by tracectl wrap --anchor against tracectl log
// serve, see writeAnchorFixture in cmd/tracectl) from spec/anchoring.md and
// trace-spec's registry-anchor leaf alone, with this package's own code:
// the leaf (Python's json.dumps with sorted keys and ensure_ascii, written
// here code unit by code unit), RFC 9162's inclusion (2.1.3.2) and
// consistency (2.1.4.2) algorithms, the checkpoint's signed note (x/mod's
// note), and the record's rule: record.json is the anchored record plus
// transparency naming its entry, both signed by cnf.jwk.
func TestIndependentAnchors(t *testing.T) {
	dir := filepath.Join("testdata", "anchored")
	pub, err := os.ReadFile(filepath.Join(dir, "log.pub"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(strings.TrimSpace(string(pub)))
	if err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "anchors", "[0-9]*.json"))
	slices.SortFunc(names, func(a, b string) int { return seqOf(a) - seqOf(b) })
	if len(names) < 3 {
		t.Fatalf("receipts %v", names)
	}
	var prevSize uint64
	var prevRoot []byte
	var lastLeaf []byte
	var lastPath, lastCons [][]byte
	var lastIndex, consFrom uint64
	var consFromRoot []byte
	covered := map[string]bool{}
	for _, name := range names {
		var r struct {
			Statement   string   `json:"statement"`
			Log         string   `json:"log"`
			LeafIndex   uint64   `json:"leaf_index"`
			LeafCount   uint64   `json:"leaf_count"`
			AuditPath   []string `json:"audit_path"`
			MerkleRoot  string   `json:"merkle_root"`
			Checkpoint  string   `json:"checkpoint"`
			Consistency *struct {
				FromSize uint64   `json:"from_size"`
				Proof    []string `json:"proof"`
			} `json:"consistency"`
		}
		if err := readJSON(name, &r); err != nil {
			t.Fatal(err)
		}
		n, err := note.Open([]byte(r.Checkpoint), note.VerifierList(v))
		if err != nil {
			t.Fatalf("%s: checkpoint: %v", name, err)
		}
		lines := strings.Split(n.Text, "\n")
		size, _ := strconv.ParseUint(lines[1], 10, 64)
		root, _ := base64.StdEncoding.DecodeString(lines[2])
		if lines[0] != v.Name() || size != r.LeafCount || "sha256:"+hex.EncodeToString(root) != r.MerkleRoot {
			t.Fatalf("%s: checkpoint %q is not the receipt's tree", name, n.Text)
		}
		stmt, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(r.Statement)))
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := anchorLeaf(stmt)
		if err != nil {
			t.Fatal(err)
		}
		lh := sha256.Sum256(append([]byte{0}, leaf...))
		if err := rfc9162Inclusion(r.LeafIndex, size, lh[:], hashes(t, r.AuditPath), root); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lastLeaf, lastPath, lastIndex = lh[:], hashes(t, r.AuditPath), r.LeafIndex
		if prevRoot != nil {
			if r.Consistency == nil || r.Consistency.FromSize != prevSize {
				t.Fatalf("%s: no consistency proof from %d", name, prevSize)
			}
			lastCons, consFrom, consFromRoot = hashes(t, r.Consistency.Proof), prevSize, prevRoot
			if err := rfc9162Consistency(prevSize, size, hashes(t, r.Consistency.Proof), prevRoot, root); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		prevSize, prevRoot = size, root
		covered[r.Statement] = true
		if r.Statement == "anchors/record.json" {
			checkAnchoredRecord(t, dir, r.Log, r.LeafIndex)
		}
	}
	ckpts, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "*.json"))
	for _, c := range ckpts {
		if !covered["checkpoints/"+filepath.Base(c)] {
			t.Errorf("checkpoint %s has no receipt", c)
		}
	}
	if !covered["anchors/record.json"] {
		t.Error("the record has no receipt")
	}

	// The checks have teeth: a changed statement, a flipped path node, a
	// consistency proof read between other sizes fail.
	stmt, _ := os.ReadFile(filepath.Join(dir, "anchors", "record.json"))
	changed, err := anchorLeaf(bytes.Replace(stmt, []byte(`"call_count":`), []byte(`"call_count":1`), 1))
	if err != nil {
		t.Fatal(err)
	}
	ch := sha256.Sum256(append([]byte{0}, changed...))
	if rfc9162Inclusion(lastIndex, prevSize, ch[:], lastPath, prevRoot) == nil {
		t.Error("a changed record is included")
	}
	flipped := slices.Clone(lastPath)
	flipped[0] = slices.Clone(flipped[0])
	flipped[0][0] ^= 1
	if rfc9162Inclusion(lastIndex, prevSize, lastLeaf, flipped, prevRoot) == nil {
		t.Error("a flipped audit path node verifies")
	}
	if rfc9162Inclusion(lastIndex, prevSize, lastLeaf, lastPath, prevRoot) != nil {
		t.Error("the unchanged proof no longer verifies")
	}
	if rfc9162Consistency(consFrom-1, prevSize, lastCons, consFromRoot, prevRoot) == nil {
		t.Error("a consistency proof verifies between other sizes")
	}
}

func seqOf(p string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(p), ".json"))
	return n
}

func hashes(t *testing.T, ss []string) [][]byte {
	t.Helper()
	out := make([][]byte, len(ss))
	for i, s := range ss {
		h, err := hex.DecodeString(strings.TrimPrefix(s, "sha256:"))
		if err != nil || len(h) != 32 || !strings.HasPrefix(s, "sha256:") {
			t.Fatalf("hash %q", s)
		}
		out[i] = h
	}
	return out
}

func node(l, r []byte) []byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(l)
	h.Write(r)
	return h.Sum(nil)
}

// rfc9162Inclusion is RFC 9162, 2.1.3.2, step by step.
func rfc9162Inclusion(index, size uint64, leaf []byte, path [][]byte, root []byte) error {
	if index >= size {
		return errors.New("index beyond the tree")
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return errors.New("path longer than the tree")
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || !bytes.Equal(r, root) {
		return errors.New("the audit path does not lead to the root")
	}
	return nil
}

// rfc9162Consistency is RFC 9162, 2.1.4.2, step by step.
func rfc9162Consistency(first, second uint64, path [][]byte, firstRoot, secondRoot []byte) error {
	if first == second {
		if len(path) != 0 || !bytes.Equal(firstRoot, secondRoot) {
			return errors.New("same size, other root")
		}
		return nil
	}
	if first == 0 || first > second || len(path) == 0 {
		return errors.New("bad consistency input")
	}
	if first&(first-1) == 0 {
		path = append([][]byte{firstRoot}, path...)
	}
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return errors.New("proof longer than the tree")
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = node(c, fr), node(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = node(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || !bytes.Equal(fr, firstRoot) || !bytes.Equal(sr, secondRoot) {
		return fmt.Errorf("the tree of %d is not a prefix of the tree of %d", first, second)
	}
	return nil
}

// anchorLeaf is trace-spec's registry-anchor preimage: Python's
// json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True).
func anchorLeaf(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var w bytes.Buffer
	if err := pyDump(&w, v); err != nil {
		return nil, err
	}
	return w.Bytes(), nil
}

func pyDump(w *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// Python sorts str keys by code point.
		slices.SortFunc(keys, func(a, b string) int { return slices.Compare([]rune(a), []rune(b)) })
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			pyString(w, k)
			w.WriteByte(':')
			if err := pyDump(w, x[k]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := pyDump(w, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	case string:
		pyString(w, x)
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err != nil {
			return fmt.Errorf("not an integer: %s", x)
		}
		w.WriteString(string(x))
	case bool:
		w.WriteString(strconv.FormatBool(x))
	case nil:
		w.WriteString("null")
	}
	return nil
}

func pyString(w *bytes.Buffer, s string) {
	short := map[uint16]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\b': `\b`, '\f': `\f`}
	w.WriteByte('"')
	for _, u := range utf16.Encode([]rune(s)) {
		if e, ok := short[u]; ok {
			w.WriteString(e)
		} else if u >= 0x20 && u < 0x7f {
			w.WriteByte(byte(u))
		} else {
			fmt.Fprintf(w, `\u%04x`, u)
		}
	}
	w.WriteByte('"')
}

// checkAnchoredRecord: record.json minus signature and transparency is
// anchors/record.json minus signature; transparency names the entry; both
// signatures verify under cnf.jwk.
func checkAnchoredRecord(t *testing.T, dir, logURL string, index uint64) {
	t.Helper()
	obj := func(name string) (map[string]any, []byte) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m, b
	}
	final, fb := obj("record.json")
	anchored, ab := obj(filepath.Join("anchors", "record.json"))
	want := strings.TrimRight(logURL, "/") + "/entries/" + strconv.FormatUint(index, 10)
	if final["transparency"] != want {
		t.Errorf("transparency %v, want %s", final["transparency"], want)
	}
	for _, rec := range []struct {
		m map[string]any
		b []byte
	}{{final, fb}, {anchored, ab}} {
		jwk := rec.m["cnf"].(map[string]any)["jwk"].(map[string]any)
		x, _ := base64.RawURLEncoding.DecodeString(jwk["x"].(string))
		sig, _ := base64.RawURLEncoding.DecodeString(rec.m["signature"].(string))
		m := maps(rec.m)
		delete(m, "signature")
		pre, err := jcs(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(x) != ed25519.PublicKeySize || !ed25519.Verify(x, pre, sig) {
			t.Errorf("a record's signature does not verify under its cnf.jwk")
		}
	}
	f, a := maps(final), maps(anchored)
	delete(f, "signature")
	delete(f, "transparency")
	delete(a, "signature")
	if !reflect.DeepEqual(f, a) {
		t.Error("record.json is not the anchored record plus transparency")
	}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
