package mcpsdk_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }

// script is what the SDK client does in both runs: list the tools, call
// echo three times, a tool error, a call the server rejects.
func script(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	for i := range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"i": i, "s": "<&>"}})
		if err != nil || res.IsError {
			t.Fatalf("echo %d: %v %v", i, res, err)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Fatalf("fail: %v %v", res, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no-such-tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("no-such-tool: no error")
	}
}

// frames is a bundle's evidence of the wire, without what differs between
// two runs by design (times, the execution scope, capture ids): per line,
// its type, direction, kind and the digest and length of the exact bytes.
func frames(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Commitments are salted per recording (transcript v3): two recordings
	// of the same bytes are compared by the plain digests of the retained
	// bytes, each checked against its commitment by Read.
	payloads, err := transcript.OpenPayloads(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer payloads.Close()
	plain := func(p transcript.Payload) string {
		if !p.Retained {
			return "not-retained"
		}
		b, err := payloads.Read(p.Digest, 1<<30)
		if err != nil {
			t.Fatalf("%s: %v", p.Digest, err)
		}
		return canon.SHA256(b)
	}
	var out []string
	r := transcript.NewReader(bufio.NewReader(f))
	for {
		_, ev, err := r.Next()
		if err != nil {
			break
		}
		switch e := ev.(type) {
		case *transcript.Attempt:
			out = append(out, fmt.Sprintf("attempt %s %s %s %d %s", e.AttemptID, e.Tool, plain(e.Request), e.Request.Length, e.RPCID.Text))
		case *transcript.Observation:
			s := "observation " + e.AttemptID + " " + e.Kind
			if e.Response != nil {
				s += fmt.Sprintf(" %s %d", plain(*e.Response), e.Response.Length)
			}
			out = append(out, s)
		case *transcript.Frame:
			out = append(out, fmt.Sprintf("frame %s %d %s %s %s %s %d", e.Direction, e.Index, e.Disposition, e.Kind, e.Method, plain(e.Payload), e.Payload.Length))
		case *transcript.Notification:
			out = append(out, fmt.Sprintf("notification %s %s %s %d", e.Direction, e.Method, plain(e.Payload), e.Payload.Length))
		case *transcript.Protocol:
			out = append(out, "protocol "+string(e.Era)+" "+e.Version+" "+e.Source)
		case *transcript.Resolution:
			out = append(out, "resolution "+e.AttemptID+" "+e.Reason)
		}
	}
	return out
}

func newKey(t *testing.T) sign.Signer {
	t.Helper()
	k, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verified(t *testing.T, dir string, key sign.Signer) *verify.Report {
	t.Helper()
	v, err := verify.New(verify.Options{TrustedKey: key.Public(), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Bundle(context.Background(), os.DirFS(dir))
	if err != nil {
		var b strings.Builder
		if rep != nil {
			for _, f := range rep.Findings {
				fmt.Fprintf(&b, "  %s %s [%s] %s\n", f.Status, f.Code, f.Subject, f.Detail)
			}
		}
		t.Fatalf("verify %s: %v\n%s", dir, err, b.String())
	}
	return rep
}

// TestAdapterMatchesWrap: the Go SDK client against the Go SDK server
// (internal/mcptest/sdkserver) records the same attempts, frames and bytes
// in process through mcpsdk.Transport as through tracectl wrap (the real
// binary, spawned by the SDK's CommandTransport), and both bundles verify.
func TestAdapterMatchesWrap(t *testing.T) {
	srv := mcptest.Build(t, "sdkserver")
	bin := mcptest.BuildTracectl(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpsdk-test", Version: "1"}, nil)

	// In process.
	key := newKey(t)
	inproc := filepath.Join(tmp, "inproc.trace")
	server, err := producer.StdioServer(producer.OS, srv, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := producer.Open(inproc, producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "mcpsdk-test", Version: "1"}, Server: server})
	if err != nil {
		t.Fatal(err)
	}
	in, out, err := mcpsdk.Command(exec.Command(srv), 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcpsdk.Transport{Recorder: rec, ServerIn: in, ServerOut: out}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	script(ctx, t, cs)
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != "client_eof" || len(res.InFlight) != 0 || res.TransportFailures != 0 || res.ClientGone {
		t.Errorf("session result %+v", res)
	}
	if _, err := client.Connect(ctx, tr, nil); err == nil {
		t.Error("a second Connect of one Transport succeeded")
	}
	sealed, err := rec.Seal(ctx, sign.TranscriptSigner{Key: key, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("mcpsdk tests"))}})
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Seal.Attempts != 5 || sealed.Seal.Responses != 5 {
		t.Errorf("seal %+v", sealed.Seal)
	}
	rep := verified(t, inproc, key)
	if rep.Verdict != verify.Verified || rep.Counts.Snapshots != 1 {
		t.Errorf("in-process bundle: verdict %s, counts %+v", rep.Verdict, rep.Counts)
	}

	// Through tracectl wrap.
	keyFile := filepath.Join(tmp, "key.pem")
	if b, err := exec.Command(bin, "keygen", "--out", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, b)
	}
	wrapped := filepath.Join(tmp, "wrap.trace")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "wrap", "--bundle", wrapped, "--key", keyFile, srv)
	cmd.Stderr = &stderr
	cs, err = client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	script(ctx, t, cs)
	if err := cs.Close(); err != nil {
		t.Fatalf("close wrap: %v\n%s", err, stderr.String())
	}
	wkey, err := sign.LoadPublicKeyFile(keyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: wkey, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := v.Bundle(ctx, os.DirFS(wrapped)); err != nil || rep.Verdict != verify.Verified {
		t.Fatalf("wrap bundle: %v\n%s", err, stderr.String())
	}

	a, b := frames(t, inproc), frames(t, wrapped)
	if !slices.Equal(a, b) {
		t.Errorf("the in-process recording differs from wrap's:\n in-process:\n  %s\n wrap:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
	// discover and tools/list (2 protocol lines, 4 frames), 5 attempts
	// with their responses.
	if n := len(a); n != 16 {
		t.Errorf("%d lines of wire evidence, want 16:\n  %s", n, strings.Join(a, "\n  "))
	}
}

// TestAdapterServerGone: the server's output ends with a call in flight
// (the server is a Go SDK server in process; its output pipe is closed
// once the call reached it). The call gets a transport failure, the client
// a JSON-RPC error, and the bundle verifies with the outcome unknown.
func TestAdapterServerGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reached, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	server := mcp.NewServer(&mcp.Implementation{Name: "hang", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		close(reached)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil, ctx.Err()
	})
	serverInR, serverIn := io.Pipe()
	serverOut, serverOutW := io.Pipe()
	if _, err := server.Connect(ctx, &mcp.IOTransport{Reader: serverInR, Writer: serverOutW}, nil); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	dir := filepath.Join(t.TempDir(), "run.trace")
	rec, err := producer.Open(dir, producer.Options{Clock: time.Now, Entropy: rand.Reader, FramesCommitted: true,
		Producer: transcript.Producer{Name: "mcpsdk-test", Version: "1"}, Server: transcript.Server{Transport: transcript.TransportInProcess}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcpsdk.Transport{Recorder: rec, ServerIn: serverIn, ServerOut: serverOut}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpsdk-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		errc <- err
	}()
	<-reached
	serverOutW.Close()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "transport failure") {
		t.Fatalf("the call in flight: %v, want tracectl's transport failure", err)
	}
	// The session ends with the server's output, without waiting for the
	// client, whose connection is closed: a later call fails at once.
	res, err := tr.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}}); err == nil {
		t.Error("a call after the server went away succeeded")
	}
	cs.Close()
	if res.Ended != "server_stdout_closed" || !res.EndedOnItsOwn || res.TransportFailures != 1 {
		t.Errorf("result %+v", res)
	}
	if _, err := rec.Seal(ctx, sign.TranscriptSigner{Key: key, Record: sign.RecordOptions{Digest: canon.SHA256([]byte("mcpsdk tests"))}}); err != nil {
		t.Fatal(err)
	}
	rep := verified(t, dir, key)
	if unk := rep.Find(verify.CodeOutcomeUnknown); len(unk) != 1 || !strings.Contains(unk[0].Detail, "transport failed") {
		t.Errorf("outcome_unknown %+v", unk)
	}
}
