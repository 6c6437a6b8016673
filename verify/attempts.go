package verify

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"math"
	"strings"

	"github.com/tracectl/tracectl/transcript"
)

// attemptState is an attempt's outcome state as the checks see it.
type attemptState struct {
	seq      int64
	state    uint8
	resolved bool // a resolution was recorded
}

// attemptTable is what the verifier keeps per attempt identity, compactly,
// so that a transcript of a million attempts costs tens of megabytes
// (spec/verification.md, "Resources"): a 12-byte entry per attempt, its id
// and JSON-RPC id text in one append-only arena, and an open-addressing
// index of 4-byte slots. The index hash is seeded at random per table, so
// ids crafted to collide cannot make lookups quadratic; the verdict never
// depends on the seed (lookups compare the id bytes).
type attemptTable struct {
	seed    maphash.Seed
	slots   []uint32 // entry index + 1; 0 is empty; len is a power of two
	entries []attemptEntry
	arena   []byte // per entry: len(id) (1 byte), id, rpc kind (1 byte), uvarint len, rpc bytes
}

type attemptEntry struct {
	off      uint32 // into arena
	seq      uint32
	state    uint8
	resolved bool
}

// rpc kinds in the arena.
const (
	rpcNone   = 0 // the attempt line records no JSON-RPC id
	rpcText   = 1 // the exact id text
	rpcDigest = 2 // SHA-256 of the id text (longer than transcript.MaxRPCIDTextBytes)
)

// errTableFull: the arena or the entries would pass what 32-bit offsets
// address (4 GiB of ids, 4 billion attempts).
var errTableFull = errors.New("more attempt identities than this verifier keeps (4 GiB of ids or 2^32 attempts)")

func newAttemptTable() *attemptTable {
	return &attemptTable{seed: maphash.MakeSeed(), slots: make([]uint32, 64)}
}

func (t *attemptTable) len() int { return len(t.entries) }

func (t *attemptTable) idAt(off uint32) string {
	n := uint32(t.arena[off])
	return string(t.arena[off+1 : off+1+n])
}

func (t *attemptTable) idEquals(off uint32, id string) bool {
	n := uint32(t.arena[off])
	return int(n) == len(id) && string(t.arena[off+1:off+1+n]) == id
}

// slot returns the slot of id: its entry's, or the empty one it would take.
func (t *attemptTable) slot(id string) int {
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(t.seed, id) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 || t.idEquals(t.entries[s-1].off, id) {
			return int(i)
		}
	}
}

// get returns the state of attempt id.
func (t *attemptTable) get(id string) (attemptState, bool) {
	s := t.slots[t.slot(id)]
	if s == 0 {
		return attemptState{}, false
	}
	e := &t.entries[s-1]
	return attemptState{seq: int64(e.seq), state: e.state, resolved: e.resolved}, true
}

// put updates the state of an attempt added before.
func (t *attemptTable) put(id string, a attemptState) {
	if s := t.slots[t.slot(id)]; s != 0 {
		e := &t.entries[s-1]
		e.state, e.resolved = a.state, a.resolved
	}
}

// add records a new attempt id (128 bytes at most, transcript's limit, checked by
// the line's validation) at seq, with the JSON-RPC id its response must
// answer. The caller has checked that id is not in the table; seq is a
// line index, below Limits.MaxTranscriptLines or a proof's tree size, both
// at most 2^32-1.
func (t *attemptTable) add(id string, seq int64, rpc transcript.JSONRPCID) error {
	var rpcBytes []byte
	kind := byte(rpcNone)
	switch {
	case !rpc.Present:
	case rpc.Digest != "":
		h, err := hex.DecodeString(strings.TrimPrefix(rpc.Digest, "sha256:"))
		if err == nil && len(h) == sha256.Size {
			kind, rpcBytes = rpcDigest, h
		}
	default:
		kind, rpcBytes = rpcText, []byte(rpc.Text)
	}
	if len(id) > math.MaxUint8 || seq < 0 || seq > math.MaxUint32 || len(t.entries) >= math.MaxUint32-1 ||
		len(t.arena)+len(id)+len(rpcBytes)+12 > math.MaxUint32 {
		return errTableFull
	}
	off := uint32(len(t.arena))
	t.arena = append(t.arena, byte(len(id)))
	t.arena = append(t.arena, id...)
	t.arena = append(t.arena, kind)
	t.arena = binary.AppendUvarint(t.arena, uint64(len(rpcBytes)))
	t.arena = append(t.arena, rpcBytes...)
	t.entries = append(t.entries, attemptEntry{off: off, seq: uint32(seq)})
	// Grow at 3/4 load: probes stay short.
	if 4*len(t.entries) > 3*len(t.slots) {
		t.rehash(2 * len(t.slots))
	} else {
		t.slots[t.slot(id)] = uint32(len(t.entries))
	}
	return nil
}

func (t *attemptTable) rehash(size int) {
	t.slots = make([]uint32, size)
	for i := range t.entries {
		t.slots[t.slot(t.idAt(t.entries[i].off))] = uint32(i + 1)
	}
}

// rpc returns the recorded JSON-RPC id of attempt id: its kind and bytes.
func (t *attemptTable) rpc(id string) (kind byte, b []byte) {
	s := t.slots[t.slot(id)]
	if s == 0 {
		return rpcNone, nil
	}
	off := t.entries[s-1].off
	p := off + 1 + uint32(t.arena[off])
	kind = t.arena[p]
	n, w := binary.Uvarint(t.arena[p+1:])
	start := p + 1 + uint32(w)
	return kind, t.arena[start : start+uint32(n)]
}

// each calls f for every attempt in the order they were added (transcript
// order).
func (t *attemptTable) each(f func(id string, a attemptState)) {
	for i := range t.entries {
		e := &t.entries[i]
		f(t.idAt(e.off), attemptState{seq: int64(e.seq), state: e.state, resolved: e.resolved})
	}
}
