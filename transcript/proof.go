package transcript

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/tracectl/tracectl/canon"
)

// proofFormat is the format id of an inclusion proof document.
const proofFormat = "tracectl.inclusion-proof/v1"

// Proof limits (ParseProof).
const (
	// MaxProofBytes bounds a proof document: enough for maxProofEntries
	// typical lines, far below what a disclosed line could amplify to.
	MaxProofBytes = 64 << 20
	// maxProofEntries bounds the disclosed lines of one proof.
	maxProofEntries = 100_000
	// maxProofPath bounds one audit path: a tree of at most 2^53-1 leaves
	// (the v0.2 integer boundary) is at most 53 levels deep.
	maxProofPath = 53
)

// Proof shows that chosen lines are in a transcript with a given root,
// without disclosing the other lines. Its canonical JSON (Marshal) names
// proofFormat inside.
type Proof struct {
	Format   string       `json:"format"` // proofFormat
	Merkle   string       `json:"merkle"` // MerkleAlg
	TreeSize int64        `json:"tree_size"`
	Root     string       `json:"root"`    // "sha256:<hex>": the root the proof was made against
	Entries  []ProofEntry `json:"entries"` // ascending index, no index twice; the last is tree_size-1
}

// ProofEntry is one disclosed line and its RFC 6962 audit path.
type ProofEntry struct {
	Index int64    `json:"index"` // 0-based line number (= seq)
	Line  string   `json:"line"`  // the exact line bytes without LF (transcript lines are UTF-8)
	Path  []string `json:"path"`  // lowercase hex node hashes, leaf to root (tlog.RecordProof order)
}

// Proof errors.
var (
	ErrProofInvalid  = errors.New("inclusion proof invalid")
	ErrRootMismatch  = errors.New("inclusion proof made for another root")
	ErrProofTooLarge = errors.New("inclusion proof exceeds a limit")
)

// Prove builds an inclusion proof for the lines at indexes (any order,
// no duplicates) of the transcript whose lines are given in full. The last
// line is always disclosed too (it binds the tree size).
func Prove(lines [][]byte, indexes []int64) (*Proof, error) {
	n := int64(len(lines))
	if n == 0 {
		return nil, fmt.Errorf("prove: empty transcript")
	}
	if len(indexes) == 0 {
		return nil, fmt.Errorf("prove: no line chosen")
	}
	if len(indexes) > maxProofEntries {
		return nil, fmt.Errorf("prove: %d lines: %w (limit %d)", len(indexes), ErrProofTooLarge, maxProofEntries)
	}
	// The last line always goes in: an audit path for a leaf of the left
	// subtrees does not depend on the tree size, the last leaf's does, so
	// disclosing it is what authenticates tree_size. In a sealed transcript
	// it is the seal line, which holds only counts.
	idx := slices.Clone(indexes)
	if !slices.Contains(idx, n-1) {
		idx = append(idx, n-1)
	}
	slices.Sort(idx)
	for i, x := range idx {
		if x < 0 || x >= n {
			return nil, fmt.Errorf("prove: index %d outside a transcript of %d lines", x, n)
		}
		if i > 0 && idx[i-1] == x {
			return nil, fmt.Errorf("prove: index %d chosen twice", x)
		}
		if !utf8.Valid(lines[x]) {
			return nil, fmt.Errorf("prove: line %d is not UTF-8, not a transcript line", x)
		}
	}
	// Stored hashes for the whole tree: O(n) memory, which the caller already
	// spends holding the lines.
	stored := make([]tlog.Hash, 0, tlog.StoredHashCount(n))
	reader := tlog.HashReaderFunc(func(want []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(want))
		for i, w := range want {
			if w < 0 || w >= int64(len(stored)) {
				return nil, fmt.Errorf("stored hash %d not available", w)
			}
			out[i] = stored[w]
		}
		return out, nil
	})
	for i, l := range lines {
		hs, err := tlog.StoredHashes(int64(i), l, reader)
		if err != nil {
			return nil, fmt.Errorf("prove: %w", err)
		}
		stored = append(stored, hs...)
	}
	root, err := tlog.TreeHash(n, reader)
	if err != nil {
		return nil, fmt.Errorf("prove: %w", err)
	}
	p := &Proof{Format: proofFormat, Merkle: MerkleAlg, TreeSize: n, Root: formatRoot(root)}
	for _, x := range idx {
		rp, err := tlog.ProveRecord(n, x, reader)
		if err != nil {
			return nil, fmt.Errorf("prove line %d: %w", x, err)
		}
		e := ProofEntry{Index: x, Line: string(lines[x]), Path: make([]string, len(rp))}
		for i, h := range rp {
			e.Path[i] = hex.EncodeToString(h[:])
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}

// Marshal returns the proof's canonical JSON bytes.
func (p *Proof) Marshal() ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	return canon.Marshal(p)
}

