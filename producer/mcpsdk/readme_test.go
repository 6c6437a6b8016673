package mcpsdk_test

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// recordStdioServer is README.md's in-process snippet, whole: the README
// quotes the lines between the markers, and TestREADMESnippet keeps the two
// equal, so the snippet compiles and runs.
func recordStdioServer(ctx context.Context, dir, serverPath string, key sign.Signer) error {
	// README:begin
	server, err := producer.StdioServer(nil, serverPath, nil, "my-mcp-server") // the server as the header names it
	if err != nil {
		return err
	}
	rec, err := producer.Open(dir, producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "my-agent", Version: "1.0"}, Server: server})
	if err != nil {
		return err
	}
	in, out, err := mcpsdk.Command(exec.Command(serverPath), 0) // or any byte stream
	if err != nil {
		return err
	}
	t := &mcpsdk.Transport{Recorder: rec, ServerIn: in, ServerOut: out}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1.0"}, nil).Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	// ... cs.ListTools, cs.CallTool: each tools/call is durable before the server sees it ...
	cs.Close()
	if _, err := t.Wait(ctx); err != nil { // the session has ended, what the server still sent is recorded
		return err
	}
	signer := sign.TranscriptSigner{Key: key, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("my-agent 1.0"))}}
	_, err = rec.Seal(ctx, signer) // record.json, signed by key
	return err
	// README:end
}

// TestREADMESnippet runs the snippet against a real stdio server and
// requires README.md to quote it exactly.
func TestREADMESnippet(t *testing.T) {
	root, err := mcptest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "producer", "mcpsdk", "readme_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "\t// README:begin\n")
	body, _, _ = strings.Cut(body, "\t// README:end\n")
	var want []string
	for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		want = append(want, strings.TrimPrefix(l, "\t"))
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+strings.Join(want, "\n")+"\n```\n") {
		t.Errorf("README.md does not quote recordStdioServer's body as its in-process snippet; it should read:\n%s", strings.Join(want, "\n"))
	}

	key, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run.trace")
	if err := recordStdioServer(context.Background(), dir, mcptest.Build(t, "sdkserver"), signer); err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: signer.Public(), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Bundle(context.Background(), os.DirFS(dir))
	if err != nil && rep == nil {
		t.Fatal(err)
	}
	// A session without a call binds no snapshot: verified or incomplete,
	// never failed.
	if rep.Verdict == verify.Failed {
		t.Fatalf("the snippet's bundle: verdict %s", rep.Verdict)
	}
}
