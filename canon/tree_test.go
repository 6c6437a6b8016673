package canon

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestNodeSize keeps the tree compact: the whole-process peak RSS target of
// `tracectl canon` (at most 2.5 times the input, BenchmarkCLI) rests on
// 12-byte nodes and about a byte per member for the member order.
func TestNodeSize(t *testing.T) {
	if got := unsafe.Sizeof(node{}); got != 12 {
		t.Errorf("node is %d bytes, want 12", got)
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
