package anchor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// Expected outputs were made with trace-spec's own definition (its
// anchor-inclusion generator's canonical(): Python's json.dumps with
// sort_keys=True, separators=(",", ":"), ensure_ascii=True), not with this
// package.
func TestLeafMatchesTraceSpec(t *testing.T) {
	for _, tc := range []struct{ name, in, want, leafHash string }{
		{"ascii claim",
			`{"transparency":"https://log.example.org/batches/anchor-vectors","subject":"agent-0","iat":1000,"signature":"fixture-signature-0"}`,
			`{"iat":1000,"signature":"fixture-signature-0","subject":"agent-0","transparency":"https://log.example.org/batches/anchor-vectors"}`,
			"f18ff20e78cff1ece9f7370d8cdb3334bcdb270683cbf9a7ef226e894dfa4f21"},
		{"unicode code point order and escapes",
			`{"transparency":"https://log.example.org/batches/anchor-vectors","subject":"agent-é-😀","iat":1000,"signature":"fixture-signature-0","metadata":{"😀":[true,null,"é"],"` + "\ue000" + `":{"z":1,"a":-1}}}`,
			`{"iat":1000,"metadata":{"\ue000":{"a":-1,"z":1},"\ud83d\ude00":[true,null,"\u00e9"]},"signature":"fixture-signature-0","subject":"agent-\u00e9-\ud83d\ude00","transparency":"https://log.example.org/batches/anchor-vectors"}`,
			"3263a6ea845898f401ea19f1c91ea4d78d0bb4918e2bfb2325285e48b536c75b"},
		{"short escapes, DEL, controls, empty containers",
			`{"c":{},"b":[],"a":"` + "\x7f" + `\u0001\n\t\"\\/"}`,
			`{"a":"\u007f\u0001\n\t\"\\/","b":[],"c":{}}`,
			"7501e08077fdb5b14219ba4ed3064d09862da31f8d7803462f2b6a4d3e73f315"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Leaf([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("leaf\n got %s\nwant %s", got, tc.want)
			}
			h := sha256.Sum256(append([]byte{0}, got...))
			if hex.EncodeToString(h[:]) != tc.leafHash {
				t.Errorf("leaf hash %x, want %s", h, tc.leafHash)
			}
		})
	}
}

func TestLeafRefuses(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`,    // duplicate member
		`{"a":1.5}`,        // a fraction Python would print otherwise
		`{"a":1e3}`,        // an exponent
		`{"a":"\ud800"}`,   // a lone surrogate
		"{\"a\":\"\xff\"}", // invalid UTF-8
		`{"a":1} x`,        // trailing bytes
		strings.Repeat(" ", MaxStatementBytes) + "{}", // over the limit
	} {
		if _, err := Leaf([]byte(in)); !errors.Is(err, ErrLeaf) {
			t.Errorf("Leaf(%.40q): %v, want ErrLeaf", in, err)
		}
	}
	if _, err := Leaf([]byte(strings.Repeat(" ", MaxStatementBytes-2) + "{}")); err != nil {
		t.Errorf("a statement at the limit: %v", err)
	}
}

// TestIncludesTraceSpecReceipt checks trace-spec's tree-5-index-3 receipt
// (made by its generator's recursive construction) with Includes.
func TestIncludesTraceSpecReceipt(t *testing.T) {
	claim := `{"transparency":"https://log.example.org/batches/anchor-vectors","subject":"agent-3","iat":1003,"signature":"fixture-signature-3"}`
	r := &Receipt{LeafIndex: 3, LeafCount: 5, AuditPath: []string{
		"sha256:0cd183803df200a1d307042d8cd95a9b1179ef83c54b3149a60e7d4ad027789e",
		"sha256:941b7c7342acc434973c8b9b18a7c78f9cb29c1689731a8f9330765c4af6fb5b",
		"sha256:59151ceaf84622ee6725a687f68341d502462232dd5e3be424a2b8ea7dd52653",
	}}
	root, _ := decodeHash("sha256:3ca6165104788f6bb784f64f3ef3ef401c800995483cd1657c82ec1d9cd3df7f")
	c := &Checked{Size: 5, Root: root}
	if err := r.Includes([]byte(claim), c); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Receipt) []byte{
		"changed subject": func(*Receipt) []byte { return []byte(strings.Replace(claim, "agent-3", "other", 1)) },
		"wrong index":     func(r *Receipt) []byte { r.LeafIndex = 2; return []byte(claim) },
		"reversed path": func(r *Receipt) []byte {
			r.AuditPath = []string{r.AuditPath[2], r.AuditPath[1], r.AuditPath[0]}
			return []byte(claim)
		},
		"short path": func(r *Receipt) []byte { r.AuditPath = r.AuditPath[:2]; return []byte(claim) },
		"malformed":  func(r *Receipt) []byte { r.AuditPath = []string{"sha256:xyz"}; return []byte(claim) },
	} {
		rr := *r
		rr.AuditPath = append([]string(nil), r.AuditPath...)
		if err := rr.Includes(mut(&rr), c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func FuzzLeaf(f *testing.F) {
	f.Add([]byte(`{"a":"é","b":[1,true,null]}`))
	f.Add([]byte(`{"😀":{"\u0000":-1}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Leaf(in)
		if err != nil {
			return
		}
		for _, c := range out {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("leaf byte %#x outside printable ASCII: %q", c, out)
			}
		}
		// The leaf is itself a statement whose leaf it is.
		again, err := Leaf(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("Leaf is not idempotent: %q -> %q, %v", out, again, err)
		}
	})
}

func FuzzParseReceipt(f *testing.F) {
	f.Add([]byte(`{"format":"tracectl.anchor-receipt/v1","statement":"anchors/record.json","log":"http://x","leaf_index":0,"leaf_count":1,"audit_path":[],"merkle_root":"sha256:00","checkpoint":""}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseReceipt(in)
		if err != nil {
			return
		}
		if r.Format != ReceiptFormat || r.Statement == "" || len(r.AuditPath) > maxPath {
			t.Fatalf("accepted %+v", r)
		}
	})
}
