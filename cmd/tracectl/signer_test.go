//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/mcptest"
	signersvc "github.com/tracectl/tracectl/internal/signer"
	"github.com/tracectl/tracectl/sign"
)

// startSigner runs tracectl signer serve with the kit's key on a socket in
// dir and waits until it serves.
func (k *lifecycleKit) startSigner(t *testing.T, bin, sock string, extra ...string) *wrapRun {
	t.Helper()
	kb := *k
	kb.bin = bin
	w := kb.startArgs(t, io.Discard, append([]string{"signer", "serve", "--key", k.key, "--socket", sock}, extra...)...)
	w.stderr.waitFor(t, "tracectl: signer serving unix:")
	return w
}

// TestWrapThroughSigner: tracectl wrap --signer unix:PATH, with checkpoints,
// in front of the Go SDK server, holds no key: tracectl signer serve signs
// every checkpoint and the record, the bundle verifies with the server's
// public key as --trusted-key, and the journal has one chained line per
// signature, of its kind, naming the SHA-256 of the record's preimage.
// tracectl seal --signer signs an unsigned bundle the same way, and tracectl
// proxy --signer the bundles it seals. SIGTERM stops the server (exit 0)
// and removes the socket.
func TestWrapThroughSigner(t *testing.T) {
	k := newKit(t)
	srv := mcptest.Build(t, "sdkserver")
	sockDir := filepath.Join(k.dir, "run")
	if err := os.Mkdir(sockDir, 0o750); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "signer.sock")
	journal := filepath.Join(k.dir, "signer.journal")
	sv := k.startSigner(t, k.bin, sock, "--journal", journal)

	bundle := filepath.Join(k.dir, "run.trace")
	outR, outW := io.Pipe()
	w := k.startArgs(t, outW, "wrap", "--bundle", bundle, "--signer", "unix:"+sock, "--checkpoint-every", "2", "--", srv)
	const calls = 5
	listAndCall(t, w, bufio.NewReader(outR), calls)
	w.in.Close()
	if code := w.wait(t); code != 0 {
		t.Fatalf("wrap exit %d\n%s\nsigner:\n%s", code, w.stderr, sv.stderr)
	}
	outW.Close()
	if strings.Contains(w.stderr.String(), "checkpoint failed") || !strings.Contains(w.stderr.String(), "signed") {
		t.Fatalf("wrap stderr:\n%s", w.stderr)
	}
	k.verified(t, bundle) // --trusted-key: the server's key.pem.pub

	ckpts, _ := filepath.Glob(filepath.Join(bundle, "checkpoints", "*.json"))
	if len(ckpts) == 0 {
		t.Fatalf("checkpoints %v", ckpts)
	}
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	st, err := signersvc.CheckJournal(bytes.NewReader(data))
	if err != nil || st.Lines != int64(len(ckpts)+1) {
		t.Fatalf("journal: %+v %v, want %d lines\n%s", st, err, len(ckpts)+1, data)
	}
	if got, want := strings.Count(string(data), `"kind":"checkpoint"`), len(ckpts); got != want {
		t.Errorf("%d checkpoint lines, want %d", got, want)
	}
	rec, err := os.ReadFile(filepath.Join(bundle, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := sign.ParseRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	r.Signature = ""
	pre, err := canon.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pre)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"kind":"record"`) || !strings.Contains(last, `"sha256":"`+hex.EncodeToString(sum[:])+`"`) ||
		!strings.Contains(last, fmt.Sprintf(`"peer_uid":%d`, os.Getuid())) {
		t.Errorf("last journal line %s, want the record's preimage digest %x", last, sum)
	}

	// seal signs an unsigned bundle through the signer too.
	unsigned := filepath.Join(k.dir, "unsigned.trace")
	rec2 := exec.Command(k.bin, "wrap", "--bundle", unsigned, "--", k.bin, "__demo-server")
	rec2.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	if out, err := rec2.CombinedOutput(); err != nil || !strings.Contains(string(out), "unsigned") {
		t.Fatalf("unsigned wrap: %v\n%s", err, out)
	}
	if out, err := exec.Command(k.bin, "seal", "--bundle", unsigned, "--signer", "unix:"+sock).CombinedOutput(); err != nil || !strings.Contains(string(out), "; signed") {
		t.Fatalf("seal --signer: %v\n%s", err, out)
	}
	k.verified(t, unsigned)
	data, _ = os.ReadFile(journal)
	if st, err := signersvc.CheckJournal(bytes.NewReader(data)); err != nil || st.Lines != int64(len(ckpts)+2) {
		t.Errorf("journal after seal: %+v %v", st, err)
	}

	// tracectl signer journal checks the chain: intact, then with a line
	// edited (the uid of the first signature), broken at that line.
	out, err := exec.Command(k.bin, "signer", "journal", journal).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf(": %d signatures, chain intact; last line sha256 ", len(ckpts)+2)) {
		t.Fatalf("signer journal: %v\n%s", err, out)
	}
	tampered := filepath.Join(k.dir, "tampered.journal")
	edited := strings.Replace(string(data), fmt.Sprintf(`"peer_uid":%d`, os.Getuid()), `"peer_uid":4242`, 1)
	if err := os.WriteFile(tampered, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(k.bin, "signer", "journal", "--format", "json", tampered)
	out, err = cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(string(out), `"intact":false`) || !strings.Contains(string(out), `"bad_line":2`) {
		t.Fatalf("signer journal of an edited journal: %v, want exit 1 naming line 2\n%s", err, out)
	}

	// proxy signs every bundle it seals through the signer too.
	up, _ := cliServer(t)
	p := startProxy(t, k, up, "--signer", "unix:"+sock)
	p.session(t).Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(); err != nil {
		t.Fatalf("proxy --signer: %v\n%s", err, strings.Join(p.log, "\n"))
	}
	k.verified(t, sessionBundle(t, k))
	data, _ = os.ReadFile(journal)
	if st, err := signersvc.CheckJournal(bytes.NewReader(data)); err != nil || st.Lines < int64(len(ckpts)+3) {
		t.Errorf("journal after proxy: %+v %v, want a line for the proxy's session record", st, err)
	}

	sv.cmd.Process.Signal(syscall.SIGTERM)
	if code := sv.wait(t); code != 0 {
		t.Errorf("signer exit %d\n%s", code, sv.stderr)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// TestSignerRefusesOtherUID: a recorder running as uid 65534, which the
// socket's mode lets connect, is refused by its uid (peer_refused, exit 2,
// the refusal logged by the server) until the server allows it with
// --allow-uid. Switching users needs root: elsewhere the test says why it
// skips.
func TestSignerRefusesOtherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skipf("runs as uid %d: only root can start a client as uid 65534 to be a refused peer", os.Getuid())
	}
	k := newKit(t)
	// A directory uid 65534 can reach, with a copy of tracectl in it (the
	// build directory is private).
	pub, err := os.MkdirTemp("", "tracectl-signer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	if err := os.Chmod(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pub, "tracectl")
	copyFile(t, k.bin, bin, 0o755)
	for i, allow := range [][]string{nil, {"--allow-uid", "65534"}} {
		sockDir := filepath.Join(pub, fmt.Sprint("run", i))
		if err := os.Mkdir(sockDir, 0o755); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(sockDir, "signer.sock")
		sv := k.startSigner(t, bin, sock, allow...)
		// What a shared group would grant: uid 65534 may connect; the uid
		// check alone decides.
		if err := os.Chmod(sock, 0o666); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "seal", "--bundle", filepath.Join(pub, "no-such.trace"), "--signer", "unix:"+sock)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Dir = pub
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		code := procExit(err)
		switch {
		case allow == nil && (code != 2 || !strings.Contains(string(out), "signer refused (peer_refused): uid 65534 is not allowed") ||
			!strings.Contains(string(out), "this process runs as uid 65534")):
			t.Errorf("refused peer: exit %d\n%s", code, out)
		case allow == nil:
			sv.stderr.waitFor(t, "tracectl: signer: uid 65534 pid ")
		case allow != nil && (code != 2 || strings.Contains(string(out), "signer refused") || !strings.Contains(string(out), "no-such.trace")):
			// served: the signer gave its key, and seal got as far as the
			// bundle, which does not exist
			t.Errorf("allowed peer: exit %d\n%s", code, out)
		}
		sv.cmd.Process.Signal(syscall.SIGTERM)
		sv.wait(t)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAnchoredThroughSigner: an anchored session signing through the
// signer verifies with --log-key, every statement anchor_included; the
// journal holds the first checkpoint (over the header) as a checkpoint, and
// the record twice (anchored, then with its log entry named) as records.
func TestAnchoredThroughSigner(t *testing.T) {
	k := newAnchorKit(t)
	sock := filepath.Join(k.dir, "run", "signer.sock")
	if err := os.Mkdir(filepath.Dir(sock), 0o750); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(k.dir, "signer.journal")
	k.startSigner(t, k.bin, sock, "--journal", journal)
	k.signer = sock
	bundle := filepath.Join(k.dir, "run.trace")
	stderr := k.anchoredSession(t, bundle, 3)
	if !strings.Contains(stderr, "tracectl: anchored anchors/record.json: log entry") || strings.Contains(stderr, "failed") {
		t.Fatalf("wrap stderr:\n%s", stderr)
	}
	ckpts, _ := filepath.Glob(filepath.Join(bundle, "checkpoints", "*.json"))
	code, out := k.verify(t, "--log-key", k.logPub, bundle)
	if code != 0 || !strings.HasPrefix(out, "verdict: verified") || strings.Count(out, "pass anchor_included") != len(ckpts)+1 {
		t.Fatalf("verify --log-key: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(journal)
	st, err := signersvc.CheckJournal(bytes.NewReader(data))
	if err != nil || st.Lines != int64(len(ckpts)+2) || strings.Count(string(data), `"kind":"record"`) != 2 ||
		!strings.HasPrefix(string(data), `{"seq":1,`) || !strings.Contains(strings.SplitN(string(data), "\n", 2)[0], `"kind":"checkpoint"`) {
		t.Errorf("journal %+v %v, want %d checkpoints and 2 records:\n%s", st, err, len(ckpts), data)
	}
}
