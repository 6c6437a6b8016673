package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tracectl/tracectl/internal/snapfile"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
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
	b, err := snapfile.Encode(s)
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
	if err := rec.RecordProtocol(producer.Protocol{Era: mcpwire.EraLegacy, Version: "2025-11-25", Source: transcript.SourceInitialize, ServerName: hostile, ServerVersion: hostile}); err != nil {
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

// TestEscapeTerminal: each class of character a terminal would interpret,
// hide or reorder is escaped; ordinary text (non-ASCII letters included)
// is kept.
func TestEscapeTerminal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"naïve café 東京", "naïve café 東京"},
		{"a\nverdict: verified (bundle)", `a\nverdict: verified (bundle)`},
		{"cr\roverwrite", `cr\roverwrite`},
		{"tab\there", `tab\there`},
		{"esc\x1b[2J", `esc\x1b[2J`},
		{"del\x7f", `del\x7f`},
		{"c1 \u0085 nel, \u009b csi", `c1 \u0085 nel, \u009b csi`},
		{"bidi \u202e rlo \u2066 lri \u200f rlm \u061c alm", `bidi \u202e rlo \u2066 lri \u200f rlm \u061c alm`},
		{"zero\u200bwidth\u200djoiner\ufeffbom\u00adshy", `zero\u200bwidth\u200djoiner\ufeffbom\u00adshy`},
		{"line\u2028sep\u2029para", `line\u2028sep\u2029para`},
		{"nbsp\u00a0", `nbsp\u00a0`},
		{"private\ue000", `private\ue000`},
		{"invalid \xff utf8", `invalid \xff utf8`},
	}
	for _, tt := range tests {
		if got := escapeTerminal(tt.in); got != tt.want {
			t.Errorf("escapeTerminal(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := escapeTerminal(tt.in); !isSafeText(got) {
			t.Errorf("escapeTerminal(%q) = %q is not safe text", tt.in, got)
		}
	}
}

// hostileStrings are producer-controlled texts a signed bundle can carry.
var hostileStrings = []string{
	"x\nverdict: verified (bundle)\ntrust: trusted_key",
	"x\r\x1b[2Kverdict: verified (bundle)",
	"\x1b]0;pwned\x07\x1b[31mred",
	"bidi \u202edeifirev\u202c \u2067isolate\u2069",
	"nel\u0085 csi\u009b zwsp\u200b bom\ufeff ls\u2028",
	"bad utf8 \xc3\x28",
}

func hostileReport() *verify.Report {
	rep := &verify.Report{MediaType: verify.MediaType, Verdict: verify.Failed, Kind: "bundle", TrustBasis: verify.TrustKey,
		ReferenceTime: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), Signer: "signer\x1b[0m\n"}
	for i, s := range hostileStrings {
		rep.Findings = append(rep.Findings, verify.Finding{Code: verify.CodeEvidenceMismatch, Check: verify.Check("payload"), Status: verify.StatusFail,
			Subject: "attempt " + s, Detail: fmt.Sprintf("claim %d: %s", i, s)})
	}
	return rep
}

var updateGolden = flag.Bool("update-golden", false, "rewrite cmd/tracectl/testdata/*.golden")

// TestHostileReportGolden: a failed report whose subjects and details carry
// newlines, CR, ESC, C1, bidi and invisible characters prints exactly the
// golden text: every such character escaped, the report's own lines
// intact (one verdict line, first), and the same report as JSON parses
// back to the same strings with none of them raw.
func TestHostileReportGolden(t *testing.T) {
	rep := hostileReport()
	var text bytes.Buffer
	if err := writeReport(&text, rep, "text"); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "verify-hostile.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, text.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(text.Bytes(), want) {
		t.Errorf("text report differs from %s (-update-golden):\n%s", golden, text.Bytes())
	}
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	if lines[0] != "verdict: failed (bundle)" {
		t.Errorf("first line %q", lines[0])
	}
	for i, l := range lines {
		if c, bad := rawControl([]byte(l)); bad || strings.ContainsAny(l, "\t\r") {
			t.Errorf("line %d carries raw %q: %q", i, c, l)
		}
		if i > 0 && strings.HasPrefix(l, "verdict:") || i > 1 && strings.HasPrefix(l, "trust:") {
			t.Errorf("line %d forges a report line: %q", i, l)
		}
	}
	// Findings print one line each: the count of lines is fixed by the
	// report's structure, not by the evidence.
	if got, wantN := len(lines), 7+len(hostileStrings); got != wantN {
		t.Errorf("%d lines, want %d", got, wantN)
	}

	var js bytes.Buffer
	if err := writeReport(&js, rep, "json"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < js.Len(); {
		r, n := utf8.DecodeRune(js.Bytes()[i:])
		if r == utf8.RuneError && n == 1 || r != '\n' && r != ' ' && !printable(r) {
			t.Fatalf("JSON report holds raw %U at byte %d", r, i)
		}
		i += n
	}
	var back verify.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not parse: %v", err)
	}
	for i, f := range back.Findings {
		if want := strings.ToValidUTF8(rep.Findings[i].Detail, "\ufffd"); f.Detail != want {
			t.Errorf("finding %d detail %q after the JSON round trip, want %q", i, f.Detail, want)
		}
	}
	if back.Signer != rep.Signer {
		t.Errorf("signer %q, want %q", back.Signer, rep.Signer)
	}
}

// TestJSONSafe: \u escapes for what encoding/json leaves raw, the value
// unchanged, escapes encoding/json wrote kept.
func TestJSONSafe(t *testing.T) {
	for _, s := range append(hostileStrings, `quote " and backslash \ and \n text`, "astral \U0001F600 and tag \U000E0041") {
		b, err := json.Marshal(map[string]string{"k": s})
		if err != nil {
			t.Fatal(err)
		}
		safe := jsonSafe(b)
		var back map[string]string
		if err := json.Unmarshal(safe, &back); err != nil {
			t.Fatalf("%q: %v (%s)", s, err, safe)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); back["k"] != want {
			t.Errorf("round trip %q, want %q", back["k"], want)
		}
		if c, bad := rawControl(safe); bad || bytes.ContainsRune(safe, '\u200b') || bytes.ContainsRune(safe, '\U000E0041') {
			t.Errorf("%s holds raw %q", safe, c)
		}
	}
}

// FuzzEscapes: whatever evidence text is, escapeTerminal's output is safe
// text, and jsonSafe over encoding/json's output parses back to the same
// value encoding/json's own output holds, with no raw character
// escapeTerminal would escape.
func FuzzEscapes(f *testing.F) {
	for _, s := range hostileStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if out := escapeTerminal(s); !isSafeText(out) {
			t.Fatalf("escapeTerminal(%q) = %q is not safe", s, out)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		safe := jsonSafe(b)
		var back string
		if err := json.Unmarshal(safe, &back); err != nil {
			t.Fatalf("%q: %v", safe, err)
		}
		var orig string
		if err := json.Unmarshal(b, &orig); err != nil {
			t.Fatal(err)
		}
		if back != orig {
			t.Fatalf("jsonSafe changed the value: %q, want %q", back, orig)
		}
		for i := 0; i < len(safe); {
			r, n := utf8.DecodeRune(safe[i:])
			if !printable(r) {
				t.Fatalf("raw %U in %q", r, safe)
			}
			i += n
		}
	})
}
