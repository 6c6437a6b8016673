package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// hostile is evidence text a malicious server controls: an ANSI escape that
// would recolour (or retitle) the terminal, a carriage return that would
// overwrite the line, and a right-to-left override.
const hostile = "evil\x1b[31mRED\x1b]0;pwned\x07\rover\u202eright"

// rawControl reports the first byte or rune of out that would be
// interpreted by a terminal rather than shown.
func rawControl(out []byte) (string, bool) {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		switch {
		case r == '\n' || r == '\t':
		case r == utf8.RuneError && n == 1:
			return "invalid UTF-8", true
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Bidi_Control, r):
			return string(r), true
		}
		i += n
	}
	return "", false
}

func runCLI(t *testing.T, args ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, strings.NewReader(""), &o, &e)
	return o.Bytes(), e.Bytes(), code
}

// snapshotWithTool writes a snapshot file whose one tool has the given
// name and description, as a server would serve them.
func snapshotWithTool(t *testing.T, path, name, desc string) {
	t.Helper()
	c, err := snapshot.NewCollector(snapshot.Options{CaptureID: "cap-terminal"})
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := jsonString(s); return b }
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":` + q(name) + `,"description":` + q(desc) + `,"inputSchema":{"type":"object"}}]}}`)
	if err := c.Add(req, resp); err != nil {
		t.Fatal(err)
	}
	s, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := snapshot.EncodeFile(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func jsonString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15]))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// TestDiffEscapesHostileDeclarations: a drifted tool whose name carries
// terminal escapes is reported, escaped, never raw.
func TestDiffEscapesHostileDeclarations(t *testing.T) {
	dir := t.TempDir()
	old, cur := filepath.Join(dir, "old.json"), filepath.Join(dir, "new.json")
	snapshotWithTool(t, old, hostile, "first")
	snapshotWithTool(t, cur, hostile, "second "+hostile)
	out, errOut, code := runCLI(t, "diff", old, cur)
	if code != exitFailed {
		t.Fatalf("diff exit %d, want %d (drifted); stderr: %s", code, exitFailed, errOut)
	}
	for name, b := range map[string][]byte{"stdout": out, "stderr": errOut} {
		if c, bad := rawControl(b); bad {
			t.Errorf("%s carries raw %q:\n%s", name, c, b)
		}
	}
	if !bytes.Contains(out, []byte(`evil\x1b[31mRED`)) {
		t.Errorf("diff output does not show the hostile tool name escaped:\n%s", out)
	}
}

// TestVerifyEscapesHostileEvidence: a signed bundle whose server reports a
// hostile name and whose client called a hostile tool under a hostile id is
// verified, and neither report format carries a raw control character;
// the text report shows the server's self-description escaped.
func TestVerifyEscapesHostileEvidence(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "b.trace")
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	signer, err := sign.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "key.pem")
	if err := sign.WriteKeyPair(keyPath, key, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := producer.Open(bundle, producer.Options{
		Clock: time.Now, Entropy: bytes.NewReader(bytes.Repeat([]byte{1}, 4096)), Durability: transcript.DurabilityNone,
		Producer: transcript.Producer{Name: "test", Version: "v0"},
		Server:   transcript.Server{Transport: transcript.TransportStdio, Name: hostile},
	})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := jsonString(hostile)
	if err := rec.RecordProtocol(producer.Protocol{Era: transcript.EraLegacy, Version: "2025-11-25", Source: transcript.SourceInitialize, ServerName: hostile, ServerVersion: hostile}); err != nil {
		t.Fatal(err)
	}
	h, err := rec.Attempt(context.Background(), producer.Call{Line: []byte(`{"jsonrpc":"2.0","id":` + q + `,"method":"tools/call","params":{"name":` + q + `,"arguments":{}}}` + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Timeout(); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Seal(context.Background(), trustRecordSigner{signer: signer, now: time.Now}); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "json"} {
		out, errOut, code := runCLI(t, "verify", "--format", format, "--trusted-key", keyPath+".pub", bundle)
		if code != exitIncomplete && code != exitOK {
			t.Fatalf("verify --format %s exit %d; stderr: %s\n%s", format, code, errOut, out)
		}
		for name, b := range map[string][]byte{"stdout": out, "stderr": errOut} {
			if c, bad := rawControl(b); bad {
				t.Errorf("verify --format %s %s carries raw %q:\n%s", format, name, c, b)
			}
		}
		if format == "text" && !bytes.Contains(out, []byte(`evil\x1b[31mRED`)) {
			t.Errorf("the text report does not show the server's reported name, escaped:\n%s", out)
		}
	}
}
