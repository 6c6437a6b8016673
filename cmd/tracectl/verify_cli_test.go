package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

var updateVerifyScripts = flag.Bool("update-verify-scripts", false, "rewrite the generated bundle in testdata/script/{verify,prove}.txtar")

// TestVerifyScriptFixtures keeps the bundle embedded in the verify and
// prove scripts equal to what verifytest.Standard builds today (a change in
// the transcript or record format shows up here first). Each blob is kept
// as a file plus a 'tracectl canon' step, because txtar ends every file with
// a newline and blobs must keep their exact bytes.
func TestVerifyScriptFixtures(t *testing.T) {
	b := verifytest.Standard(t)
	fsys := b.FS()
	files := map[string][]byte{
		"key.pub":   pemOf(t, verifytest.Key(t, 1)),
		"other.pub": pemOf(t, verifytest.Key(t, 2)),
	}
	var block strings.Builder
	block.WriteString("# >>> generated\n")
	block.WriteString("env RESPONSE=" + responseOf(t, b.Lines, "a1") + "\n")
	block.WriteString("mkdir bundle/blobs/sha256\n")
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range fsys {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		data := fsys[name].Data
		hex, isBlob := strings.CutPrefix(name, transcript.BlobDir+"/")
		if !isBlob {
			files["bundle/"+name] = data
			continue
		}
		if c, err := canon.Canonicalize(data, canon.PolicyMCPDecl); err != nil || !bytes.Equal(c, data) {
			t.Fatalf("blob %s is not canonical JSON: a script cannot rebuild it (%v)", hex, err)
		}
		files["blob/"+hex] = data
		fmt.Fprintf(&block, "exec tracectl canon --policy mcp-decl blob/%s\ncp stdout bundle/blobs/sha256/%s\n", hex, hex)
	}
	block.WriteString("# <<< generated\n")

	for _, script := range []string{"verify.txtar", "prove.txtar"} {
		path := filepath.Join("testdata", "script", script)
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := txtar.Parse(old)
		start := strings.Index(string(a.Comment), "# >>> generated\n")
		end := strings.Index(string(a.Comment), "# <<< generated\n")
		if start < 0 || end < start {
			t.Fatalf("%s: no generated block", path)
		}
		a.Comment = slices.Concat(a.Comment[:start], []byte(block.String()), a.Comment[end+len("# <<< generated\n"):])
		var kept []txtar.File
		for _, f := range a.Files {
			if _, gen := files[f.Name]; !gen && !strings.HasPrefix(f.Name, "blob/") && !strings.HasPrefix(f.Name, "bundle/") {
				kept = append(kept, f)
			}
		}
		var gen []txtar.File
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for name := range files {
				if !yield(name) {
					return
				}
			}
		}) {
			gen = append(gen, txtar.File{Name: name, Data: files[name]})
		}
		a.Files = append(gen, kept...)
		updated := txtar.Format(a)
		if bytes.Equal(updated, old) {
			continue
		}
		if !*updateVerifyScripts {
			t.Errorf("%s: the generated bundle is out of date; run go test ./cmd/tracectl -run Fixtures -update-verify-scripts", path)
			continue
		}
		if err := os.WriteFile(path, updated, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func pemOf(t *testing.T, k sign.Signer) []byte {
	t.Helper()
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// responseOf returns the blob name (hex) of an attempt's response.
func responseOf(t *testing.T, lines [][]byte, attempt string) string {
	t.Helper()
	for _, l := range lines {
		ev, err := transcript.DecodeLine(l)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := ev.(*transcript.Observation); ok && o.AttemptID == attempt && o.Response != nil {
			return strings.TrimPrefix(o.Response.Digest, "sha256:")
		}
	}
	t.Fatalf("no response for %s", attempt)
	return ""
}

// TestVerifyFlags: flags become verify.Options without running a
// verification (newVerifyCmd takes the run function).
func TestVerifyFlags(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pub")
	if err := os.WriteFile(key, pemOf(t, verifytest.Key(t, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		args    []string
		want    verify.Options
		wantErr bool
	}{
		{args: []string{"--trusted-key", key, "b"}, want: verify.Options{At: now, MaxAge: 24 * time.Hour}},
		{args: []string{"--allow-embedded-key", "--at", "1782907200", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: time.Unix(1782907200, 0).UTC(), MaxAge: 24 * time.Hour}},
		{args: []string{"--allow-embedded-key", "--at", "2026-07-02T03:04:05+02:00", "--max-age", "90m", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: time.Date(2026, 7, 2, 1, 4, 5, 0, time.UTC), MaxAge: 90 * time.Minute}},
		{args: []string{"--allow-embedded-key", "--max-age", "0", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: now, AllowAnyAge: true}},
		{args: []string{"--allow-embedded-key", "--max-age", "0s", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: now, AllowAnyAge: true}},
		{args: []string{"--allow-embedded-key", "--max-age", "7d", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: now, MaxAge: 7 * 24 * time.Hour}},
		{args: []string{"--allow-embedded-key", "--max-age", "3600", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: now, MaxAge: time.Hour}},
		{args: []string{"--allow-embedded-key", "--max-age", "0d", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: now, AllowAnyAge: true}},
		{args: []string{"--allow-embedded-key", "--at", "issued", "b"}, want: verify.Options{AllowEmbeddedKey: true, AtIssued: true, MaxAge: 24 * time.Hour}},
		{args: []string{"--allow-embedded-key", "--at", "issued", "--max-age", "7d", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--max-age", "7x", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--max-age", "-1d", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--max-age", "1.5d", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--accept-profile", "urn:x", "--accept-profile", "urn:y", "b"}, want: verify.Options{AllowEmbeddedKey: true, At: now, MaxAge: 24 * time.Hour, AcceptProfiles: []string{"urn:x", "urn:y"}}},
		{args: []string{"--allow-embedded-key", "--max-transcript-bytes", "0", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--max-transcript-bytes", "100", "--max-transcript-lines", "7", "--max-payload-bytes", "9", "b"},
			want: verify.Options{AllowEmbeddedKey: true, At: now, MaxAge: 24 * time.Hour, Limits: verify.Limits{MaxTranscriptBytes: 100, MaxTranscriptLines: 7, MaxPayloadBytes: 9}}},
		{args: []string{"--allow-embedded-key", "--max-transcript-lines", "4294967296", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--max-age", "-1s", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--at", "noon", "b"}, wantErr: true},
		{args: []string{"--allow-embedded-key", "--format", "xml", "b"}, wantErr: true},
		{args: []string{"--trusted-key", filepath.Join(dir, "missing.pub"), "b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var got verify.Options
			var gotErr error
			cmd := newVerifyCmd(streams{}, func(_ context.Context, _ streams, o *verifyOptions) error {
				o.now = func() time.Time { return now }
				got, gotErr = o.options()
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if (gotErr != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", gotErr, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			wantKey := slices.Contains(tt.args, "--trusted-key")
			if (got.TrustedKey != nil) != wantKey || !got.At.Equal(tt.want.At) || got.MaxAge != tt.want.MaxAge ||
				got.AllowAnyAge != tt.want.AllowAnyAge || got.AllowEmbeddedKey != tt.want.AllowEmbeddedKey || got.FutureSkew != tt.want.FutureSkew ||
				got.AtIssued != tt.want.AtIssued || !slices.Equal(got.AcceptProfiles, tt.want.AcceptProfiles) ||
				(tt.want.Limits != verify.Limits{} && got.Limits != tt.want.Limits) {
				t.Errorf("options %+v, want %+v (trusted key %v)", got, tt.want, wantKey)
			}
		})
	}
}

// TestTextReportEscapes: every evidence string in the text report goes
// through escapeTerminal.
func TestTextReportEscapes(t *testing.T) {
	rep := &verify.Report{Verdict: verify.Failed, Kind: "bundle", Signer: "k\x1b[2J", Findings: []verify.Finding{
		{Code: verify.CodeHistoryConflict, Check: verify.Check("identity"), Status: verify.StatusFail, Subject: "attempt \x1b]0;pwned\x07", Detail: "bidi \u202e txt"},
	}, Omitted: map[verify.Code]int64{verify.CodeOutcomeUnknown: 5}}
	out := textReport(rep)
	for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("text report holds %q:\n%s", bad, out)
		}
	}
	if !strings.HasPrefix(out, "verdict: failed (bundle)\n") {
		t.Errorf("the verdict is not first:\n%s", out)
	}
	if !strings.Contains(out, "\nomitted\n  5 more outcome_unknown findings not listed\n") {
		t.Errorf("omitted findings are not counted:\n%s", out)
	}
}

// TestVerifyForgedLines: a signed bundle whose notification method (free
// producer text in the signed transcript) carries a newline, ESC, CR and a
// bidi override cannot forge report lines: through the real CLI the text
// report has one verdict line, first, and the hostile text shows escaped;
// the JSON report holds none of them raw and parses to the same method.
// (The notification's payload is removed, so its subject is reported.)
func TestVerifyForgedLines(t *testing.T) {
	const method = "notifications/x\nverdict: verified (bundle)\r\x1b[2K\u202e"
	b := verifytest.Standard(t)
	q, err := jsonString(method)
	if err != nil {
		t.Fatal(err)
	}
	b.Lines = b.Lines[:len(b.Lines)-1] // reseal after the notification
	p := b.Blob([]byte(`{"jsonrpc":"2.0","method":` + q + `}`))
	delete(b.Files, transcript.BlobPath(p.Digest))
	b.Add(&transcript.Notification{Method: method, Direction: transcript.ServerToClient, Payload: p})
	b.Seal()
	dir := t.TempDir()
	for name, f := range b.FS() {
		p := filepath.Join(dir, "b", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(dir, "key.pub")
	if err := os.WriteFile(key, pemOf(t, verifytest.Key(t, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "--trusted-key", key, "--at", verifytest.At.Format(time.RFC3339)}
	out, errOut, code := runCLI(t, append(args, filepath.Join(dir, "b"))...)
	if code != exitIncomplete {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if i > 0 && strings.Contains(l, "verdict:") && !strings.Contains(l, `\nverdict: verified (bundle)\r\x1b[2K\u202e`) {
			t.Errorf("line %d forges a verdict: %q", i, l)
		}
		if c, bad := rawControl([]byte(l)); bad || strings.ContainsAny(l, "\r\t") {
			t.Errorf("line %d carries raw %q: %q", i, c, l)
		}
	}
	if !bytes.Contains(out, []byte(`[notification notifications/x\nverdict: verified (bundle)\r\x1b[2K\u202e (seq 8)]`)) {
		t.Errorf("the hostile subject is not shown escaped:\n%s", out)
	}
	if !strings.HasPrefix(string(out), "verdict: incomplete (bundle)\n") {
		t.Errorf("the first line is not the verdict:\n%s", out)
	}
	js, _, code := runCLI(t, append(args, "--format", "json", filepath.Join(dir, "b"))...)
	if code != exitIncomplete {
		t.Fatalf("json exit %d", code)
	}
	if c, bad := rawControl(js); bad || bytes.ContainsAny(js, "\r\u202e") {
		t.Errorf("JSON report carries raw %q", c)
	}
	var rep verify.Report
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || strings.Contains(f.Subject, method)
	}
	if !found {
		t.Error("no finding subject holds the method exactly after the JSON round trip")
	}
}