// ParseProof strictly parses a proof document: bounded (MaxProofBytes,
// 100,000 entries, audit paths of 53 hashes), canonical, known members only, and well
// formed. It does not check the proof against a root: see CheckProof.
func ParseProof(data []byte) (*Proof, error) {
	if len(data) > MaxProofBytes {
		return nil, fmt.Errorf("parse proof: %d bytes: %w (limit %d)", len(data), ErrProofTooLarge, MaxProofBytes)
	}
	if err := canon.Check(data, canon.PolicyV02); err != nil {
		return nil, fmt.Errorf("parse proof: %w: %w", ErrProofInvalid, err)
	}
	// Count entries before decoding so a huge array of tiny entries cannot
	// make the decoder allocate beyond the limit's worth of structs.
	doc, err := canon.Parse(data, canon.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("parse proof: %w: %w", ErrProofInvalid, err)
	}
	if es, ok := doc.Root().Get("entries"); ok && es.Len() > maxProofEntries {
		return nil, fmt.Errorf("parse proof: %d entries: %w (limit %d)", es.Len(), ErrProofTooLarge, maxProofEntries)
	}
	var p Proof
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("parse proof: %w: %w", ErrProofInvalid, err)
	}
	again, err := canon.Marshal(&p)
	if err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("parse proof: %w: %s", ErrProofInvalid, describeDiff(data, again))
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("parse proof: %w", err)
	}
	return &p, nil
}

func (p *Proof) validate() error {
	switch {
	case p.Format != proofFormat:
		return fmt.Errorf("%w: format %q, want %q", ErrProofInvalid, bounded(p.Format), proofFormat)
	case p.Merkle != MerkleAlg:
		return fmt.Errorf("%w: merkle %q, want %q", ErrProofInvalid, bounded(p.Merkle), MerkleAlg)
	case p.TreeSize < 1 || p.TreeSize > canon.MaxSafeInteger:
		return fmt.Errorf("%w: tree_size %d", ErrProofInvalid, p.TreeSize)
	case len(p.Entries) == 0:
		return fmt.Errorf("%w: no entries", ErrProofInvalid)
	case len(p.Entries) > maxProofEntries:
		return fmt.Errorf("%w: %d entries (limit %d)", ErrProofTooLarge, len(p.Entries), maxProofEntries)
	}
	if _, err := canon.ParseDigest(p.Root); err != nil {
		return fmt.Errorf("%w: root: %w", ErrProofInvalid, err)
	}
	if last := p.Entries[len(p.Entries)-1].Index; last != p.TreeSize-1 {
		return fmt.Errorf("%w: the last line (index %d) must be disclosed, it is what binds tree_size", ErrProofInvalid, p.TreeSize-1)
	}
	for i, e := range p.Entries {
		if e.Index < 0 || e.Index >= p.TreeSize {
			return fmt.Errorf("%w: entry %d: index %d outside tree_size %d", ErrProofInvalid, i, e.Index, p.TreeSize)
		}
		if i > 0 && p.Entries[i-1].Index >= e.Index {
			return fmt.Errorf("%w: entry %d: indexes must ascend without repeats", ErrProofInvalid, i)
		}
		if len(e.Line) > MaxLineBytes {
			return fmt.Errorf("%w: entry %d: line of %d bytes (limit %d)", ErrProofTooLarge, i, len(e.Line), MaxLineBytes)
		}
		if e.Path == nil {
			return fmt.Errorf("%w: entry %d: path is null", ErrProofInvalid, i)
		}
		if len(e.Path) > maxProofPath {
			return fmt.Errorf("%w: entry %d: path of %d hashes (limit %d)", ErrProofTooLarge, i, len(e.Path), maxProofPath)
		}
		for j, h := range e.Path {
			if _, err := parseNode(h); err != nil {
				return fmt.Errorf("%w: entry %d: path[%d]: %w", ErrProofInvalid, i, j, err)
			}
		}
	}
	return nil
}

func parseNode(s string) (tlog.Hash, error) {
	var h tlog.Hash
	if len(s) != 2*tlog.HashSize || !lowerHex(s) {
		return h, fmt.Errorf("want %d lowercase hex digits", 2*tlog.HashSize)
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err
}

// CheckProof checks that every disclosed line of p is in the transcript
// whose commitment is root (from the signed record's tool_transcript.hash).
// The lines themselves are not decoded: callers that need the events run
// DecodeLine on them.
func CheckProof(p *Proof, root string) error {
	if p == nil {
		return fmt.Errorf("check proof: %w: nil proof", ErrProofInvalid)
	}
	if err := p.validate(); err != nil {
		return fmt.Errorf("check proof: %w", err)
	}
	want, err := canon.ParseDigest(root)
	if err != nil {
		return fmt.Errorf("check proof: root: %w", err)
	}
	if p.Root != root {
		return fmt.Errorf("check proof: %w: proof root %s, want %s", ErrRootMismatch, p.Root, root)
	}
	for _, e := range p.Entries {
		rp := make(tlog.RecordProof, len(e.Path))
		for j, h := range e.Path {
			rp[j], _ = parseNode(h) // validated above
		}
		if err := tlog.CheckRecord(rp, p.TreeSize, tlog.Hash(want), e.Index, tlog.RecordHash([]byte(e.Line))); err != nil {
			return fmt.Errorf("check proof: line %d: %w: %w", e.Index, ErrProofInvalid, err)
		}
	}
	return nil
}
