//go:build linux

package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rnote "github.com/sigstore/rekor-tiles/v2/pkg/note"

	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/internal/anchor/rekor/rekortest"
	"github.com/tracectl/tracectl/internal/mcptest"
)

// freePorts returns n distinct loopback ports free when asked: rekor-tiles'
// server refuses port 0, so the ports are chosen here.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// TestRekorTilesServer: a REAL rekor-tiles v2.3.0 server (its POSIX
// build, cmd/rekor-server/posix, built from testdata/rekorserver, a module
// of its own) on loopback. A wrap session sealed with --anchor rekor:URL
// is accepted by the server (which validates the hashedrekord request and
// its Ed25519ph signature with its own code), and verify --rekor-root,
// with a trusted root built from the server's key and log id, finds the
// entry anchor_included; the session cut and re-signed afterwards fails.
func TestRekorTilesServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds rekor-tiles' server")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build rekor-tiles' server")
	}
	srvBin := filepath.Join(t.TempDir(), "rekor-server")
	build := exec.Command(goBin, "build", "-o", srvBin, ".")
	build.Dir = filepath.Join("testdata", "rekorserver")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build rekor-tiles' server: %v\n%s", err, out)
	}

	k := &anchorKit{lifecycleKit: newKit(t), srv: mcptest.Build(t, "sdkserver")}
	logKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, ed25519.SeedSize))
	der, err := x509.MarshalPKCS8PrivateKey(logKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(k.dir, "rekor-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	const origin = "127.0.0.1" // Rekor's checkpoint origin is its hostname, the trusted root's baseUrl host
	url := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	srv := exec.Command(srvBin, "serve", "--hostname="+origin, "--storage-dir="+filepath.Join(k.dir, "rekor-log"),
		"--signer-filepath="+keyFile, "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
		"--http-port="+strconv.Itoa(ports[0]), "--grpc-port="+strconv.Itoa(ports[1]), "--http-metrics-port="+strconv.Itoa(ports[2]),
		"--checkpoint-interval=100ms")
	run := &wrapRun{cmd: srv, stderr: newLineLog(), done: make(chan struct{})}
	errR, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	go run.stderr.read(errR)
	go func() { <-run.stderr.eof; run.err = srv.Wait(); close(run.done) }()
	t.Cleanup(func() { _ = srv.Process.Kill(); <-run.done })
	// The HTTP proxy logs once its listener is bound, after gRPC's.
	run.stderr.waitFor(t, `msg="starting HTTP proxy"`)

	_, logID, err := rnote.KeyHash(origin, logKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	root, err := rekortest.TrustedRoot(url, logKey.Public(), logID)
	if err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(k.dir, "trusted_root.json")
	if err := os.WriteFile(rootFile, root, 0o600); err != nil {
		t.Fatal(err)
	}

	bundle := filepath.Join(k.dir, "run.trace")
	stderr := k.session(t, bundle, 3, "--anchor", rekor.Scheme+url)
	if !strings.Contains(stderr, "tracectl: anchored anchors/record.json: Rekor entry 0 of 1") {
		t.Fatalf("wrap stderr:\n%s\nrekor-server:\n%s", stderr, run.stderr)
	}
	code, out := k.verify(t, "--rekor-root", rootFile, bundle)
	if code != 0 || !strings.Contains(out, "pass anchor_included [anchors/rekor/record.json]") || !strings.Contains(out, "Rekor entry 0 of "+url) {
		t.Fatalf("verify --rekor-root: exit %d\n%s", code, out)
	}
	k.rewrite(t, bundle)
	code, out = k.verify(t, "--rekor-root", rootFile, bundle)
	if code != exitFailed || !strings.Contains(out, "fail anchor_invalid [record.json]") || !strings.Contains(out, "rewritten after anchoring") {
		t.Fatalf("rewritten: exit %d\n%s", code, out)
	}
}
