package signer

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

// clientTimeout bounds one request of a Client, connecting included.
const clientTimeout = 30 * time.Second

// Client signs through a signer server. It is a sign.Signer: Sign and
// sign.TranscriptSigner use it like a key. Its statements are of kind
// KindRecord; ForCheckpoints returns the same client for checkpoints.
type Client struct {
	path string
	kind Kind
	alg  sign.Alg
	pub  crypto.PublicKey
}

// Dial asks the server at the Unix socket path for its public key and
// returns a client signing with it. A server that cannot be reached is a
// *net.OpError (wrapped); a refusal an *Error.
func Dial(ctx context.Context, path string) (*Client, error) {
	c := &Client{path: path, kind: KindRecord}
	resp, err := c.roundTrip(ctx, &request{Op: opPublicKey})
	if err != nil {
		return nil, err
	}
	pub, err := sign.ParsePublicKey([]byte(resp.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("signer unix:%s: public key: %w", path, err)
	}
	alg, err := algOf(pub)
	if err != nil || string(alg) != resp.Alg {
		return nil, fmt.Errorf("signer unix:%s: public key of %T for algorithm %q", path, pub, resp.Alg)
	}
	c.alg, c.pub = alg, pub
	return c, nil
}

func (c *Client) Alg() sign.Alg            { return c.alg }
func (c *Client) Public() crypto.PublicKey { return c.pub }

// ForCheckpoints is c signing checkpoints.
func (c *Client) ForCheckpoints() sign.Signer {
	d := *c
	d.kind = KindCheckpoint
	return &d
}

// SignRecordBytes has the server sign a record's preimage and checks the
// signature under the server's key before returning it: a server that
// answers with another key's signature, or none, fails here.
func (c *Client) SignRecordBytes(preimage []byte) ([]byte, error) {
	resp, err := c.roundTrip(context.Background(), &request{Op: opSign, Kind: c.kind, Payload: preimage})
	if err != nil {
		return nil, err
	}
	rec, err := sign.ParseRecord(preimage)
	if err != nil {
		return nil, fmt.Errorf("signer unix:%s: %w", c.path, err)
	}
	rec.Signature = base64.RawURLEncoding.EncodeToString(resp.Signature)
	signed, err := canon.Marshal(rec)
	if err == nil {
		err = sign.VerifySignature(signed, rec)
	}
	if err != nil {
		return nil, fmt.Errorf("signer unix:%s: the signature returned does not verify: %w", c.path, err)
	}
	return resp.Signature, nil
}

// SignRekorDigest has the server sign the digest of record, a record it
// signed (anchors/record.json), for a Rekor v2 hashedrekord entry: the
// server checks the record (CheckSignedRecord) and signs RekorDigest's
// digest (Ed25519ph over SHA-512 for an Ed25519 key, ECDSA DER
// otherwise). The signature is checked under the server's key before it
// is returned.
func (c *Client) SignRekorDigest(ctx context.Context, record []byte) ([]byte, error) {
	resp, err := c.roundTrip(ctx, &request{Op: opSign, Kind: KindRekor, Payload: record})
	if err != nil {
		return nil, err
	}
	digest, h := RekorDigest(c.alg, record)
	ok := false
	switch k := c.pub.(type) {
	case ed25519.PublicKey:
		ok = ed25519.VerifyWithOptions(k, digest, resp.Signature, &ed25519.Options{Hash: h}) == nil
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(k, digest, resp.Signature)
	}
	if !ok {
		return nil, fmt.Errorf("signer unix:%s: the digest signature returned does not verify", c.path)
	}
	return resp.Signature, nil
}

// roundTrip sends one request on a new connection and reads its response.
func (c *Client) roundTrip(ctx context.Context, req *request) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	req.V = Version
	// A write the server cut short still leaves its answer to read (a
	// refusal), so the error of the write only counts without one.
	werr := writeMessage(conn, req)
	var resp response
	if err := readMessage(conn, MaxResponseBytes, &resp); err != nil {
		return nil, fmt.Errorf("signer unix:%s: response: %w", c.path, errors.Join(werr, err))
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("signer unix:%s: %w", c.path, resp.Error)
	}
	if resp.V != Version {
		return nil, fmt.Errorf("signer unix:%s: response of protocol version %d, want %d", c.path, resp.V, Version)
	}
	return &resp, nil
}
