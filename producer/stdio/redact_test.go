package stdio

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/verify"
)

// TestWrapRedactsWithoutChangingTraffic: a client sends credentials in a
// tools/call's arguments and _meta, and the server echoes them back in its
// result. The server executes the call with the exact arguments, the
// client receives the server's bytes exactly (the server's line log hashes
// what it wrote), and no file of the bundle holds a credential: redaction
// changes what is retained, never what is forwarded. The bundle verifies.
func TestWrapRedactsWithoutChangingTraffic(t *testing.T) {
	dir := t.TempDir()
	callLog, lineLog := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "lines.jsonl")
	w := startWrap(t, wrapOpts{}, mcptest.Build(t, "jsonserver"), "-call-log", callLog, "-line-log", lineLog)
	c := w.raw()
	c.gateHandshake(gatePeer{})
	c.gateList()
	gh := "ghp_" + strings.Repeat("aB3dE6gH9j", 3) + "kLmNoP"
	aws := "AKIAIOSFODNN7EXAMPLE"
	line := `{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"echo","arguments":{"message":"use ` + gh + `","password":"hunter2"},"_meta":{"authorization":"Bearer ` + aws + `"}}}` + "\n"
	c.send(line)
	resp := c.waitID(`"s1"`)
	if resp.Error != nil || !bytes.Contains(resp.raw, []byte(gh)) {
		t.Fatalf("the echo did not carry the token back: %s", resp.raw)
	}
	w.end()
	w.seal()

	// The server executed the exact arguments.
	executed := strings.Join(readCallLog(t, callLog), "\n")
	if !strings.Contains(executed, gh) || !strings.Contains(executed, "hunter2") {
		t.Errorf("the server did not get the exact arguments: %.200s", executed)
	}
	// The client got exactly what the server wrote.
	sum := sha256.Sum256(bytes.TrimRight(resp.raw, "\r\n"))
	found := false
	for _, e := range readLineLog(t, lineLog) {
		found = found || e.SHA256 == "sha256:"+hex.EncodeToString(sum[:])
	}
	if !found {
		t.Errorf("the response the client got is not a line the server wrote")
	}
	// Nothing of the credentials in the bundle.
	err := filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range []string{gh, aws, "hunter2"} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds %.12s... in clear", filepath.Base(p), s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := verifyBundle(t, w.dir, w.signer.Public())
	requireVerified(t, rep)
	if !rep.Has(verify.CodePayloadRedacted) {
		t.Errorf("no payload_redacted finding")
	}
}
