package verify_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/tracectl/tracectl/internal/anchor/rekor/rekortest"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestRekorRootRecordAndProof: a record alone, or with an inclusion proof,
// carries no Rekor entry, so under a Rekor trusted root it is never
// verified: anchor_missing, as for a bundle without its entry. Before,
// a producer's rewritten (re-signed) record with a proof of one of its
// lines was verified under --rekor-root.
func TestRekorRootRecordAndProof(t *testing.T) {
	l, err := rekortest.New("https://rekor.test", "rekor.test", bytes.Repeat([]byte{1}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	root, err := l.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	o := trusted(t)
	o.RekorRoot = root
	files := bundleFiles(verifytest.Standard(t))
	record := files[transcript.RecordFile]
	v := verifier(t, o)
	rep, _ := v.Proof(context.Background(), record, proveFS(t, files, "a3"))
	if rep == nil || rep.Verdict == verify.Verified || !rep.Has(verify.Code("anchor_missing")) {
		t.Fatalf("a proof under a Rekor root:\n%s", dump(rep))
	}
	rep, _ = v.Record(context.Background(), record)
	if rep == nil || rep.Verdict == verify.Verified || !rep.Has(verify.Code("anchor_missing")) {
		t.Fatalf("a record under a Rekor root:\n%s", dump(rep))
	}
}
