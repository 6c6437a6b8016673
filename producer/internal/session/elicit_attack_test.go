package session

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/verify"
)

// sealVerify seals the raw session's recording signed and verifies it,
// failing the test on any failed finding.
func (r *rawElicitSession) sealVerify(t *testing.T) string {
	t.Helper()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	signer, err := sign.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.rec.Seal(context.Background(), sign.TranscriptSigner{Key: signer, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("elicit test"))}}); err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: key.Public().(ed25519.PublicKey), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := v.Bundle(context.Background(), verify.DirFS(r.rec.Dir()))
	if rep == nil {
		t.Fatal("no report")
	}
	var b strings.Builder
	for _, f := range rep.Findings {
		if f.Status == verify.StatusFail {
			fmt.Fprintf(&b, "  %s [%s] %s\n", f.Code, f.Subject, f.Detail)
		}
	}
	if rep.Verdict == verify.Failed {
		t.Errorf("an honest session is failed:\n%s", b.String())
	}
	return b.String()
}

// TestSessionElicitLongIDVerifies: a client response under an id of the
// session's namespace but longer than the transcript keeps an id's text
// (4096 bytes: the line keeps its digest only) is not taken as the answer
// to the recorder's own request: withheld, verify could not tell its id
// is of the namespace and would fail the honest bundle (frame_misrecorded).
// It is a response as any other; the call is still decided by its real
// answer, and the bundle verifies.
func TestSessionElicitLongIDVerifies(t *testing.T) {
	r := newRawElicitSession(t)
	r.write(elicitCall("1", "1"))
	ask := r.read()
	var id string
	if err := json.Unmarshal(ask["id"], &id); err != nil {
		t.Fatal(err)
	}
	long := id + strings.Repeat("z", 5000)
	r.write(`{"jsonrpc":"2.0","id":"` + long + `","result":{"action":"accept","content":{"approve":true}}}`)
	r.write(`{"jsonrpc":"2.0","id":"` + id + `","result":{"action":"decline"}}`)
	if m := r.read(); string(m["id"]) != "1" || !strings.Contains(string(m["error"]), "declined") {
		t.Fatalf("%v", m)
	}
	r.clientW.Close()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	r.sealVerify(t)
}

// TestSessionElicitRefusedAnswerUnanswered: a client answer to the
// recorder's elicitation that the gate refuses for a repeated member is
// still shaped as a response (result, no method): it gets no answer at all
// (spec/wrap.md), not an error under the recorder's own request id. The
// approval goes on waiting; the client's next answer decides it.
func TestSessionElicitRefusedAnswerUnanswered(t *testing.T) {
	r := newRawElicitSession(t)
	r.write(elicitCall("1", "1"))
	ask := r.read()
	var id string
	if err := json.Unmarshal(ask["id"], &id); err != nil {
		t.Fatal(err)
	}
	r.write(`{"jsonrpc":"2.0","id":"` + id + `","result":{"action":"accept","content":{"approve":true,"approve":true}}}`)
	r.write(`{"jsonrpc":"2.0","id":"` + id + `","result":{"action":"decline"}}`)
	if m := r.read(); string(m["id"]) != "1" || !strings.Contains(string(m["error"]), "the client declined") {
		t.Fatalf("the client got %s, want the call denied", m["error"])
	}
	r.clientW.Close()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.server.String(), `"x":1`) {
		t.Errorf("the call reached the server:\n%s", r.server.String())
	}
	r.sealVerify(t)
}
