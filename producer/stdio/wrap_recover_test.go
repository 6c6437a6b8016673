//go:build unix

package stdio

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// buildTracectl builds the tracectl command with the toolchain running the
// test (as mcptest.Build does for the test servers).
func buildTracectl(t *testing.T) string {
	t.Helper()
	root, err := mcptest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	goCmd := "go" // go test puts its own GOROOT/bin first on PATH
	out := filepath.Join(t.TempDir(), "tracectl")
	cmd := exec.Command(goCmd, "build", "-o", out, "github.com/tracectl/tracectl/cmd/tracectl")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tracectl: %v\n%s", err, b)
	}
	return out
}

// TestWrapProxyKilledThenRecovered: `tracectl wrap` itself is SIGKILLed
// with a call in flight. Everything recorded before the kill stays as it
// was; `tracectl seal --recover` appends (never rewrites) an unknown
// resolution for the in-flight attempt, and the recovered bundle, signed
// with the wrap key, verifies.
func TestWrapProxyKilledThenRecovered(t *testing.T) {
	t.Parallel()
	srv := mcptest.Build(t, "sdkserver")
	tracectl := buildTracectl(t)
	dir := t.TempDir()
	keyPath, bundle := filepath.Join(dir, "key.pem"), filepath.Join(dir, "run.trace")
	priv, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WriteKeyPair(keyPath, priv, nil); err != nil {
		t.Fatal(err)
	}

	c := mcptest.NewRawClient(t, exec.Command(tracectl, "wrap", "--bundle", bundle, "--key", keyPath, "--", srv))
	recv := func(wantID string) []byte {
		t.Helper()
		l, err := c.Recv(20 * time.Second)
		if err != nil {
			t.Fatalf("recv: %v\nstderr:\n%s", err, c.Stderr())
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal(l, &m) != nil || string(m.ID) != wantID {
			t.Fatalf("got %s, want the answer to id %s", l, wantID)
		}
		return l
	}
	send := func(line string) {
		t.Helper()
		if err := c.Send(line); err != nil {
			t.Fatal(err)
		}
	}
	send(initLine)
	recv("0")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(listLine)
	recv("1")
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`)
	recv("2")
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`)
	waitJournal(t, bundle, "the slow attempt", isAttempt("slow"))
	before, err := os.ReadFile(filepath.Join(bundle, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(10 * time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("tracectl wrap exit: %v, want killed", err)
	}
	if _, err := os.Stat(filepath.Join(bundle, transcript.RecordFile)); !os.IsNotExist(err) {
		t.Fatalf("a killed wrap left a record.json (%v)", err)
	}

	// The journal has no torn line, so plain `seal` would take it too;
	// --recover is what records that the producer crashed, as it did.
	seal := exec.Command(tracectl, "seal", "--recover", "--bundle", bundle, "--key", keyPath)
	var sout, serr bytes.Buffer
	seal.Stdout, seal.Stderr = &sout, &serr
	if err := seal.Run(); err != nil {
		t.Fatalf("tracectl seal --recover: %v\n%s%s", err, sout.String(), serr.String())
	}
	for _, want := range []string{
		"; 1 attempts resolved unknown (producer_crashed): a2\n",
		"sealed " + bundle + ": 2 attempts: 1 responses, 0 transport failures, 1 unknown; ",
		"; signed\n",
	} {
		if !strings.Contains(sout.String(), want) {
			t.Errorf("tracectl seal --recover said:\n%s\nwant it to say %q", sout.String(), want)
		}
	}

	after, err := os.ReadFile(filepath.Join(bundle, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, before) {
		t.Fatal("recovery changed lines recorded before the kill")
	}
	j := readJournal(t, bundle)
	if h := j.history("a1"); j.attempt(t, "a1").Tool != "echo" || h != transcript.ObsResponse {
		t.Errorf("a1 (echo, answered before the kill): history %q", h)
	}
	if h := j.history("a2"); j.attempt(t, "a2").Tool != "slow" || h != "resolution:unknown/"+transcript.ReasonProducerCrashed {
		t.Errorf("a2 (slow, in flight at the kill): history %q", h)
	}
	if sn := j.snapshots(); len(sn) != 1 || !sn[0].Complete || j.attempt(t, "a2").Snapshot.SnapshotID != "s1" {
		t.Errorf("snapshots %+v: want one complete, bound by the in-flight attempt", sn)
	}
	var recoveries int
	for _, e := range j.events {
		if _, ok := e.(*transcript.Recovery); ok {
			recoveries++
		}
	}
	if c := j.seal(t); recoveries != 1 || !c.Recovered || c.Attempts != 2 || c.Responses != 1 || c.Unknown != 1 {
		t.Errorf("%d recovery events, seal %+v", recoveries, c)
	}
	pub, err := sign.LoadPublicKeyFile(keyPath + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	requireUnknownOnly(t, verifyBundle(t, bundle, pub), "a2")
}
