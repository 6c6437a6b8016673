package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
)

// Canonicalize returns the RFC 8785 form of data under p with default limits.
func Canonicalize(data []byte, p Policy) ([]byte, error) {
	return appendCanonical(nil, data, p, Limits{})
}

// appendCanonical appends the canonical form of data to dst. On error dst is
// returned unchanged: no partial output.
func appendCanonical(dst, data []byte, p Policy, lim Limits) ([]byte, error) {
	if !p.valid() {
		return dst, fmt.Errorf("canon: invalid policy %d", p)
	}
	d, err := parse(data, ParseOptions{Limits: lim})
	if err != nil {
		return dst, err
	}
	return d.Root().appendCanonical(dst, p)
}

func (v Value) appendCanonical(dst []byte, p Policy) ([]byte, error) {
	if !p.valid() {
		return dst, fmt.Errorf("canon: invalid policy %d", p)
	}
	if v.d == nil {
		return dst, errors.New("canon: canonical form of the zero Value")
	}
	if err := v.d.check(v.i, p); err != nil {
		return dst, err
	}
	// Canonical output is rarely longer than the input (only exponent
	// spellings of integers, "1e15", grow), so one reservation suffices.
	e := encoder{d: v.d, buf: slices.Grow(dst, len(v.Raw())+16)}
	e.encode(v.i)
	return e.buf, nil
}

// Canonical returns the canonical form of the subtree at v under p. Errors
// carry pointers and offsets within v's document.
func (v Value) Canonical(p Policy) ([]byte, error) { return v.appendCanonical(nil, p) }

// Digest returns the sha256 digest ("sha256:<hex>") of data's canonical form
// under p. It streams the canonical bytes into the hash: no second copy of
// the document is held.
func Digest(data []byte, p Policy) (string, error) {
	if !p.valid() {
		return "", fmt.Errorf("canon: invalid policy %d", p)
	}
	d, err := parse(data, ParseOptions{})
	if err != nil {
		return "", err
	}
	return d.Root().Digest(p)
}

// Digest returns the sha256 digest of the subtree's canonical form.
func (v Value) Digest(p Policy) (string, error) {
	h := sha256.New()
	if _, err := v.writeTo(h, p); err != nil {
		return "", err
	}
	return formatDigest(h), nil
}

// WriteCanonical streams data's canonical form to w. The whole document is
// judged before the first byte is written, so on a canonicalization error
// nothing is written; an error from w stops the output where it failed.
func WriteCanonical(w io.Writer, data []byte, p Policy, lim Limits) (int64, error) {
	if !p.valid() {
		return 0, fmt.Errorf("canon: invalid policy %d", p)
	}
	d, err := parse(data, ParseOptions{Limits: lim})
	if err != nil {
		return 0, err
	}
	return d.Root().writeTo(w, p)
}

func (v Value) writeTo(w io.Writer, p Policy) (int64, error) {
	if !p.valid() {
		return 0, fmt.Errorf("canon: invalid policy %d", p)
	}
	if v.d == nil {
		return 0, errors.New("canon: canonical form of the zero Value")
	}
	if err := v.d.check(v.i, p); err != nil {
		return 0, err
	}
	e := encoder{d: v.d, w: w, buf: make([]byte, 0, min(len(v.Raw())+16, 2*flushAt)), lastWord: int32(len(v.d.src) - 16)}
	e.encode(v.i)
	if e.werr == nil && len(e.buf) > 0 {
		m, err := w.Write(e.buf)
		e.n += int64(m)
		e.werr = err
	}
	return e.n, e.werr
}

// ErrNotCanonical reports input that is valid under the policy but not in
// its canonical form.
var ErrNotCanonical = errors.New("not in canonical form")

// Check returns nil iff data is exactly its own canonical form under p.
func Check(data []byte, p Policy) error {
	c, err := appendCanonical(nil, data, p, Limits{})
	if err != nil {
		return err
	}
	if !bytes.Equal(c, data) {
		off := 0
		for off < len(c) && off < len(data) && c[off] == data[off] {
			off++
		}
		return fmt.Errorf("%w: first difference at byte %d", ErrNotCanonical, off)
	}
	return nil
}

// Marshal encodes a Go value with encoding/json and canonicalizes the result
// under PolicyV02: the way tracectl writes its own evidence objects.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return Canonicalize(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), PolicyV02)
}

// SHA256 returns "sha256:<64 lowercase hex>" of b's exact bytes.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func formatDigest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// ParseDigest checks the form "sha256:<64 lowercase hex>" and returns the sum.
func ParseDigest(s string) ([32]byte, error) {
	var sum [32]byte
	const prefix = "sha256:"
	if len(s) != len(prefix)+64 || s[:len(prefix)] != prefix {
		return sum, fmt.Errorf("digest %q: want sha256:<64 lowercase hex>", truncate(s))
	}
	for _, c := range s[len(prefix):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return sum, fmt.Errorf("digest %q: want sha256:<64 lowercase hex>", truncate(s))
		}
	}
	hex.Decode(sum[:], []byte(s[len(prefix):]))
	return sum, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
