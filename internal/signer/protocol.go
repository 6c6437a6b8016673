package signer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version every request and response carries.
const Version = 1

// MaxRequestBytes bounds a request, its LF included. A statement is at most
// sign.MaxRecordBytes (64 KiB) before base64: 1 MiB leaves room and still
// bounds what an unauthenticated peer can make the server read.
const MaxRequestBytes = 1 << 20

// MaxResponseBytes bounds a response, its LF included: a PEM public key or
// a signature, or an error with its detail (at most maxDetail bytes).
const MaxResponseBytes = 64 << 10

// maxDetail bounds an error's detail, so a response never nears its bound.
const maxDetail = 1024

// The operations.
const (
	opSign      = "sign"
	opPublicKey = "public_key"
)

// Kind says what a statement is. Record and checkpoint are Trust Record
// preimages, and a checkpoint never names a log entry; rekor is a signed
// record whose digest is signed for a Rekor v2 entry. The kind is
// journaled.
type Kind string

// The kinds a server signs.
const (
	KindRecord     Kind = "record"     // record.json (or anchors/record.json)
	KindCheckpoint Kind = "checkpoint" // checkpoints/<N>.json
	// KindRekor: the payload is anchors/record.json, a record the server's
	// key signed; the server signs its digest (RekorDigest) for a Rekor v2
	// hashedrekord entry (spec/anchoring.md, "Rekor v2").
	KindRekor Kind = "rekor"
)

// Code is a refusal's stable code (spec/signer.md).
type Code string

// The codes. Never renamed: clients and scripts match them.
const (
	CodeBadRequest    Code = "bad_request"     // not a request of this protocol (syntax, size, version, op)
	CodeNotAStatement Code = "not_a_statement" // the bytes are not a statement a recorder makes
	CodeKeyMismatch   Code = "key_mismatch"    // the statement's cnf.jwk is not the server's key
	CodeRateLimited   Code = "rate_limited"    // over --rate: try again later
	CodePeerRefused   Code = "peer_refused"    // the peer's uid is not allowed
	CodeUnavailable   Code = "unavailable"     // the server could not sign or journal
)

// AllCodes lists every Code, in the order spec/signer.md's table does.
var AllCodes = []Code{CodeBadRequest, CodeNotAStatement, CodeKeyMismatch, CodeRateLimited, CodePeerRefused, CodeUnavailable}

// Sentinels matched with errors.Is on an *Error of the same code.
var (
	ErrBadRequest    = errors.New("bad request")
	ErrNotAStatement = errors.New("not a statement")
	ErrKeyMismatch   = errors.New("key mismatch")
	ErrRateLimited   = errors.New("rate limited")
	ErrPeerRefused   = errors.New("peer refused")
	ErrUnavailable   = errors.New("signer unavailable")
)

var codeErrors = map[Code]error{
	CodeBadRequest: ErrBadRequest, CodeNotAStatement: ErrNotAStatement,
	CodeKeyMismatch: ErrKeyMismatch, CodeRateLimited: ErrRateLimited, CodePeerRefused: ErrPeerRefused,
	CodeUnavailable: ErrUnavailable,
}

// Error is a refusal: its code and the server's reason.
type Error struct {
	Code   Code   `json:"code"`
	Detail string `json:"detail"`
}

func (e *Error) Error() string { return fmt.Sprintf("signer refused (%s): %s", e.Code, e.Detail) }

// Is matches the sentinel of e's code.
func (e *Error) Is(target error) bool { s, ok := codeErrors[e.Code]; return ok && s == target }

func refuse(code Code, format string, a ...any) *Error {
	d := fmt.Sprintf(format, a...)
	if len(d) > maxDetail {
		d = d[:maxDetail]
	}
	return &Error{Code: code, Detail: d}
}

type request struct {
	V       int    `json:"v"`
	Op      string `json:"op"`
	Kind    Kind   `json:"kind,omitempty"`
	Payload []byte `json:"payload,omitempty"` // standard base64
}

type response struct {
	V         int    `json:"v"`
	Alg       string `json:"alg,omitempty"`
	PublicKey string `json:"public_key,omitempty"` // PKIX PEM
	Signature []byte `json:"signature,omitempty"`  // raw, as sign.Signer returns it; standard base64
	Error     *Error `json:"error,omitempty"`
}

// errTooLarge: a message over its bound.
var errTooLarge = errors.New("message too large")

// readMessage reads one LF-terminated message of at most max bytes (LF
// included) and decodes it strictly into v: unknown members and anything
// after the JSON text are refused.
func readMessage(r io.Reader, max int, v any) error {
	line, err := bufio.NewReader(io.LimitReader(r, int64(max)+1)).ReadBytes('\n')
	switch {
	case len(line) > max:
		return fmt.Errorf("%w: over %d bytes", errTooLarge, max)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("message not terminated by LF (%d bytes): %w", len(line), io.ErrUnexpectedEOF)
	case err != nil:
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if len(bytes.TrimSpace(line[dec.InputOffset():])) != 0 {
		return errors.New("decode: data after the JSON text")
	}
	return nil
}

// writeMessage writes v as one JSON text and an LF.
func writeMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
