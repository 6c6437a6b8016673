package sign

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
)

// TranscriptSigner's record commits to the root and count it is given,
// at the time its clock says, with the template's other claims, and its
// signature verifies under the signer's key.
func TestTranscriptSigner(t *testing.T) {
	k, err := Generate(Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_780_000_000, 0)
	root := canon.SHA256([]byte("a transcript"))
	ts := TranscriptSigner{Key: s, Now: func() time.Time { return at }, Record: RecordOptions{
		Digest: canon.SHA256([]byte("runtime")), Subject: "spiffe://example.org/agent-7", TranscriptHash: "ignored", CallCount: 99,
	}}
	b, err := ts.SignTranscript(context.Background(), root, 12)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifySignature(b, rec); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if err := CheckTrust(rec, s.Public()); err != nil {
		t.Fatalf("trust: %v", err)
	}
	tt := rec.ToolTranscript
	if tt == nil || tt.Hash != root || tt.CallCount == nil || *tt.CallCount != 12 || rec.IAT != at.Unix() || rec.Subject != "spiffe://example.org/agent-7" {
		t.Fatalf("record %+v, transcript %+v", rec, tt)
	}

	if _, err := (TranscriptSigner{}).SignTranscript(context.Background(), root, 1); err == nil {
		t.Error("signed without a key")
	}
	if _, err := (TranscriptSigner{Key: s}).SignTranscript(context.Background(), root, 1); err == nil {
		t.Error("signed without the runtime's digest")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ts.SignTranscript(ctx, root, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
