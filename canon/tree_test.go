package canon

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestNodeSize keeps the tree compact: the whole-process peak RSS target of
// `tracectl canon` (at most 2.5 times the input, BenchmarkCLI) rests on
// 8-byte nodes and about a byte per member and per object for the member
// order and its header.
func TestNodeSize(t *testing.T) {
	if got := unsafe.Sizeof(node{}); got != 8 {
		t.Errorf("node is %d bytes, want 8", got)
	}
	doc := toolsListDoc(1000)
	d, err := Parse(doc, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	members, objects := bytes.Count(doc, []byte{':'}), bytes.Count(doc, []byte{'{'})
	if len(d.perm) > members+objects {
		t.Errorf("member order takes %d bytes for %d members of %d objects, want a byte each at most", len(d.perm), members, objects)
	}
}

// check judges only the nodes the parser listed, or every node when they
// were too many to list: both find the same first refusal, a repeated name
// (AllowDuplicateKeys) before a number, or a number before a repeat.
func TestCheckListedOrAll(t *testing.T) {
	for _, n := range []int{3, 5000} { // listed; too many, all judged
		var b bytes.Buffer
		b.WriteString(`{"x":[`)
		for range n {
			b.WriteString(`0.5,`)
		}
		b.WriteString(`1e400],"d":{"k":1,"k":2},"y":1e999}`)
		d, err := Parse(b.Bytes(), ParseOptions{AllowDuplicateKeys: true})
		if err != nil {
			t.Fatal(err)
		}
		if all := n == 5000; d.judgeAll != all {
			t.Fatalf("%d decimals: judgeAll %v, want %v", n, d.judgeAll, all)
		}
		x, _ := d.Root().Get("x")
		for _, tc := range []struct {
			v    Value
			code Code
			ptr  string
		}{
			{d.Root(), CodeUnsupportedNumber, fmt.Sprintf("/x/%d", n)},
			{x, CodeUnsupportedNumber, fmt.Sprintf("/x/%d", n)},
			{mustGet(t, d.Root(), "d"), CodeDuplicateKey, "/d/k"},
			{mustGet(t, d.Root(), "y"), CodeUnsupportedNumber, "/y"},
		} {
			_, err := tc.v.Canonical(PolicyMCPDecl)
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != tc.code || ce.Pointer != tc.ptr {
				t.Errorf("%d decimals: Canonical(%s) = %v, want %s at %s", n, tc.v.Pointer(), err, tc.code, tc.ptr)
			}
		}
	}
	// The repeated name comes first in the input when the bad number
	// follows it.
	e, err := Parse([]byte(`[{"k":1,"k":2},1e400,0.5]`), ParseOptions{AllowDuplicateKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Root().Canonical(PolicyMCPDecl); !errors.Is(err, CodeDuplicateKey) {
		t.Errorf("Canonical = %v, want duplicate_key first", err)
	}
	// An object is listed when it closes, after its members: the list is
	// put in input order, so the repeat still comes before the bad number
	// after it, and a bad number ahead of the repeat still comes first.
	for in, want := range map[string]Code{`{"a":2,"a":1e400}`: CodeDuplicateKey, `{"a":1e400,"a":2}`: CodeUnsupportedNumber} {
		e, err := Parse([]byte(in), ParseOptions{AllowDuplicateKeys: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Root().Canonical(PolicyMCPDecl); !errors.Is(err, want) {
			t.Errorf("Canonical(%s) = %v, want %s", in, err, want)
		}
	}
}

func mustGet(t *testing.T, v Value, name string) Value {
	t.Helper()
	m, _ := v.Get(name)
	return m
}

// Every order of up to maxRanked+1 members comes out sorted: the order of
// small objects is kept as a permutation rank, of wider ones as positions.
func TestMemberOrderEveryPermutation(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	var permute func(rest, done []string)
	permute = func(rest, done []string) {
		if len(rest) == 0 {
			var in, want strings.Builder
			in.WriteString("{")
			for i, n := range done {
				if i > 0 {
					in.WriteString(",")
				}
				fmt.Fprintf(&in, `"%s":%d`, n, i)
			}
			in.WriteString("}")
			sorted := slices.Sorted(slices.Values(done))
			want.WriteString("{")
			for i, n := range sorted {
				if i > 0 {
					want.WriteString(",")
				}
				fmt.Fprintf(&want, `"%s":%d`, n, slices.Index(done, n))
			}
			want.WriteString("}")
			for _, out := range [][]byte{mustCanon(t, in.String()), mustWrite(t, in.String())} {
				if string(out) != want.String() {
					t.Fatalf("%s: got %s, want %s", in.String(), out, want.String())
				}
			}
			return
		}
		for i := range rest {
			next := append(slices.Clone(rest[:i]), rest[i+1:]...)
			permute(next, append(slices.Clone(done), rest[i]))
		}
	}
	for n := 1; n <= maxRanked+1; n++ {
		permute(names[:n], nil)
	}
}

func mustCanon(t *testing.T, in string) []byte {
	t.Helper()
	out, err := Canonicalize([]byte(in), PolicyV02)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustWrite(t *testing.T, in string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := WriteCanonical(&b, []byte(in), PolicyV02, Limits{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
