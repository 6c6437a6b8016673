//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/internal/anchor/rekor/rekortest"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/sign"
)

// rekorKit records wrap sessions anchored with --anchor rekor:URL in an
// in-memory Rekor v2 log (rekortest: rekor-tiles' own entry construction
// and checkpoint signing) served on loopback over rekor-tiles' write API.
type rekorKit struct {
	*anchorKit
	log      *rekortest.Log
	url      string
	rootFile string
}

func newRekorKit(t *testing.T) *rekorKit {
	t.Helper()
	k := &rekorKit{anchorKit: &anchorKit{lifecycleKit: newKit(t), srv: mcptest.Build(t, "sdkserver")}}
	hs := httptest.NewUnstartedServer(nil)
	k.url = "http://" + hs.Listener.Addr().String()
	host, _, err := net.SplitHostPort(hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if k.log, err = rekortest.New(k.url, host, bytes.Repeat([]byte{7}, ed25519.SeedSize)); err != nil {
		t.Fatal(err)
	}
	k.log.AddLeaf([]byte("an entry before ours"))
	hs.Config.Handler = k.log
	hs.Start()
	t.Cleanup(hs.Close)
	k.rootFile = filepath.Join(k.dir, "trusted_root.json")
	root, err := k.log.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.rootFile, root, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRekorAnchoredSession: a wrap session sealed with --anchor rekor:URL
// keeps the anchored record and its Rekor entry, record.json names the
// entry, and verify --rekor-root checks it offline (anchor_included);
// without --rekor-root the entry is reported unchecked; under another
// log's trusted root it fails.
func TestRekorAnchoredSession(t *testing.T) {
	k := newRekorKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	stderr := k.session(t, bundle, 3, "--anchor", rekor.Scheme+k.url)
	if !strings.Contains(stderr, "tracectl: anchored anchors/record.json: Rekor entry 1 of 2") {
		t.Fatalf("wrap stderr:\n%s", stderr)
	}
	for _, f := range []string{"anchors/record.json", "anchors/rekor/record.json"} {
		if !fileExists(filepath.Join(bundle, f)) {
			t.Fatalf("%s missing", f)
		}
	}
	rb, err := os.ReadFile(filepath.Join(bundle, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sign.ParseRecord(rb)
	if err != nil {
		t.Fatal(err)
	}
	if want := k.url + "/entries/1"; rec.Transparency != want {
		t.Fatalf("transparency %q, want %q", rec.Transparency, want)
	}
	code, out := k.verify(t, "--rekor-root", k.rootFile, bundle)
	if code != 0 || !strings.Contains(out, "pass anchor_included [anchors/rekor/record.json]") || !strings.Contains(out, "Rekor entry 1 of "+k.url) {
		t.Fatalf("verify --rekor-root: exit %d\n%s", code, out)
	}
	code, out = k.verify(t, bundle)
	if code != 0 || !strings.Contains(out, "anchor_unchecked [anchors/rekor]") || !strings.Contains(out, "--rekor-root") {
		t.Fatalf("verify without --rekor-root: exit %d\n%s", code, out)
	}
	// JSON names the code and file, as every finding does.
	jout, err := exec.Command(k.bin, "verify", "--trusted-key", k.key+".pub", "--rekor-root", k.rootFile, "--format", "json", bundle).Output()
	if err != nil {
		t.Fatalf("verify --format json: %v\n%s", err, jout)
	}
	var rep struct {
		Findings []struct{ Code, Subject string }
	}
	if err := json.Unmarshal(jout, &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.Code == "anchor_included" && f.Subject == "anchors/rekor/record.json"
	}
	if !found {
		t.Fatalf("no anchor_included at anchors/rekor/record.json in %s", jout)
	}

	// Another log's trusted root: the entry's log is not trusted.
	other, err := rekortest.New(k.url, k.log.Origin, bytes.Repeat([]byte{8}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	otherRoot, err := other.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(k.dir, "other_root.json")
	if err := os.WriteFile(otherFile, otherRoot, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = k.verify(t, "--rekor-root", otherFile, bundle)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [anchors/rekor/record.json]") || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("verify under another log's root: exit %d\n%s", code, out)
	}
}

// TestRekorRewriteDetected: a session cut and sealed again with the
// producer's own key after its record was in Rekor verifies without
// --rekor-root and fails with it (record.json is not the anchored
// record); an entry edited on disk fails too.
func TestRekorRewriteDetected(t *testing.T) {
	k := newRekorKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	k.session(t, bundle, 4, "--anchor", rekor.Scheme+k.url)
	entryFile := filepath.Join(bundle, "anchors", "rekor", "record.json")
	orig, err := os.ReadFile(entryFile)
	if err != nil {
		t.Fatal(err)
	}
	// The entry's log index moved: its inclusion proof no longer holds.
	e, err := rekor.ParseEntry(orig)
	if err != nil || e.LogIndex != 1 {
		t.Fatalf("entry %v: %v", e, err)
	}
	e.LogIndex = 0
	tampered, err := rekor.MarshalEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entryFile, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := k.verify(t, "--rekor-root", k.rootFile, bundle)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [anchors/rekor/record.json]") {
		t.Fatalf("tampered entry: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(entryFile, orig, 0o600); err != nil {
		t.Fatal(err)
	}

	k.rewrite(t, bundle)
	if code, out := k.verify(t, bundle); code != 0 {
		t.Fatalf("the rewritten bundle should verify without Rekor (it is re-signed): exit %d\n%s", code, out)
	}
	code, out = k.verify(t, "--rekor-root", k.rootFile, bundle)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [record.json]") || !strings.Contains(out, "rewritten after anchoring") {
		t.Fatalf("rewritten: exit %d\n%s", code, out)
	}
	if err := os.RemoveAll(filepath.Join(bundle, "anchors")); err != nil {
		t.Fatal(err)
	}
	code, out = k.verify(t, "--rekor-root", k.rootFile, bundle)
	if code != exitIncomplete || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("without anchors/: exit %d\n%s", code, out)
	}
}

// TestRekorUnreachable: a Rekor log that refuses connections leaves the
// session sealed and signed, its record unanchored and the failure on
// stderr; verify --rekor-root says anchor_missing.
func TestRekorUnreachable(t *testing.T) {
	k := &anchorKit{lifecycleKit: newKit(t), srv: mcptest.Build(t, "sdkserver")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	bundle := filepath.Join(k.dir, "run.trace")
	stderr := k.session(t, bundle, 2, "--anchor", rekor.Scheme+dead)
	if !strings.Contains(stderr, "tracectl: anchor failed: record: rekor "+dead) {
		t.Fatalf("wrap stderr:\n%s", stderr)
	}
	if fileExists(filepath.Join(bundle, "anchors", "rekor")) {
		t.Fatal("anchors/rekor/ written without an entry")
	}
	if code, out := k.verify(t, bundle); code != 0 {
		t.Fatalf("the unanchored bundle is signed and sealed: exit %d\n%s", code, out)
	}
	root, err := rekortest.TrustedRoot(dead, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public(), []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(k.dir, "root.json")
	if err := os.WriteFile(rootFile, root, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := k.verify(t, "--rekor-root", rootFile, bundle)
	if code != exitIncomplete || !strings.Contains(out, "unavailable anchor_missing [record.json]") || !strings.Contains(out, "no valid Rekor entry") {
		t.Fatalf("verify --rekor-root: exit %d\n%s", code, out)
	}
}

// TestRekorUsage: --anchor rekor:URL refuses --anchor-key, a URL that is
// not http(s), no key, and a signer process (which signs only Trust
// Records, not a digest), each before anything is recorded.
func TestRekorUsage(t *testing.T) {
	k := newKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--key", k.key, "--anchor", "rekor:http://127.0.0.1:1", "--anchor-key", k.key + ".pub"}, "--anchor-key with --anchor rekor:URL"},
		{[]string{"--key", k.key, "--anchor", "rekor:ftp://x"}, "want http(s)://HOST[:PORT]"},
		{[]string{"--anchor", "rekor:http://127.0.0.1:1"}, "--anchor needs --key or --signer"},
	} {
		out, err := exec.Command(k.bin, append(append([]string{"wrap", "--bundle", bundle}, tc.args...), "--", "true")...).CombinedOutput()
		if procExit(err) != exitUsage || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tc.args, procExit(err), exitUsage, tc.want, out)
		}
		if fileExists(bundle) {
			t.Fatalf("%v: a bundle was created", tc.args)
		}
	}
}

// recordOnlySigner is a signer that signs Trust Records only, as a KMS
// key does: no SignDigest, no SignRekorDigest.
type recordOnlySigner struct{ sign.Signer }

// TestRekorCheckSigner: --anchor rekor:URL takes a key that signs a digest
// (--key FILE) and refuses one that signs only records, with a usage error
// naming --key; without rekor: anything goes.
func TestRekorCheckSigner(t *testing.T) {
	s, err := sign.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	a := anchorOptions{url: "rekor:http://127.0.0.1:1"}
	if err := a.checkSigner(s); err != nil {
		t.Fatalf("a file key: %v", err)
	}
	err = a.checkSigner(recordOnlySigner{s})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "needs --key FILE or --signer unix:PATH") {
		t.Fatalf("a record-only signer: %v", err)
	}
	if err := (&anchorOptions{url: "http://127.0.0.1:1"}).checkSigner(recordOnlySigner{s}); err != nil {
		t.Fatalf("a tracectl log takes any signer: %v", err)
	}
}

// TestRekorSealRecover: a wrap killed before its seal, then sealed with
// seal --recover --anchor rekor:URL: the record is anchored in Rekor as
// wrap's seal would have, and the bundle verifies under --rekor-root.
func TestRekorSealRecover(t *testing.T) {
	k := newRekorKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--checkpoint-every", "2", "--", k.srv)
	listAndCall(t, w, bufio.NewReader(outR), 2)
	w.stderr.waitFor(t, "2 attempts signed")
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	w.wait(t)
	outW.Close()
	out, err := exec.Command(k.bin, "seal", "--bundle", bundle, "--key", k.key, "--recover", "--anchor", rekor.Scheme+k.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "anchored anchors/record.json: Rekor entry 1 of 2") {
		t.Fatalf("seal --recover --anchor rekor: %v\n%s", err, out)
	}
	code, rep := k.verify(t, "--rekor-root", k.rootFile, bundle)
	if code != 0 || !strings.Contains(rep, "pass anchor_included [anchors/rekor/record.json]") {
		t.Fatalf("verify: exit %d\n%s", code, rep)
	}
}

// TestRekorProxy: tracectl proxy --anchor rekor:URL in front of a Go SDK
// Streamable HTTP server: the session's sealed record is in Rekor and the
// bundle verifies under --rekor-root.
func TestRekorProxy(t *testing.T) {
	k := newRekorKit(t)
	url, _ := cliServer(t)
	b, p := proxiedSession(t, k.lifecycleKit, url, "--anchor", rekor.Scheme+k.url)
	code, out := k.verify(t, "--rekor-root", k.rootFile, b)
	if code != 0 || !strings.Contains(out, "pass anchor_included [anchors/rekor/record.json]") {
		t.Fatalf("verify: exit %d\n%s\nproxy:\n%s", code, out, strings.Join(p.log, "\n"))
	}
}

// TestRekorThroughSigner: a session signing through tracectl signer serve
// (--signer unix:PATH, no key in the recorder) anchored with --anchor
// rekor:URL: the signer signs the anchored record's digest (kind rekor,
// journaled) and the bundle verifies under --rekor-root.
func TestRekorThroughSigner(t *testing.T) {
	k := newRekorKit(t)
	sock := filepath.Join(k.dir, "run", "signer.sock")
	if err := os.Mkdir(filepath.Dir(sock), 0o750); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(k.dir, "signer.journal")
	k.startSigner(t, k.bin, sock, "--journal", journal)
	k.signer = sock
	bundle := filepath.Join(k.dir, "run.trace")
	stderr := k.session(t, bundle, 3, "--anchor", rekor.Scheme+k.url)
	if !strings.Contains(stderr, "tracectl: anchored anchors/record.json: Rekor entry 1 of 2") || strings.Contains(stderr, "failed") {
		t.Fatalf("wrap stderr:\n%s", stderr)
	}
	code, out := k.verify(t, "--rekor-root", k.rootFile, bundle)
	if code != 0 || !strings.Contains(out, "pass anchor_included [anchors/rekor/record.json]") {
		t.Fatalf("verify --rekor-root: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(journal)
	if n := strings.Count(string(data), `"kind":"rekor"`); n != 1 || strings.Count(string(data), `"kind":"record"`) != 2 {
		t.Fatalf("journal: %d rekor lines, want 1 (and 2 records):\n%s", n, data)
	}
}

// TestRekorEntrySwapped: another session's Rekor entry copied into a
// bundle (a valid entry of the trusted log, for a different record) fails:
// it anchors a different record, and the bundle's own record is missing.
func TestRekorEntrySwapped(t *testing.T) {
	k := newRekorKit(t)
	a, b := filepath.Join(k.dir, "a.trace"), filepath.Join(k.dir, "b.trace")
	k.session(t, a, 1, "--anchor", rekor.Scheme+k.url)
	k.session(t, b, 2, "--anchor", rekor.Scheme+k.url)
	entryA, err := os.ReadFile(filepath.Join(a, "anchors", "rekor", "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "anchors", "rekor", "record.json"), entryA, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := k.verify(t, "--rekor-root", k.rootFile, b)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [anchors/rekor/record.json]") || !strings.Contains(out, "anchors a different record") ||
		!strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("swapped entry: exit %d\n%s", code, out)
	}
	// A name in anchors/rekor/ that is not the record's entry is refused.
	if err := os.WriteFile(filepath.Join(a, "anchors", "rekor", "extra.json"), entryA, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = k.verify(t, "--rekor-root", k.rootFile, a)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [anchors/rekor/extra.json]") || !strings.Contains(out, "pass anchor_included [anchors/rekor/record.json]") {
		t.Fatalf("extra file: exit %d\n%s", code, out)
	}
}

// TestRekorDisclosure: a disclosure (tracectl disclose) of a session cut
// and sealed again, its Rekor entry dropped, is not verified under
// --rekor-root: the disclosed record needs its Rekor entry as a bundle's
// does; a disclosure of the anchored session, which keeps the anchored
// record and its entry, verifies with anchor_included.
func TestRekorDisclosure(t *testing.T) {
	k := newRekorKit(t)
	disclose := func(bundle, out string) { discloseFirst(t, k.bin, bundle, out) }
	bundle := filepath.Join(k.dir, "run.trace")
	k.session(t, bundle, 3, "--anchor", rekor.Scheme+k.url)
	honest := filepath.Join(k.dir, "honest.disclosed")
	disclose(bundle, honest)

	k.rewrite(t, bundle)
	if err := os.RemoveAll(filepath.Join(bundle, "anchors")); err != nil {
		t.Fatal(err)
	}
	rewritten := filepath.Join(k.dir, "rewritten.disclosed")
	disclose(bundle, rewritten)
	code, out := k.verify(t, "--rekor-root", k.rootFile, rewritten)
	if code == 0 || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("disclosure of a rewritten session without its Rekor entry: exit %d\n%s", code, out)
	}
	if code, out := k.verify(t, "--rekor-root", k.rootFile, honest); code != 0 || !strings.Contains(out, "pass anchor_included [anchors/rekor/record.json]") {
		t.Fatalf("disclosure of the anchored session: exit %d\n%s", code, out)
	}
}
