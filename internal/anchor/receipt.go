package anchor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	f_log "github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/tracectl/tracectl/canon"
)

// Bundle layout (spec/anchoring.md, "Files").
const (
	// Dir holds the receipts: anchors/<seq>.json, seq = 1, 2, ... in the
	// order the statements were submitted (so in log order).
	Dir = "anchors"
	// RecordFile is the sealed record as anchored: record.json without
	// transparency, signed. record.json is it plus transparency, re-signed.
	RecordFile = Dir + "/record.json"
	// ReceiptFormat names the receipt's format inside it.
	ReceiptFormat = "tracectl.anchor-receipt/v1"
)

// Limits of a receipt. A tree of 2^64 leaves has audit paths of 64 hashes;
// a checkpoint note is a few lines plus one line per signature.
const (
	MaxReceiptBytes    = 64 << 10
	MaxReceipts        = 100000
	maxPath            = 64
	MaxCheckpointBytes = 16 << 10
)

// Receipt proves that one statement of a bundle is in a log: its members
// leaf_index, leaf_count, audit_path and merkle_root are trace-spec's
// TR-ANC-002 receipt (sha256:<hex> hashes), checkpoint is the log's
// signed note (C2SP tlog-checkpoint, with any witness cosignatures) whose
// size and root they are, and consistency proves the previous receipt's
// checkpoint is a prefix of this one's.
type Receipt struct {
	Format      string       `json:"format"`
	Statement   string       `json:"statement"` // bundle-relative path of the anchored bytes
	Log         string       `json:"log"`       // the log's URL as submitted to
	LeafIndex   uint64       `json:"leaf_index"`
	LeafCount   uint64       `json:"leaf_count"`
	AuditPath   []string     `json:"audit_path"`
	MerkleRoot  string       `json:"merkle_root"`
	Checkpoint  string       `json:"checkpoint"`
	Consistency *Consistency `json:"consistency,omitempty"`
}

// Consistency is an RFC 9162 consistency proof from an earlier tree size
// to the receipt's leaf_count.
type Consistency struct {
	FromSize uint64   `json:"from_size"`
	Proof    []string `json:"proof"`
}

// ParseReceipt reads a receipt strictly: canonical-JSON rules (no duplicate
// names, valid UTF-8), no unknown members, bounded.
func ParseReceipt(data []byte) (*Receipt, error) {
	if len(data) > MaxReceiptBytes {
		return nil, fmt.Errorf("receipt: %d bytes, more than %d", len(data), MaxReceiptBytes)
	}
	if _, err := canon.Parse(data, canon.ParseOptions{}); err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var r Receipt
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	switch {
	case r.Format != ReceiptFormat:
		return nil, fmt.Errorf("receipt: format %.64q, want %q", r.Format, ReceiptFormat)
	case r.Statement == "":
		return nil, errors.New("receipt: no statement")
	case len(r.AuditPath) > maxPath || r.Consistency != nil && len(r.Consistency.Proof) > 2*maxPath:
		return nil, errors.New("receipt: proof longer than any tree's")
	case len(r.Checkpoint) > MaxCheckpointBytes:
		return nil, fmt.Errorf("receipt: checkpoint of %d bytes, more than %d", len(r.Checkpoint), MaxCheckpointBytes)
	}
	return &r, nil
}

// Marshal encodes a receipt (canonical JSON).
func (r *Receipt) Marshal() ([]byte, error) { return canon.Marshal(r) }

// Keys are what a receipt's checkpoint is checked against: the log's
// signed-note verifier key and, optionally, witness keys (C2SP
// tlog-cosignature) of which at least Threshold must have cosigned.
type Keys struct {
	Log       note.Verifier
	Witnesses []note.Verifier
	Threshold int
}

// ParseKeys builds Keys from C2SP verifier key strings (log.pub's text).
func ParseKeys(logKey string, witnessKeys []string, threshold int) (Keys, error) {
	v, err := note.NewVerifier(strings.TrimSpace(logKey))
	if err != nil {
		return Keys{}, fmt.Errorf("log key: %w", err)
	}
	k := Keys{Log: v, Threshold: threshold}
	for _, w := range witnessKeys {
		wv, err := fnote.NewVerifierForCosignatureV1(strings.TrimSpace(w))
		if err != nil {
			return Keys{}, fmt.Errorf("witness key: %w", err)
		}
		k.Witnesses = append(k.Witnesses, wv)
	}
	if threshold < 0 || threshold > len(k.Witnesses) {
		return Keys{}, fmt.Errorf("witness threshold %d with %d witness keys", threshold, len(k.Witnesses))
	}
	return k, nil
}

// Failure kinds of a receipt check: each maps to one finding code.
var (
	ErrInvalid = errors.New("anchor receipt invalid") // anchor_invalid
	ErrFork    = errors.New("anchor log forked")      // anchor_fork
)

// Checked is what a valid receipt proves.
type Checked struct {
	Size     uint64
	Root     []byte
	Index    uint64
	Cosigned int // witness cosignatures verified
}

