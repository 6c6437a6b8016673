package canon

import (
	"bytes"
	"strings"
	"testing"
)

// bigDoc returns a tools/list-shaped document of exactly size bytes: the
// benchmark's tools, then one string padded to the exact length.
func bigDoc(size int) []byte {
	unit := toolsListDoc(1000) // {"jsonrpc":...,"result":{"tools":[...],"nextCursor":"..."}}
	tools := unit[bytes.Index(unit, []byte("[")) : bytes.LastIndex(unit, []byte("]"))+1]
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"pages":[`)
	for b.Len()+len(tools)+100 < size {
		if b.Len() > len(`{"pages":[`) {
			b.WriteByte(',')
		}
		b.Write(tools)
	}
	b.WriteString(`],"pad":"`)
	pad := size - b.Len() - len(`"}`)
	b.WriteString(strings.Repeat("é", pad/2))
	if pad%2 == 1 {
		b.WriteByte('x')
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

func TestDefaultLimits(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("64 MiB document: runs without -short and -race")
	}
	doc := bigDoc(DefaultMaxBytes)
	if len(doc) != DefaultMaxBytes {
		t.Fatalf("built %d bytes", len(doc))
	}
	d, err := Digest(doc, PolicyMCPDecl)
	if err != nil {
		t.Fatalf("64 MiB document refused: %v", err)
	}
	if d == "" {
		t.Fatal("no digest")
	}
	// One more byte (valid JSON whitespace) crosses the limit; the size is
	// checked before any parsing.
	doc = append(doc, ' ')
	_, err = Digest(doc, PolicyMCPDecl)
	checkErr(t, err, CodeSizeLimit, "", DefaultMaxBytes)
}

func nested(depth int) string {
	var b strings.Builder
	for i := range depth {
		if i%2 == 0 {
			b.WriteString(`[`)
		} else {
			b.WriteString(`{"k":`)
		}
	}
	b.WriteString("1")
	for i := depth - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString(`]`)
		} else {
			b.WriteString(`}`)
		}
	}
	return b.String()
}

func TestDepthLimit(t *testing.T) {
	tests := []struct {
		depth int
		lim   Limits
		ok    bool
	}{
		{DefaultMaxDepth, Limits{}, true},
		{DefaultMaxDepth + 1, Limits{}, false},
		{5, Limits{MaxDepth: 5}, true},
		{6, Limits{MaxDepth: 5}, false},
		{depthCeiling, Limits{MaxDepth: 1 << 30}, true},
		{depthCeiling + 1, Limits{MaxDepth: 1 << 30}, false},
	}
	for _, tt := range tests {
		in := nested(tt.depth)
		got, err := appendCanonical(nil, []byte(in), PolicyV02, tt.lim)
		if tt.ok {
			if err != nil || string(got) != in {
				t.Errorf("depth %d with %+v: %v", tt.depth, tt.lim, err)
			}
			continue
		}
		// The container one level too deep (level maxDepth, counting
		// from 0) is reported at its opening bracket.
		level := tt.depth - 1
		var off int64
		for j := range level {
			if j%2 == 0 {
				off++ // "["
			} else {
				off += int64(len(`{"k":`))
			}
		}
		checkErr(t, err, CodeDepthLimit, nestedPointerFor(level), off)
	}
}

// nestedPointerFor is the pointer of the value at nesting level depth
// (counting from 0) in nested(): array elements are /0, object members /k.
func nestedPointerFor(depth int) string {
	var b strings.Builder
	for i := range depth {
		if i%2 == 0 {
			b.WriteString("/0")
		} else {
			b.WriteString("/k")
		}
	}
	return b.String()
}
