package mcpsdk_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/mcpsdk"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestAdapterPolicy: the in-process adapter under a policy given to the
// recorder (producer.Options.PolicyFile). The denied call never runs in the
// server, the client gets -32094 naming the rule, the allowed one runs, and
// the bundle verifies with the decisions re-derived. A policy that does not
// compile refuses to open the recorder.
func TestAdapterPolicy(t *testing.T) {
	ctx := context.Background()
	ran, serverIn, serverOut := calculator(t, ctx)
	opts := adapterOptions(nil)
	bad := opts
	bad.PolicyFile = []byte("version: 1\ndefault: allow\nrules:\n  - id: broken\n    when: 'args.A +'\n    action: deny\n")
	if _, err := producer.Open(filepath.Join(t.TempDir(), "bad.trace"), bad); !errors.Is(err, producer.ErrInvalidOptions) || !strings.Contains(err.Error(), `rule 0 ("broken")`) {
		t.Fatalf("a policy that does not compile: %v", err)
	}
	opts.PolicyFile = []byte("version: 1\ndefault: allow\nrules:\n  - id: small-sums\n    tool: add\n    when: 'args.A > 100'\n    action: deny\n")
	rec, err := producer.Open(filepath.Join(t.TempDir(), "run.trace"), opts)
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcpsdk.Transport{Recorder: rec, ServerIn: serverIn, ServerOut: serverOut}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1.0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"A": 1, "B": 2}}); err != nil {
		t.Fatalf("the allowed call: %v", err)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"A": 1000, "B": 2}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32094 || !strings.Contains(string(we.Data), `"rule":"small-sums"`) {
		t.Fatalf("the denied call: %v", err)
	}
	cs.Close()
	if _, err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the server ran %d calls, want 1", n)
	}
	rep, err := sealVerify(t, ctx, rec)
	if err != nil || rep.Verdict != verify.Verified || rep.Counts.Denied != 1 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// sealVerify seals rec with a fresh key and verifies the bundle with it.
func sealVerify(t *testing.T, ctx context.Context, rec *producer.Recorder) (*verify.Report, error) {
	t.Helper()
	key, _ := sign.Generate(sign.Ed25519, rand.Reader)
	signer, _ := sign.NewSigner(key)
	if _, err := rec.Seal(ctx, sign.TranscriptSigner{Key: signer, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("t"))}}); err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: signer.Public(), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return v.Bundle(ctx, os.DirFS(rec.Dir()))
}

// adapterOptions are the options of a recorder of the in-process
// calculator, under policy (nil: none).
func adapterOptions(policy []byte) producer.Options {
	return producer.Options{
		Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer:   transcript.Producer{Name: "my-agent", Version: "1.0"},
		Server:     transcript.Server{Transport: transcript.TransportInProcess, Name: "calculator"},
		PolicyFile: policy,
	}
}
