//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/transparency-dev/tessera/client"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/submit"
	"github.com/tracectl/tracectl/internal/audit"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/internal/tlog"
	"github.com/tracectl/tracectl/internal/witness"
	"golang.org/x/mod/sumdb/note"
)

// anchorKit is a kit with a running tracectl log serve (a real Tessera
// log on loopback) and the Go SDK server to record.
type anchorKit struct {
	*lifecycleKit
	srv, logDir, logURL, logPub string
	log                         *wrapRun
	signer                      string // when set, sessions sign through the signer at this socket, not --key
}

func newAnchorKit(t *testing.T) *anchorKit {
	t.Helper()
	k := &anchorKit{lifecycleKit: newKit(t), srv: mcptest.Build(t, "sdkserver")}
	k.logDir = filepath.Join(k.dir, "log")
	k.logPub = filepath.Join(k.logDir, "log.pub")
	k.log = k.startArgs(t, io.Discard, "log", "serve", "--dir", k.logDir, "--listen", "127.0.0.1:0", "--origin", "test.tracectl/log")
	k.log.stderr.waitFor(t, "serving http://")
	m := regexp.MustCompile(`serving (http://[^ ]+)`).FindStringSubmatch(k.log.stderr.String())
	if m == nil {
		t.Fatalf("log serve: %s", k.log.stderr)
	}
	k.logURL = m[1]
	return k
}

