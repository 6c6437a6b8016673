package signer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// MaxJournalLine bounds a journal line, its LF included: an entry is about
// 400 bytes.
const MaxJournalLine = 4096

// zeroHash is the prev of the first line.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Entry is one journal line: one signature.
type Entry struct {
	Seq    int64  `json:"seq"`      // 1, 2, ... in the order signed
	Time   string `json:"time"`     // RFC 3339, UTC, nanoseconds: the server's clock when it signed
	UID    uint32 `json:"peer_uid"` // the peer's credentials (SO_PEERCRED)
	PID    int32  `json:"peer_pid"`
	Kind   Kind   `json:"kind"`
	SHA256 string `json:"sha256"` // hex SHA-256 of the exact bytes signed (the record's preimage)
	Key    string `json:"key"`    // RFC 7638 thumbprint of the key that signed
	Prev   string `json:"prev"`   // hex SHA-256 of the previous line without its LF (zeroHash for the first)
}

// ErrJournalBroken: a journal line is malformed or its chain is broken.
var ErrJournalBroken = errors.New("journal chain broken")

// JournalError names the first bad line; it is ErrJournalBroken.
type JournalError struct {
	Line   int64 // 1-based
	Reason string
}

func (e *JournalError) Error() string {
	return fmt.Sprintf("%v at line %d: %s", ErrJournalBroken, e.Line, e.Reason)
}

func (e *JournalError) Is(target error) bool { return target == ErrJournalBroken }

// JournalState is what a checked journal ends with.
type JournalState struct {
	Lines int64  // entries
	Last  string // hex SHA-256 of the last line (zeroHash when empty): the next line's prev
}

// lineHash is the chain's hash of a line (without its LF).
func lineHash(line []byte) string {
	h := sha256.Sum256(line)
	return hex.EncodeToString(h[:])
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// CheckJournal reads a whole journal and checks every line: one LF-
// terminated JSON object of at most MaxJournalLine bytes with exactly the
// Entry members, seq counting from 1, a valid time, kind and hashes, and
// prev the SHA-256 of the line before (zeroHash for the first), each
// line exactly the entry's own encoding. A line edited, removed,
// reordered or inserted without recomputing the chain after it breaks it
// at or after it: the error is a *JournalError naming the first bad line.
// The chain is unkeyed: a rewrite that recomputes it, or a cut after a
// line, is seen only against Lines and Last kept elsewhere.
func CheckJournal(r io.Reader) (JournalState, error) {
	st := JournalState{Last: zeroHash}
	br := bufio.NewReaderSize(r, MaxJournalLine)
	for {
		line, err := br.ReadSlice('\n')
		n := st.Lines + 1
		switch {
		case errors.Is(err, io.EOF) && len(line) == 0:
			return st, nil
		case errors.Is(err, io.EOF):
			return st, &JournalError{Line: n, Reason: "not terminated by LF (a torn write?)"}
		case errors.Is(err, bufio.ErrBufferFull):
			return st, &JournalError{Line: n, Reason: fmt.Sprintf("longer than %d bytes", MaxJournalLine)}
		case err != nil:
			return st, fmt.Errorf("read journal: %w", err)
		}
		line = line[:len(line)-1]
		e, reason := parseEntry(line)
		switch {
		case reason != "":
		case e.Seq != n:
			reason = fmt.Sprintf("seq %d, want %d", e.Seq, n)
		case e.Prev != st.Last:
			reason = fmt.Sprintf("prev %s is not the SHA-256 of the line before (%s)", e.Prev, st.Last)
		}
		if reason != "" {
			return st, &JournalError{Line: n, Reason: reason}
		}
		st.Lines, st.Last = n, lineHash(line)
	}
}

func parseEntry(line []byte) (Entry, string) {
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, "not an entry: " + err.Error()
	}
	if dec.InputOffset() != int64(len(line)) {
		return e, "data after the entry"
	}
	if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil {
		return e, "time: " + err.Error()
	}
	if e.Kind != KindRecord && e.Kind != KindCheckpoint && e.Kind != KindRekor {
		return e, fmt.Sprintf("kind %q", string(e.Kind))
	}
	if !isHex64(e.SHA256) || !isHex64(e.Prev) {
		return e, "sha256 and prev must be 64 lowercase hex digits"
	}
	if !thumbprintShape(e.Key) {
		return e, "key must be an RFC 7638 thumbprint (43 base64url characters)"
	}
	// The line is exactly what Append writes for what it holds: no member
	// repeated or spelled in another case (encoding/json reads either),
	// no other order or spacing, so every reader reads one entry.
	if again, err := json.Marshal(e); err != nil || !bytes.Equal(again, line) {
		return e, "not the entry's own encoding (a repeated member, another spelling, order or spacing)"
	}
	return e, ""
}

// thumbprintShape: 43 base64url characters, a SHA-256 thumbprint.
func thumbprintShape(s string) bool {
	if len(s) != 43 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Journal appends entries to a journal file.
type Journal struct {
	f     *os.File
	state JournalState
}

// OpenJournal opens path for appending, creating it with mode 0600. An
// existing journal is checked first (CheckJournal): one whose chain is
// broken, or that group or others may write, is refused rather than
// continued.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", path)
	}
	if err == nil && fi.Mode().Perm()&0o022 != 0 {
		err = fmt.Errorf("%s: %w: writable by group or others (mode %04o)", path, fs.ErrPermission, fi.Mode().Perm())
	}
	var st JournalState
	if err == nil {
		st, err = CheckJournal(f)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open journal: %w", err)
	}
	return &Journal{f: f, state: st}, nil
}

// State is the journal's length and last line hash.
func (j *Journal) State() JournalState { return j.state }

// Append fills e's Seq and Prev, writes it as one line and fsyncs the file.
// A failed write leaves the journal unusable: the caller must not sign
// again through it (the server stops signing).
func (j *Journal) Append(e Entry) error {
	e.Seq, e.Prev = j.state.Lines+1, j.state.Last
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	j.state = JournalState{Lines: e.Seq, Last: lineHash(b)}
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }
