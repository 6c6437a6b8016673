package transcript

import (
	"encoding/hex"

	"golang.org/x/mod/sumdb/tlog"
)

// Committer computes the transcript commitment: the RFC 6962 Merkle tree
// hash over the lines, leaf i = SHA-256(0x00 || line i without its LF),
// interior node = SHA-256(0x01 || left || right) (tlog.RecordHash and
// tlog.NodeHash). It streams: it keeps one hash per set bit of the line
// count, so memory is O(log n) however long the transcript.
//
// The zero value is an empty Committer. An empty tree's root is SHA-256 of
// the empty string (RFC 6962 section 2.1), but an empty transcript is never
// valid: line 0, the header, is required.
type Committer struct {
	n     int64
	stack []tlog.Hash // roots of the perfect subtrees covering [0, n), largest first
}

// NewCommitter returns an empty Committer.
func NewCommitter() *Committer { return &Committer{} }

// Add appends one line (its exact bytes, without the LF).
func (c *Committer) Add(line []byte) {
	h := tlog.RecordHash(line)
	// Merge equal-sized subtrees: one merge per trailing 1 bit of n.
	for k := c.n; k&1 == 1; k >>= 1 {
		top := len(c.stack) - 1
		h = tlog.NodeHash(c.stack[top], h)
		c.stack = c.stack[:top]
	}
	c.stack = append(c.stack, h)
	c.n++
}

// Count returns the number of lines added.
func (c *Committer) Count() int64 { return c.n }

// Root returns the tree hash as "sha256:<hex>".
func (c *Committer) Root() string { return formatRoot(c.rootHash()) }

func (c *Committer) rootHash() tlog.Hash {
	if c.n == 0 {
		h, _ := tlog.TreeHash(0, nil)
		return h
	}
	// RFC 6962: MTH(D[0:n]) = NodeHash(MTH(D[0:k]), MTH(D[k:n])) with k the
	// largest power of two below n; folding the subtree roots from the
	// smallest (rightmost) one is exactly that recursion.
	h := c.stack[len(c.stack)-1]
	for i := len(c.stack) - 2; i >= 0; i-- {
		h = tlog.NodeHash(c.stack[i], h)
	}
	return h
}

func formatRoot(h tlog.Hash) string { return "sha256:" + hex.EncodeToString(h[:]) }

// Root returns the commitment over all lines at once.
func Root(lines [][]byte) string {
	var c Committer
	for _, l := range lines {
		c.Add(l)
	}
	return c.Root()
}