// OpenCheckpoint verifies a checkpoint note under k (the log's signature,
// then the witness threshold) and parses it.
func OpenCheckpoint(text []byte, k Keys) (*f_log.Checkpoint, int, error) {
	if len(text) > MaxCheckpointBytes {
		return nil, 0, fmt.Errorf("%w: checkpoint of %d bytes", ErrInvalid, len(text))
	}
	cp, _, n, err := f_log.ParseCheckpoint(text, k.Log.Name(), k.Log, k.Witnesses...)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: checkpoint: %v", ErrInvalid, err)
	}
	cosigned := 0
	for _, w := range k.Witnesses {
		for _, s := range n.Sigs {
			if s.Name == w.Name() && s.Hash == w.KeyHash() {
				cosigned++
				break
			}
		}
	}
	if cosigned < k.Threshold {
		return nil, cosigned, fmt.Errorf("%w: %d witness cosignatures, %d required", ErrInvalid, cosigned, k.Threshold)
	}
	if len(cp.Hash) != sha256.Size {
		return nil, cosigned, fmt.Errorf("%w: checkpoint root of %d bytes", ErrInvalid, len(cp.Hash))
	}
	return cp, cosigned, nil
}

// Check verifies the receipt for the statement bytes it names: the
// checkpoint (CheckLog) and the statement's inclusion (Includes).
func (r *Receipt) Check(statement []byte, k Keys) (*Checked, error) {
	c, err := r.CheckLog(k)
	if err != nil {
		return nil, err
	}
	if err := r.Includes(statement, c); err != nil {
		return nil, err
	}
	return c, nil
}

// CheckLog verifies the receipt's checkpoint under k and that leaf_count and
// merkle_root are the checkpoint's: what the receipt says of the log,
// whatever statement it names.
func (r *Receipt) CheckLog(k Keys) (*Checked, error) {
	cp, cosigned, err := OpenCheckpoint([]byte(r.Checkpoint), k)
	if err != nil {
		return nil, err
	}
	root, err := decodeHash(r.MerkleRoot)
	if err != nil {
		return nil, fmt.Errorf("%w: merkle_root: %v", ErrInvalid, err)
	}
	if cp.Size != r.LeafCount || !bytes.Equal(cp.Hash, root) {
		return nil, fmt.Errorf("%w: leaf_count and merkle_root are not the checkpoint's (size %d)", ErrInvalid, cp.Size)
	}
	return &Checked{Size: cp.Size, Root: cp.Hash, Index: r.LeafIndex, Cosigned: cosigned}, nil
}

// Includes verifies that audit_path leads from the statement's anchor leaf
// at leaf_index to the checked root (RFC 9162, 2.1.3.2).
func (r *Receipt) Includes(statement []byte, c *Checked) error {
	path, err := decodeHashes(r.AuditPath)
	if err != nil {
		return fmt.Errorf("%w: audit_path: %v", ErrInvalid, err)
	}
	leaf, err := Leaf(statement)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.LeafIndex, c.Size, rfc6962.DefaultHasher.HashLeaf(leaf), path, c.Root); err != nil {
		return fmt.Errorf("%w: the statement's leaf is not at leaf_index %d of the checkpoint's tree: %v", ErrInvalid, r.LeafIndex, err)
	}
	return nil
}

// CheckConsistency verifies that prev (an earlier receipt's checked
// checkpoint) is a prefix of cur's tree, using cur's consistency proof:
// two roots for one size, or a proof that fails, is a fork.
func CheckConsistency(prev, cur *Checked, c *Consistency) error {
	switch {
	case cur.Size < prev.Size:
		return fmt.Errorf("%w: tree size went from %d down to %d", ErrFork, prev.Size, cur.Size)
	case cur.Size == prev.Size:
		if !bytes.Equal(cur.Root, prev.Root) {
			return fmt.Errorf("%w: two roots for tree size %d", ErrFork, cur.Size)
		}
		return nil
	case c == nil || c.FromSize != prev.Size:
		return fmt.Errorf("%w: no consistency proof from size %d to %d", ErrInvalid, prev.Size, cur.Size)
	}
	p, err := decodeHashes(c.Proof)
	if err != nil {
		return fmt.Errorf("%w: consistency proof: %v", ErrInvalid, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, prev.Size, cur.Size, p, prev.Root, cur.Root); err != nil {
		return fmt.Errorf("%w: tree of size %d is not a prefix of size %d: %v", ErrFork, prev.Size, cur.Size, err)
	}
	return nil
}

// EncodeHash is a receipt's spelling of a hash: sha256:<lowercase hex>.
func EncodeHash(h []byte) string { return "sha256:" + hex.EncodeToString(h) }

// EncodeHashes spells each hash as EncodeHash does.
func EncodeHashes(hs [][]byte) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = EncodeHash(h)
	}
	return out
}

func decodeHash(s string) ([]byte, error) {
	h, err := canon.ParseDigest(s)
	if err != nil {
		return nil, err
	}
	return h[:], nil
}

func decodeHashes(ss []string) ([][]byte, error) {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		h, err := decodeHash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// EntryURI is the transparency URI of a log entry: the log's URL and
// /entries/<index>, which tracectl log serve resolves to the entry's bytes.
func EntryURI(logURL string, index uint64) string {
	return strings.TrimRight(logURL, "/") + "/entries/" + strconv.FormatUint(index, 10)
}