// listAndCall drives a wrap session over stdio in the modern era: a
// tools/list (id 0), then calls echo calls (ids 1..calls), each answered
// under its own id before the next is sent.
func listAndCall(t *testing.T, w *wrapRun, responses *bufio.Reader, calls int) {
	t.Helper()
	for id := 0; id <= calls; id++ {
		req := modernCall(id, "echo", fmt.Sprintf(`{"n":%d}`, id))
		if id == 0 {
			req = `{"jsonrpc":"2.0","id":0,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"
		}
		if _, err := io.WriteString(w.in, req); err != nil {
			t.Fatal(err)
		}
		line, err := responses.ReadString('\n')
		if err != nil || !strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) {
			t.Fatalf("call %d: %q, %v\n%s", id, line, err, w.stderr)
		}
	}
}

// session records one wrap session in front of the SDK server: tools/list
// and calls echo calls, then the client closes; wrap must exit 0.
func (k *anchorKit) session(t *testing.T, bundle string, calls int, extra ...string) string {
	t.Helper()
	outR, outW := io.Pipe()
	signWith := []string{"--key", k.key}
	if k.signer != "" {
		signWith = []string{"--signer", "unix:" + k.signer}
	}
	args := append(append([]string{"wrap", "--bundle", bundle}, signWith...), "--checkpoint-every", "2")
	args = append(args, extra...)
	args = append(args, "--", k.srv)
	w := k.startArgs(t, outW, args...)
	listAndCall(t, w, bufio.NewReader(outR), calls)
	w.in.Close()
	if code := w.wait(t); code != 0 {
		t.Fatalf("wrap exit %d\n%s", code, w.stderr)
	}
	outW.Close()
	return w.stderr.String()
}

func (k *anchorKit) anchoredSession(t *testing.T, bundle string, calls int) string {
	t.Helper()
	return k.session(t, bundle, calls, "--anchor", k.logURL, "--anchor-key", k.logPub)
}

// verify runs tracectl verify and returns its exit status and report.
func (k *anchorKit) verify(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(k.bin, append([]string{"verify", "--trusted-key", k.key + ".pub"}, args...)...).CombinedOutput()
	return procExit(err), squeeze(string(out))
}

// TestAnchoredSessions: three sessions anchored in a real Tessera log
// (tracectl log serve) each verify with --log-key, every signed statement
// (the first checkpoint over the header, every --checkpoint-every
// checkpoint, the sealed record) anchor_included; record.json names its log
// entry, which the log serves; without --log-key the receipts are reported
// present and unchecked.
func TestAnchoredSessions(t *testing.T) {
	k := newAnchorKit(t)
	for i := 1; i <= 3; i++ {
		bundle := filepath.Join(k.dir, fmt.Sprintf("run%d.trace", i))
		stderr := k.anchoredSession(t, bundle, 3)
		if !strings.Contains(stderr, "tracectl: anchored anchors/record.json: log entry") || strings.Contains(stderr, "anchor failed") {
			t.Fatalf("session %d stderr:\n%s", i, stderr)
		}
		ckpts, _ := filepath.Glob(filepath.Join(bundle, "checkpoints", "*.json"))
		// The header alone (1.json), then after attempts 2 (and 3 at seal is
		// the record): at least two checkpoints.
		if len(ckpts) < 2 || !fileExists(filepath.Join(bundle, "checkpoints", "1.json")) {
			t.Fatalf("checkpoints %v", ckpts)
		}
		code, out := k.verify(t, "--log-key", k.logPub, bundle)
		if code != 0 || !strings.HasPrefix(out, "verdict: verified") {
			t.Fatalf("verify --log-key: exit %d\n%s", code, out)
		}
		if got, want := strings.Count(out, "pass anchor_included"), len(ckpts)+1; got != want {
			t.Errorf("session %d: %d anchor_included, want %d (checkpoints and record)\n%s", i, got, want, out)
		}
		code, out = k.verify(t, bundle)
		if code != 0 || !strings.Contains(out, "info anchor_unchecked") {
			t.Errorf("verify without --log-key: exit %d\n%s", code, out)
		}
		rec, err := os.ReadFile(filepath.Join(bundle, "record.json"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`"transparency":"([^"]+)"`).FindSubmatch(rec)
		if m == nil || !strings.HasPrefix(string(m[1]), k.logURL+"/entries/") {
			t.Fatalf("record.json transparency: %s", rec)
		}
		if !bytes.Contains(rec, []byte(`"transcript_uri":"urn:uuid:`)) {
			t.Errorf("record.json names no session: %s", rec)
		}
		// The URI resolves to the anchored record's leaf.
		res, err := http.Get(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		entry, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if anchored, _ := os.ReadFile(filepath.Join(bundle, "anchors", "record.json")); res.StatusCode != 200 || !bytes.Contains(entry, []byte(`"transcript_uri":"urn:uuid:`)) || !bytes.Contains(anchored, entry[bytes.Index(entry, []byte(`"signature"`)):bytes.LastIndexByte(entry, '"')]) {
			t.Errorf("GET %s: %d %s", m[1], res.StatusCode, entry)
		}
		if dst := os.Getenv("TRACECTL_UPDATE_ANCHOR_FIXTURE"); dst != "" && i == 3 {
			writeAnchorFixture(t, bundle, k.logPub, dst)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// rewrite removes the bundle's last attempt the way a host holding the
// producer key could: the transcript is cut before the last attempt line,
// checkpoints past the cut and record.json are deleted, and the bundle is
// sealed and signed again with the producer's own key.
func (k *anchorKit) rewrite(t *testing.T, bundle string) {
	t.Helper()
	tp := filepath.Join(bundle, "transcript.jsonl")
	data, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	cut := -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"attempt"`) {
			cut = i
		}
	}
	if cut < 0 {
		t.Fatal("no attempt to remove")
	}
	if err := os.WriteFile(tp, []byte(strings.Join(lines[:cut], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	ckpts, _ := filepath.Glob(filepath.Join(bundle, "checkpoints", "*.json"))
	for _, c := range ckpts {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(c), "%d.json", &n); err == nil && n > cut {
			os.Remove(c)
		}
	}
	os.Remove(filepath.Join(bundle, "record.json"))
	if out, err := exec.Command(k.bin, "seal", "--bundle", bundle, "--key", k.key).CombinedOutput(); err != nil {
		t.Fatalf("re-seal: %v\n%s", err, out)
	}
}

// TestAnchoredRewriteDetected: a session whose last attempt is removed and
// which is sealed again with the producer's own key verifies without
// --log-key (the threat), and is not verified with it: failed with its
// anchors/ (anchor_invalid: record.json is not the anchored record, and
// the dropped checkpoint's receipt names a statement that is gone), and
// incomplete without them (anchor_missing).
func TestAnchoredRewriteDetected(t *testing.T) {
	k := newAnchorKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	k.anchoredSession(t, bundle, 4)
	k.rewrite(t, bundle)
	if code, out := k.verify(t, bundle); code != 0 {
		t.Fatalf("the rewritten bundle should verify without the log (it is re-signed): exit %d\n%s", code, out)
	}
	code, out := k.verify(t, "--log-key", k.logPub, bundle)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [record.json]") || !strings.Contains(out, "rewritten after anchoring") {
		t.Fatalf("with anchors/: exit %d\n%s", code, out)
	}
	if err := os.RemoveAll(filepath.Join(bundle, "anchors")); err != nil {
		t.Fatal(err)
	}
	code, out = k.verify(t, "--log-key", k.logPub, bundle)
	if code != exitIncomplete || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("without anchors/: exit %d\n%s", code, out)
	}
	// Unchanged by --log-key's absence: the rewrite is only visible against the log.
	if code, _ := k.verify(t, bundle); code != 0 {
		t.Fatalf("without anchors/ and --log-key: exit %d", code)
	}
}

// audit runs tracectl audit and returns its exit status and output.
func (k *anchorKit) audit(t *testing.T, logArg, state string, bundles ...string) (int, string) {
	t.Helper()
	args := append([]string{"audit", "--log", logArg, "--log-key", k.logPub, "--trusted-key", k.key + ".pub", "--state", state}, bundles...)
	out, err := exec.Command(k.bin, args...).CombinedOutput()
	return procExit(err), string(out)
}

// auditJSON runs tracectl audit --format json and decodes its stdout,
// which must be one JSON object on one line.
func (k *anchorKit) auditJSON(t *testing.T, logArg, state string, bundles ...string) (int, auditResult) {
	t.Helper()
	args := append([]string{"audit", "--format", "json", "--log", logArg, "--log-key", k.logPub, "--trusted-key", k.key + ".pub", "--state", state}, bundles...)
	out, err := exec.Command(k.bin, args...).Output()
	var res auditResult
	if n := bytes.Count(out, []byte("\n")); n != 1 || !bytes.HasSuffix(out, []byte("\n")) {
		t.Fatalf("audit --format json: %d lines:\n%s", n, out)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("audit --format json: %v\n%s", err, out)
	}
	return procExit(err), res
}

// TestAuditFleet: three anchored sessions audit clean against the log
// served over HTTP and against its directory read offline; a deleted
// bundle is missing, a rewritten one truncated (the log's record covers a
// call the bundle's does not). --format json reports the same, with the
// same exit status.
func TestAuditFleet(t *testing.T) {
	k := newAnchorKit(t)
	fleet := filepath.Join(k.dir, "fleet")
	if err := os.Mkdir(fleet, 0o700); err != nil {
		t.Fatal(err)
	}
	var bundles []string
	for i := 1; i <= 3; i++ {
		b := filepath.Join(fleet, fmt.Sprintf("run%d.trace", i))
		k.anchoredSession(t, b, 3)
		bundles = append(bundles, b)
	}
	state := filepath.Join(k.dir, "audit-state.json")
	code, out := k.audit(t, k.logURL, state, fleet)
	if code != 0 || !strings.Contains(out, "3 sessions, 3 bundles: 0 findings") {
		t.Fatalf("clean fleet: exit %d\n%s", code, out)
	}
	if code, out := k.audit(t, k.logDir, state, fleet); code != 0 {
		t.Fatalf("offline mirror: exit %d\n%s", code, out)
	}
	code, res := k.auditJSON(t, k.logDir, state, fleet)
	if want := (auditResult{MediaType: auditMediaType, Log: "test.tracectl/log", Size: res.Size, Trusted: res.Trusted, Sessions: 3, Bundles: 3, Findings: []audit.Finding{}}); code != 0 || !reflect.DeepEqual(res, want) || res.Trusted < 3 || res.Size != res.Trusted {
		t.Fatalf("clean fleet, --format json: exit %d\n got %+v\nwant %+v", code, res, want)
	}
	hdr, err := os.ReadFile(filepath.Join(bundles[0], "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	scope := regexp.MustCompile(`"execution_scope":"([^"]+)"`).FindSubmatch(hdr)[1]
	if err := os.RemoveAll(bundles[0]); err != nil {
		t.Fatal(err)
	}
	k.rewrite(t, bundles[1])
	os.RemoveAll(filepath.Join(bundles[1], "anchors"))
	code, out = k.audit(t, k.logURL, state, fleet)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, out)
	}
	for _, want := range []string{"missing urn:uuid:" + string(scope) + ":", "truncated " + bundles[1] + ": log entry", "2 bundles: "} {
		if !strings.Contains(out, want) {
			t.Errorf("audit output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, bundles[2]) {
		t.Errorf("the untouched bundle has a finding:\n%s", out)
	}
	code, res = k.auditJSON(t, k.logURL, state, fleet)
	var codes []string
	for _, f := range res.Findings {
		codes = append(codes, f.Code)
	}
	sort.Strings(codes)
	if code != exitFailed || res.Bundles != 2 || !reflect.DeepEqual(codes, []string{"missing", "truncated"}) {
		t.Errorf("--format json: exit %d, %+v", code, res)
	}
}

// TestAnchorForkCaught: a second log under the same key with another
// history (a log that forked) is caught by audit, which remembers the
// checkpoint it saw of the first (log_forked), and by verify, when a
// bundle's receipts come from both histories (anchor_fork).
func TestAnchorForkCaught(t *testing.T) {
	k := newAnchorKit(t)
	forkDir := filepath.Join(k.dir, "fork")
	if err := os.Mkdir(forkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"log.key", "log.pub"} {
		b, err := os.ReadFile(filepath.Join(k.logDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(forkDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fork := k.startArgs(t, io.Discard, "log", "serve", "--dir", forkDir, "--listen", "127.0.0.1:0")
	fork.stderr.waitFor(t, "serving http://")
	forkURL := regexp.MustCompile(`serving (http://[^ ]+)`).FindStringSubmatch(fork.stderr.String())[1]

	first := filepath.Join(k.dir, "first.trace")
	k.anchoredSession(t, first, 3)
	state := filepath.Join(k.dir, "audit-state.json")
	if code, out := k.audit(t, k.logURL, state, first); code != 0 {
		t.Fatalf("first audit: exit %d\n%s", code, out)
	}
	for i := range 2 {
		k.session(t, filepath.Join(k.dir, fmt.Sprintf("forked%d.trace", i)), 3, "--anchor", forkURL, "--anchor-key", k.logPub)
	}
	code, out := k.audit(t, forkURL, state, first)
	if code != exitFailed || !strings.Contains(out, "log_forked checkpoint: the tree of") {
		t.Fatalf("audit of the fork: exit %d\n%s", code, out)
	}
	// The fork's checkpoint is not remembered: the next audit of the
	// first log is clean.
	if code, out := k.audit(t, k.logURL, state, first); code != 0 {
		t.Fatalf("audit after the fork: exit %d\n%s", code, out)
	}

	// The record's receipt replaced by one from the fork (same key, the
	// fork's history): its consistency with the earlier receipts fails.
	ents, _ := filepath.Glob(filepath.Join(first, "anchors", "[0-9]*.json"))
	last := filepath.Join(first, "anchors", fmt.Sprintf("%d.json", len(ents)))
	prevB, err := os.ReadFile(filepath.Join(first, "anchors", fmt.Sprintf("%d.json", len(ents)-1)))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := anchor.ParseReceipt(prevB)
	if err != nil {
		t.Fatal(err)
	}
	logKey, _ := os.ReadFile(k.logPub)
	keys, err := anchor.ParseKeys(string(logKey), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := os.ReadFile(filepath.Join(first, "anchors", "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := &submit.Client{URL: forkURL, Keys: keys}
	ctx := t.Context()
	r, ck, err := c.Anchor(ctx, anchor.RecordFile, stmt, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(forkURL + "/")
	f, _ := client.NewHTTPFetcher(u, nil)
	pb, _ := client.NewProofBuilder(ctx, ck.Size, f.ReadTile)
	cons, err := pb.ConsistencyProof(ctx, prev.LeafCount, ck.Size)
	if err != nil {
		t.Fatal(err)
	}
	r.Consistency = &anchor.Consistency{FromSize: prev.LeafCount, Proof: anchor.EncodeHashes(cons)}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(last, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, vout := k.verify(t, "--log-key", k.logPub, first)
	if code != exitFailed || !strings.Contains(vout, "fail anchor_fork [anchors/") {
		t.Fatalf("verify with a receipt from the fork: exit %d\n%s", code, vout)
	}
}

// writeAnchorFixture keeps an anchored bundle's signed statements and
// receipts, and the log key, for the independent verifier
// (internal/vectors/independent/testdata/anchored):
//
//	TRACECTL_UPDATE_ANCHOR_FIXTURE=$PWD/internal/vectors/independent/testdata/anchored \
//	  go test ./cmd/tracectl -run TestAnchoredSessions
func writeAnchorFixture(t *testing.T, bundle, logPub, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(bundle, "checkpoints", "*.json"))
	more, _ := filepath.Glob(filepath.Join(bundle, "anchors", "*.json"))
	files = append(append(files, more...), filepath.Join(bundle, "record.json"))
	for _, f := range append(files, logPub) {
		rel, _ := filepath.Rel(bundle, f)
		if f == logPub {
			rel = "log.pub"
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWitnessedAnchors: a log that must get a witness's cosignature (C2SP
// tlog-witness; the witness checks each checkpoint's consistency with the
// last it cosigned) before publishing: receipts carry the cosignature and
// verify with --witness-key and a threshold of 1, not with a threshold of
// 2 (a second witness never cosigned); a fork of the log under the same
// key, growing past what the witness cosigned, is refused by the witness
// and never published.
func TestWitnessedAnchors(t *testing.T) {
	base := newKit(t)
	k := &anchorKit{lifecycleKit: base, srv: mcptest.Build(t, "sdkserver")}
	k.logDir = filepath.Join(k.dir, "log")
	k.logPub = filepath.Join(k.logDir, "log.pub")
	if _, _, err := tlog.LoadOrCreateKey(k.logDir, "test.tracectl/witnessed"); err != nil {
		t.Fatal(err)
	}
	logKey, err := os.ReadFile(k.logPub)
	if err != nil {
		t.Fatal(err)
	}
	var wpubs []string
	var w *witness.Witness
	for i := 1; i <= 2; i++ {
		skey, vkey, err := note.GenerateKey(rand.Reader, fmt.Sprintf("witness.test/w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(k.dir, fmt.Sprintf("w%d.pub", i))
		if err := os.WriteFile(p, []byte(vkey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wpubs = append(wpubs, p)
		if i == 1 {
			if w, err = witness.New(skey, string(logKey)); err != nil {
				t.Fatal(err)
			}
		}
	}
	refused := make(chan error, 16)
	w.Refused = func(_ string, err error) {
		select {
		case refused <- err:
		default:
		}
	}
	ws := httptest.NewServer(w)
	defer ws.Close()
	k.log = k.startArgs(t, io.Discard, "log", "serve", "--dir", k.logDir, "--listen", "127.0.0.1:0", "--witness", ws.URL, "--witness-key", wpubs[0])
	k.log.stderr.waitFor(t, "serving http://")
	k.logURL = regexp.MustCompile(`serving (http://[^ ]+)`).FindStringSubmatch(k.log.stderr.String())[1]

	bundle := filepath.Join(k.dir, "run.trace")
	if stderr := k.anchoredSession(t, bundle, 2); strings.Contains(stderr, "anchor failed") {
		t.Fatalf("wrap:\n%s", stderr)
	}
	code, out := k.verify(t, "--log-key", k.logPub, "--witness-key", wpubs[0], "--witness-threshold", "1", bundle)
	if code != 0 || !strings.Contains(out, "1 witness cosignatures") {
		t.Fatalf("threshold 1: exit %d\n%s", code, out)
	}
	code, out = k.verify(t, "--log-key", k.logPub, "--witness-key", wpubs[0], "--witness-key", wpubs[1], "--witness-threshold", "2", bundle)
	if code != exitFailed || !strings.Contains(out, "1 witness cosignatures, 2 required") {
		t.Fatalf("threshold 2: exit %d\n%s", code, out)
	}

	// The fork: the same key, another history, the same witness.
	forkDir := filepath.Join(k.dir, "fork")
	if err := os.Mkdir(forkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"log.key", "log.pub"} {
		b, _ := os.ReadFile(filepath.Join(k.logDir, f))
		if err := os.WriteFile(filepath.Join(forkDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The fork grows past what the witness cosigned without it, then asks
	// for its cosignature: a consistency proof that cannot verify.
	fork := k.startArgs(t, io.Discard, "log", "serve", "--dir", forkDir, "--listen", "127.0.0.1:0")
	fork.stderr.waitFor(t, "serving http://")
	forkURL := regexp.MustCompile(`serving (http://[^ ]+)`).FindStringSubmatch(fork.stderr.String())[1]
	for i := range 6 {
		res, err := http.Post(forkURL+"/add", "application/json", strings.NewReader(fmt.Sprintf(`{"fork":%d}`, i)))
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("add to the fork: %v %v", res, err)
		}
		res.Body.Close()
	}
	if res, err := http.Get(forkURL + "/await/6"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the fork did not publish: %v %v", res, err)
	}
	if err := fork.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := fork.wait(t); code != 0 {
		t.Fatalf("log serve exit %d\n%s", code, fork.stderr)
	}
	fork = k.startArgs(t, io.Discard, "log", "serve", "--dir", forkDir, "--listen", "127.0.0.1:0", "--witness", ws.URL, "--witness-key", wpubs[0])
	fork.stderr.waitFor(t, "serving http://")
	forkURL = regexp.MustCompile(`serving (http://[^ ]+)`).FindStringSubmatch(fork.stderr.String())[1]
	// One more entry: the fork publishes (asks the witness) when it grows.
	// The addition waits for a publication that never comes; it is
	// abandoned at the end.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, forkURL+"/add", strings.NewReader(`{"fork":"more"}`))
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	select {
	case err := <-refused:
		if !strings.Contains(err.Error(), "the log forked") {
			t.Fatalf("the witness refused the fork for another reason: %v", err)
		}
	case <-fork.done:
		t.Fatalf("the fork's log ended before the witness refused it:\n%s", fork.stderr)
	}
	fork.stderr.waitFor(t, "consistency proof is bad")
	// What the fork serves is still its unwitnessed checkpoint: nothing it
	// publishes carries the witness's cosignature.
	res, err := http.Get(forkURL + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.HasPrefix(cp, []byte("test.tracectl/witnessed\n6\n")) || bytes.Contains(cp, []byte("witness.test/w1")) {
		t.Fatalf("the fork's checkpoint:\n%s", cp)
	}
	if err := fork.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	fork.wait(t)
}

// TestAnchorLogDown: a log that cannot be reached never stops the
// recording: every call is answered, the bundle is sealed and signed, each
// failure is reported like a failed checkpoint, and verify --log-key says
// the statements are not anchored (incomplete), while the bundle verifies
// as before without it.
func TestAnchorLogDown(t *testing.T) {
	k := &anchorKit{lifecycleKit: newKit(t), srv: mcptest.Build(t, "sdkserver")}
	k.logDir = filepath.Join(k.dir, "log")
	k.logPub = filepath.Join(k.logDir, "log.pub")
	if _, _, err := tlog.LoadOrCreateKey(k.logDir, "test.tracectl/down"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	k.logURL = srv.URL
	srv.Close() // nothing listens there now
	bundle := filepath.Join(k.dir, "run.trace")
	stderr := k.anchoredSession(t, bundle, 3)
	if !strings.Contains(stderr, "tracectl: anchor failed: checkpoints/1.json: submit checkpoints/1.json:") || !strings.Contains(stderr, "tracectl: anchor failed: anchors/record.json") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	rec, err := os.ReadFile(filepath.Join(bundle, "record.json"))
	if err != nil || bytes.Contains(rec, []byte(`"transparency"`)) {
		t.Fatalf("record.json: %s %v", rec, err)
	}
	if code, out := k.verify(t, bundle); code != 0 {
		t.Fatalf("without --log-key: exit %d\n%s", code, out)
	}
	code, out := k.verify(t, "--log-key", k.logPub, bundle)
	if code != exitIncomplete || !strings.Contains(out, "unavailable anchor_missing [checkpoints/1.json]") || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("with --log-key: exit %d\n%s", code, out)
	}
}

// TestProxyAnchored: tracectl proxy --anchor in front of a Go SDK
// Streamable HTTP server: the session's bundle is anchored (its first
// checkpoint and record) and verifies with --log-key.
func TestProxyAnchored(t *testing.T) {
	k := newAnchorKit(t)
	url, _ := cliServer(t)
	b, p := proxiedSession(t, k.lifecycleKit, url, "--anchor", k.logURL, "--anchor-key", k.logPub)
	code, out := k.verify(t, "--log-key", k.logPub, b)
	if code != 0 || !strings.Contains(out, "pass anchor_included [anchors/record.json]") || !strings.Contains(out, "pass anchor_included [checkpoints/1.json]") {
		t.Fatalf("verify: exit %d\n%s\nproxy:\n%s", code, out, strings.Join(p.log, "\n"))
	}
}

// TestAnchoredKilled: an anchored wrap killed (SIGKILL) after its
// checkpoints were anchored: verify --log-key checks their receipts in the
// bundle without record.json (anchor_included for each), and the verdict
// stays incomplete for the unsigned tail.
func TestAnchoredKilled(t *testing.T) {
	k := newAnchorKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--key", k.key, "--checkpoint-every", "2", "--anchor", k.logURL, "--anchor-key", k.logPub, "--", k.srv)
	listAndCall(t, w, bufio.NewReader(outR), 2)
	w.stderr.waitFor(t, "anchored checkpoints/1.json")
	w.stderr.waitFor(t, "2 attempts signed")
	m := regexp.MustCompile(`checkpoint (checkpoints/\d+\.json): \d+ lines, 2 attempts signed`).FindStringSubmatch(w.stderr.String())
	if m == nil {
		t.Fatalf("stderr:\n%s", w.stderr)
	}
	w.stderr.waitFor(t, "anchored "+m[1])
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	w.wait(t)
	outW.Close()
	code, out := k.verify(t, "--log-key", k.logPub, bundle)
	if code != exitIncomplete || !strings.Contains(out, "pass anchor_included [checkpoints/1.json]") || !strings.Contains(out, "pass anchor_included ["+m[1]+"]") || strings.Contains(out, "anchor_missing") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	// seal --recover --anchor finishes what the killed wrap could not: the
	// record is signed, anchored and its receipt kept, so every statement
	// of the session is anchored and the bundle verifies with --log-key.
	seal := exec.Command(k.bin, "seal", "--bundle", bundle, "--key", k.key, "--recover", "--anchor", k.logURL, "--anchor-key", k.logPub)
	sealOut, err := seal.CombinedOutput()
	if err != nil || !strings.Contains(string(sealOut), "anchored "+anchor.RecordFile+": log entry") {
		t.Fatalf("seal --recover --anchor: %v\n%s", err, sealOut)
	}
	code, out = k.verify(t, "--log-key", k.logPub, bundle)
	if code != 0 || !strings.Contains(out, "pass anchor_included ["+anchor.RecordFile+"]") || strings.Contains(out, "anchor_missing") {
		t.Fatalf("verify after seal --recover --anchor: exit %d\n%s", code, out)
	}
}

// TestAnchoredDisclosure: a disclosure keeps the sealed record's receipt
// and the anchored record, so it verifies with --log-key
// (anchor_included); a disclosure of a session rewritten and re-signed by
// the producer, its anchors/ removed, is not verified with --log-key, and
// neither is a record given alone.
func TestAnchoredDisclosure(t *testing.T) {
	k := newAnchorKit(t)
	bundle := filepath.Join(k.dir, "run.trace")
	k.anchoredSession(t, bundle, 3)
	disclose := func(out string) { discloseFirst(t, k.bin, bundle, out) }
	honest := filepath.Join(k.dir, "honest.disclosed")
	disclose(honest)
	ents, err := os.ReadDir(filepath.Join(honest, "anchors"))
	if err != nil || len(ents) != 2 {
		t.Fatalf("the disclosure's anchors/: %v %v, want the anchored record and its receipt", ents, err)
	}
	if code, out := k.verify(t, "--log-key", k.logPub, honest); code != 0 || !strings.Contains(out, "pass anchor_included [anchors/record.json]") {
		t.Fatalf("disclosure of the anchored session: exit %d\n%s", code, out)
	}
	if _, out := k.verify(t, filepath.Join(honest, "record.json")); strings.Contains(out, "anchor_missing") {
		t.Fatalf("the record alone, no --log-key:\n%s", out)
	}
	if code, out := k.verify(t, "--log-key", k.logPub, filepath.Join(honest, "record.json")); code == 0 || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("the record alone with --log-key: exit %d\n%s", code, out)
	}

	k.rewrite(t, bundle)
	if err := os.RemoveAll(filepath.Join(bundle, "anchors")); err != nil {
		t.Fatal(err)
	}
	rewritten := filepath.Join(k.dir, "rewritten.disclosed")
	disclose(rewritten)
	if code, out := k.verify(t, rewritten); code != 0 {
		t.Fatalf("the rewritten disclosure verifies without the log (it is re-signed): exit %d\n%s", code, out)
	}
	if code, out := k.verify(t, "--log-key", k.logPub, rewritten); code == 0 || !strings.Contains(out, "unavailable anchor_missing [record.json]") {
		t.Fatalf("disclosure of a rewritten session with --log-key: exit %d\n%s", code, out)
	}
}

// discloseFirst runs tracectl disclose for the first attempt of bundle's
// transcript into out.
func discloseFirst(t *testing.T, bin, bundle, out string) {
	t.Helper()
	tr, err := os.ReadFile(filepath.Join(bundle, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"attempt_id":"([^"]+)"`).FindSubmatch(tr)
	if m == nil {
		t.Fatalf("no attempt in %s", tr)
	}
	if b, err := exec.Command(bin, "disclose", "--bundle", bundle, "--attempt", string(m[1]), "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("disclose: %v\n%s", err, b)
	}
}

// proxiedSession runs tracectl proxy (with args) in front of url for one
// client session, ends the session (DELETE) and the proxy (interrupt),
// and returns the session's sealed bundle.
func proxiedSession(t *testing.T, k *lifecycleKit, url string, args ...string) (string, *proxyRun) {
	t.Helper()
	p := startProxy(t, k, url, args...)
	cs := p.session(t)
	cs.Close() // DELETE: the session's bundle is sealed
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("tracectl proxy: %v\n%s", err, strings.Join(p.log, "\n"))
	}
	return sessionBundle(t, k), p
}
