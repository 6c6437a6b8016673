package transcript

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestProveEveryLineOf1000(t *testing.T) {
	lines := sampleTranscript(t, 499) // 1 + 2*499 + 1 = 1000 lines
	if len(lines) != 1000 {
		t.Fatalf("%d lines, want 1000", len(lines))
	}
	root := Root(lines)
	all := make([]int64, len(lines))
	for i := range all {
		all[i] = int64(i)
	}
	p, err := Prove(lines, all)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckProof(p, root); err != nil {
		t.Fatalf("CheckProof(all 1000 lines): %v", err)
	}
	// And each line alone, through its serialized form.
	for _, i := range []int64{0, 1, 2, 511, 512, 998, 999} {
		p, err := Prove(lines, []int64{i})
		if err != nil {
			t.Fatal(err)
		}
		data, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseProof(data)
		if err != nil {
			t.Fatalf("ParseProof(Marshal()) line %d: %v", i, err)
		}
		if err := CheckProof(q, root); err != nil {
			t.Errorf("line %d: %v", i, err)
		}
		if q.Entries[0].Line != string(lines[i]) || q.Entries[len(q.Entries)-1].Index != int64(len(lines)-1) {
			t.Errorf("line %d: disclosed bytes differ", i)
		}
	}
}

func TestProofFlippedBitFails(t *testing.T) {
	lines := sampleTranscript(t, 20)
	root := Root(lines)
	p, err := Prove(lines, []int64{3, 17})
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string, i int) string { b := []byte(s); b[i] ^= 1; return string(b) }
	tests := []struct {
		name   string
		mutate func(p *Proof) string // returns the root to check against
		want   error
	}{
		{"line byte", func(p *Proof) string { p.Entries[0].Line = flip(p.Entries[0].Line, 10); return root }, ErrProofInvalid},
		{"path hash", func(p *Proof) string { p.Entries[1].Path[0] = flipHex(p.Entries[1].Path[0]); return root }, ErrProofInvalid},
		{"index", func(p *Proof) string { p.Entries[0].Index = 4; return root }, ErrProofInvalid},
		{"tree size", func(p *Proof) string { p.TreeSize--; return root }, ErrProofInvalid},
		{"signed root", func(p *Proof) string { return flipHex(root) }, ErrRootMismatch},
		{"both roots", func(p *Proof) string { p.Root = flipHex(root); return p.Root }, ErrProofInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := cloneProof(p)
			r := tt.mutate(q)
			if err := CheckProof(q, r); !errors.Is(err, tt.want) {
				t.Errorf("CheckProof = %v, want %v", err, tt.want)
			}
		})
	}
	if err := CheckProof(p, root); err != nil {
		t.Errorf("original proof: %v", err)
	}
}

func flipHex(s string) string {
	b := []byte(s)
	i := len(b) - 1
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

func cloneProof(p *Proof) *Proof {
	q := *p
	q.Entries = nil
	for _, e := range p.Entries {
		e.Path = append([]string(nil), e.Path...)
		q.Entries = append(q.Entries, e)
	}
	return &q
}

func TestProveRejects(t *testing.T) {
	lines := sampleTranscript(t, 2)
	for _, tt := range []struct {
		name  string
		lines [][]byte
		idx   []int64
	}{
		{"empty transcript", nil, []int64{0}},
		{"no index", lines, nil},
		{"negative", lines, []int64{-1}},
		{"past end", lines, []int64{int64(len(lines))}},
		{"twice", lines, []int64{1, 1}},
		{"not utf-8", [][]byte{{0xff}}, []int64{0}},
	} {
		if _, err := Prove(tt.lines, tt.idx); err == nil {
			t.Errorf("%s: Prove succeeded", tt.name)
		}
	}
}

func TestParseProofRejects(t *testing.T) {
	lines := sampleTranscript(t, 3)
	p, _ := Prove(lines, []int64{2})
	good, _ := p.Marshal()
	s := string(good)
	tests := []struct {
		name string
		data string
		want error
	}{
		{"not canonical", " " + s, ErrProofInvalid},
		{"unknown member", strings.Replace(s, `{"entries"`, `{"extra":1,"entries"`, 1), ErrProofInvalid},
		{"wrong format", strings.Replace(s, proofFormat, "tracectl.inclusion-proof/v9", 1), ErrProofInvalid},
		{"null path", strings.Replace(s, `"path":[`, `"path":null,"x":[`, 1), ErrProofInvalid},
		{"upper hex", strings.Replace(s, `"path":["`, `"path":["A`, 1), ErrProofInvalid},
		{"tree size zero", strings.Replace(s, fmt.Sprintf(`"tree_size":%d`, len(lines)), `"tree_size":0`, 1), ErrProofInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseProof([]byte(tt.data)); !errors.Is(err, tt.want) {
				t.Errorf("ParseProof = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := ParseProof(make([]byte, MaxProofBytes+1)); !errors.Is(err, ErrProofTooLarge) {
		t.Errorf("ParseProof(MaxProofBytes+1 bytes) = %v, want ErrProofTooLarge", err)
	}
}

func TestProofPathLimit(t *testing.T) {
	// maxProofPath hashes are accepted by the parser, one more is not.
	mk := func(n int) *Proof {
		path := make([]string, n)
		for i := range path {
			path[i] = strings.Repeat("ab", 32)
		}
		return &Proof{Format: proofFormat, Merkle: MerkleAlg, TreeSize: 1<<53 - 1, Root: dig1, Entries: []ProofEntry{{Index: 1<<53 - 2, Line: "{}", Path: path}}}
	}
	if err := mk(maxProofPath).validate(); err != nil {
		t.Errorf("path of %d: %v", maxProofPath, err)
	}
	if err := mk(maxProofPath + 1).validate(); !errors.Is(err, ErrProofTooLarge) {
		t.Errorf("path of %d: %v, want ErrProofTooLarge", maxProofPath+1, err)
	}
}
