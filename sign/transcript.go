package sign

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TranscriptSigner builds and signs the Trust Record that commits to a
// sealed transcript (or to a checkpoint of one). It implements
// producer.RecordSigner, which sign does not import, so an in-process
// runtime seals a signed bundle with
//
//	rec.Seal(ctx, sign.TranscriptSigner{Key: s, Record: sign.RecordOptions{Digest: d}})
//
// Record is the template of every record it signs: each call sets its
// IssuedAt (from Now), Key (Key.Public()), TranscriptHash and CallCount;
// everything else is the template's, defaults included (Build). Digest,
// the runtime's build provenance, is required.
type TranscriptSigner struct {
	Key    Signer
	Record RecordOptions
	// Now is the record's issue time (nil: time.Now). The verifier never
	// reads a clock; this is the producer's.
	Now func() time.Time
}

// SignTranscript returns the signed record (record.json's bytes) for a
// transcript with commitment root and calls tools/call attempts.
func (t TranscriptSigner) SignTranscript(ctx context.Context, root string, calls int64) ([]byte, error) {
	if t.Key == nil {
		return nil, errors.New("sign transcript: no key")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sign transcript: %w", err)
	}
	o := t.Record
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	o.IssuedAt, o.Key, o.TranscriptHash, o.CallCount = now(), t.Key.Public(), root, calls
	rec, err := Build(o)
	if err != nil {
		return nil, fmt.Errorf("sign transcript: %w", err)
	}
	return Sign(rec, t.Key)
}
