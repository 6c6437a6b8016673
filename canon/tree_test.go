package canon

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestNodeSize keeps the tree compact: the whole-process peak RSS target of
// `tracectl canon` (at most 2.5 times the input, BenchmarkCLI) rests on
// 8-byte nodes and about a byte per member for the member order (plus two
// or three per object for its header).
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
	if len(d.perm) > members+2*objects+8 {
		t.Errorf("member order takes %d bytes for %d members of %d objects, want a byte a member and two an object at most", len(d.perm), members, objects)
	}
}
