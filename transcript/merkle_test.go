package transcript

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// mth is RFC 6962 section 2.1 written out by hand, independent of tlog and
// of the Committer: MTH({}) = SHA-256(), MTH({d}) = SHA-256(0x00 || d),
// MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])), k the largest
// power of two smaller than n.
func mth(d [][]byte) [32]byte {
	switch len(d) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0x00}, d[0]...))
	}
	k := 1
	for k*2 < len(d) {
		k *= 2
	}
	l, r := mth(d[:k]), mth(d[k:])
	return sha256.Sum256(append(append([]byte{0x01}, l[:]...), r[:]...))
}

func TestCommitterMatchesHandBuiltTree(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var lines [][]byte
			c := NewCommitter()
			for i := 0; i < n; i++ {
				l := []byte(fmt.Sprintf(`{"line":%d}`, i))
				lines = append(lines, l)
				c.Add(l)
			}
			want := mth(lines)
			if got := c.Root(); got != "sha256:"+hex.EncodeToString(want[:]) {
				t.Errorf("Root() = %s, want sha256:%x", got, want)
			}
			if got := c.Count(); got != int64(n) {
				t.Errorf("Count() = %d, want %d", got, n)
			}
			if got := Root(lines); got != c.Root() {
				t.Errorf("Root(lines) = %s, Committer %s", got, c.Root())
			}
		})
	}
}

// The hand-built trees of the issue, spelled out node by node for n = 1, 2,
// 3, 5 and 8 rather than by recursion.
func TestCommitterSmallTreesByHand(t *testing.T) {
	leaf := func(s string) [32]byte { return sha256.Sum256(append([]byte{0}, s...)) }
	node := func(l, r [32]byte) [32]byte { return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...)) }
	a, b, c, d, e, f, g, h := leaf("a"), leaf("b"), leaf("c"), leaf("d"), leaf("e"), leaf("f"), leaf("g"), leaf("h")
	abcd := node(node(a, b), node(c, d))
	efgh := node(node(e, f), node(g, h))
	tests := []struct {
		lines string
		want  [32]byte
	}{
		{"a", a},
		{"ab", node(a, b)},
		{"abc", node(node(a, b), c)},
		{"abcde", node(abcd, e)},
		{"abcdefgh", node(abcd, efgh)},
	}
	for _, tt := range tests {
		var cm Committer // the zero value is usable
		for _, r := range tt.lines {
			cm.Add([]byte(string(r)))
		}
		if got, want := cm.Root(), "sha256:"+hex.EncodeToString(tt.want[:]); got != want {
			t.Errorf("%q: Root() = %s, want %s", tt.lines, got, want)
		}
	}
}

func TestCommitterEmptyAndTlog(t *testing.T) {
	var c Committer
	empty := sha256.Sum256(nil)
	if got, want := c.Root(), "sha256:"+hex.EncodeToString(empty[:]); got != want {
		t.Errorf("empty Root() = %s, want %s (SHA-256 of the empty string)", got, want)
	}
	// Against tlog's own stored-hash computation.
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := int64(0); i < 300; i++ {
		l := []byte(fmt.Sprintf("line %d", i))
		hs, err := tlog.StoredHashes(i, l, r)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		c.Add(l)
		th, err := tlog.TreeHash(i+1, r)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Root(), formatRoot(th); got != want {
			t.Fatalf("n=%d: Root() = %s, tlog.TreeHash %s", i+1, got, want)
		}
	}
}

func TestCommitterMemoryIsLogarithmic(t *testing.T) {
	var c Committer
	for i := 0; i < 1<<17; i++ {
		c.Add([]byte{byte(i)})
	}
	c.Add([]byte("x"))
	if got := len(c.stack); got > 2 {
		t.Errorf("after 2^17+1 lines the Committer holds %d hashes, want 2 (one per set bit)", got)
	}
}

// The worked example of spec/transcript.md, "Commitment".
func TestSpecWorkedExample(t *testing.T) {
	got := Root([][]byte{[]byte(`{"seq":0}`), []byte(`{"seq":1}`), []byte(`{"seq":2}`)})
	if want := "sha256:3db67665eea8c26de341668c1d3199f61de4b780a828569a898ce48c28d931f3"; got != want {
		t.Errorf("Root = %s, want %s", got, want)
	}
}
