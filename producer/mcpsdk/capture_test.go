package mcpsdk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/mcpsdk"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestAdapterCapturesWithoutList: an in-process Go SDK client that calls a
// tool without ever listing (it knows the name already) still gets its
// call bound to a complete snapshot: the session collects the list itself,
// and the bundle verifies with no finding short of pass or info.
func TestAdapterCapturesWithoutList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := mcptest.Build(t, "sdkserver")
	dir := filepath.Join(t.TempDir(), "run.trace")
	server, err := producer.StdioServer(nil, srv, nil, "sdkserver")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := producer.Open(dir, producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "capture-test", Version: "1"}, Server: server})
	if err != nil {
		t.Fatal(err)
	}
	in, out, err := mcpsdk.Command(exec.Command(srv, "-tools", "9", "-page-size", "4"), 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcpsdk.Transport{Recorder: rec, ServerIn: in, ServerOut: out}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "capture-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"n": 1}}); err != nil || res.IsError {
		t.Fatalf("call: %v %v", res, err)
	}
	cs.Close()
	if _, err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Seal(ctx, sign.TranscriptSigner{Key: signer, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("capture-test 1"))}}); err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: signer.Public(), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := v.Bundle(ctx, verify.DirFS(dir))
	if rep == nil || rep.Verdict != verify.Verified || rep.Counts.Snapshots != 1 || rep.Warnings != 0 {
		t.Fatalf("report %+v", rep)
	}
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	var bound bool
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		ev, err := transcript.DecodeLine(l)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := ev.(*transcript.Attempt); ok {
			bound = a.Snapshot.Complete && a.Snapshot.SnapshotID != ""
		}
	}
	if !bound {
		t.Errorf("the call binds no complete snapshot:\n%s", data)
	}
}
