// Package rekorsubmit submits a sealed record to a Rekor v2 log with
// rekor-tiles' own write client (spec/anchoring.md, "Rekor v2"): a
// hashedrekord v0.0.2 entry over the record's digest, signed with the
// producer key, and the TransparencyLogEntry the log returns.
package rekorsubmit

import (
	"context"
	"crypto"
	"fmt"
	"net/url"

	pbs "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/rekor-tiles/v2/pkg/client"
	"github.com/sigstore/rekor-tiles/v2/pkg/client/write"

	"github.com/tracectl/tracectl/internal/anchor/rekor"
)

// Client adds entries to one Rekor v2 log.
type Client struct {
	URL  string
	host string // the checkpoint origin the log's answers must have
	w    write.Client
}

// New returns the client of the Rekor v2 log at rawURL (http or https).
func New(rawURL, userAgent string) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("rekor URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("rekor URL %.200q: want http(s)://HOST[:PORT]", rawURL)
	}
	w, err := write.NewWriter(rawURL, client.WithUserAgent(userAgent))
	if err != nil {
		return nil, err
	}
	return &Client{URL: rawURL, host: u.Hostname(), w: w}, nil
}

// Add submits statement: its digest signed by s (whose public key is pub;
// a rekor.DigestSigner or rekor.RecordDigestSigner, else
// rekor.ErrNoDigestSigner),
// as a hashedrekord entry. It returns once the log has integrated the
// entry and answered with its inclusion proof, or ctx ends. The entry is
// checked to be for this statement and key, and its proof against its
// checkpoint (rekor.CheckAnswer), before it is returned.
func (c *Client) Add(ctx context.Context, statement []byte, pub crypto.PublicKey, s any) (*pbs.TransparencyLogEntry, error) {
	req, err := rekor.Request(ctx, statement, pub, s)
	if err != nil {
		return nil, err
	}
	e, err := c.w.Add(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("rekor %s: %w", c.URL, err)
	}
	if err := rekor.Matches(e, statement, pub); err != nil {
		return nil, fmt.Errorf("rekor %s answered %w", c.URL, err)
	}
	if err := rekor.CheckAnswer(e, req, c.host); err != nil {
		return nil, fmt.Errorf("rekor %s answered %w", c.URL, err)
	}
	return e, nil
}
