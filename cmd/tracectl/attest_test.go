package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tracectl/tracectl/internal/attest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// attestFixture records a fixture bundle of kind and writes the fixture's
// private key (the one that signed it) to key.pem beside it.
func attestFixture(t *testing.T, kind string) (bundle, key string) {
	t.Helper()
	dir := t.TempDir()
	bundle = filepath.Join(dir, "run.trace")
	if err := writeFixture(bundle, kind); err != nil {
		t.Fatal(err)
	}
	key = filepath.Join(dir, "key.pem")
	if err := sign.WriteKeyPair(key, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)), nil); err != nil {
		t.Fatal(err)
	}
	return bundle, key
}

func runAttestTest(t *testing.T, o *attestOptions) (stdout []byte, err error) {
	t.Helper()
	var out bytes.Buffer
	err = runAttest(context.Background(), streams{out: &out, err: new(bytes.Buffer)}, o)
	return out.Bytes(), err
}

// dssePAE is DSSE v1's pre-authentication encoding written out from the
// spec (protocol.md), independent of the dsse package attest signs with.
func dssePAE(payloadType string, payload []byte) []byte {
	s := "DSSEv1 " + strconv.Itoa(len(payloadType)) + " " + payloadType + " " + strconv.Itoa(len(payload)) + " "
	return append([]byte(s), payload...)
}

type dsseEnvelope struct {
	PayloadType string `json:"payloadType"`
	Payload     string `json:"payload"`
	Signatures  []struct {
		KeyID string `json:"keyid"`
		Sig   string `json:"sig"`
	} `json:"signatures"`
}

// checkAttestation is what any consumer does with the envelope: decode it,
// recompute the PAE, check the signature with the bundle's public key
// (crypto/ed25519), and compare the subjects with the transcript root
// recomputed from transcript.jsonl and the SHA-256 of record.json's bytes.
func checkAttestation(t *testing.T, env []byte, bundle string) error {
	t.Helper()
	record, err := os.ReadFile(filepath.Join(bundle, transcript.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sign.ParseRecord(record)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := rec.Cnf.JWK.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	var e dsseEnvelope
	if err := json.Unmarshal(env, &e); err != nil {
		return err
	}
	if e.PayloadType != "application/vnd.in-toto+json" || len(e.Signatures) != 1 {
		return errors.New("not one signature over an in-toto payload")
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub.(ed25519.PublicKey), dssePAE(e.PayloadType, payload), sig) {
		return errors.New("signature does not verify")
	}
	if tp, _ := rec.Cnf.JWK.Thumbprint(); e.Signatures[0].KeyID != tp {
		return errors.New("keyid is not the signer's thumbprint")
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		return err
	}
	tr, err := os.ReadFile(filepath.Join(bundle, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(tr, []byte("\n"))
	for i := range lines {
		lines[i] = bytes.TrimSuffix(lines[i], []byte("\n"))
	}
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	sum := sha256.Sum256(record)
	want := map[string]string{
		"record.json":     hex.EncodeToString(sum[:]),
		"transcript-root": transcript.Root(lines)[len("sha256:"):],
	}
	got := map[string]string{}
	for _, s := range st.Subject {
		got[s.Name] = s.Digest["sha256"]
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != attest.PredicateType ||
		len(got) != 2 || got["record.json"] != want["record.json"] || got["transcript-root"] != want["transcript-root"] {
		return errors.New("statement type or subjects wrong: " + string(payload))
	}
	if !bytes.Equal(st.Predicate, record) {
		return errors.New("predicate is not record.json's bytes")
	}
	return nil
}

// TestAttestRoundTrip: the envelope of a verified bundle checks out with
// crypto/ed25519 and the bundle's own files, on stdout and with --out
// (mode 0644, a summary, never overwriting).
func TestAttestRoundTrip(t *testing.T) {
	bundle, key := attestFixture(t, "basic")
	env, err := runAttestTest(t, &attestOptions{bundle: bundle, key: key, format: "text"})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAttestation(t, env, bundle); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "run.intoto.json")
	summary, err := runAttestTest(t, &attestOptions{bundle: bundle, key: key, out: out, format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written, env) {
		t.Error("--out wrote other bytes than stdout (Ed25519 is deterministic)")
	}
	if fi, err := os.Stat(out); err == nil && fi.Mode().Perm()&^0o644 != 0 {
		t.Errorf("--out mode %v, want at most 0644", fi.Mode().Perm())
	}
	var s struct {
		MediaType string            `json:"media_type"`
		Subjects  map[string]string `json:"subjects"`
	}
	if err := json.Unmarshal(summary, &s); err != nil || s.MediaType != attestMediaType || len(s.Subjects) != 2 {
		t.Errorf("summary %s (%v)", summary, err)
	}
	_, err = runAttestTest(t, &attestOptions{bundle: bundle, key: key, out: out, format: "text"})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !errors.Is(err, fs.ErrExist) {
		t.Errorf("attest over an existing --out: %v, want exit %d and fs.ErrExist", err, exitUsage)
	}
}

// TestAttestTamperedPayload: a statement changed after signing no longer
// verifies, neither by hand nor through attest.Open.
func TestAttestTamperedPayload(t *testing.T) {
	bundle, key := attestFixture(t, "basic")
	env, err := runAttestTest(t, &attestOptions{bundle: bundle, key: key, format: "text"})
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(e["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(payload, []byte(`"data_class":"internal"`), []byte(`"data_class":"public"`), 1)
	if bytes.Equal(changed, payload) {
		t.Fatal("nothing to tamper with")
	}
	e["payload"] = base64.StdEncoding.EncodeToString(changed)
	tampered, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAttestation(t, tampered, bundle); err == nil || err.Error() != "signature does not verify" {
		t.Errorf("tampered payload: %v, want the signature check to fail", err)
	}
	key7, _ := fixtureKey()
	if _, err := attest.Open(context.Background(), tampered, key7.Public().(ed25519.PublicKey)); !errors.Is(err, attest.ErrEnvelope) {
		t.Errorf("attest.Open: %v, want ErrEnvelope", err)
	}
}

// TestAttestRefuses: a bundle that fails verification (exit 1), one whose
// verdict is incomplete (3), a key that did not sign the record, an ECDSA
// key and an unsigned bundle (2) get no attestation, and --out is not
// created.
func TestAttestRefuses(t *testing.T) {
	tamperedBundle, key := attestFixture(t, "basic")
	tp := filepath.Join(tamperedBundle, transcript.TranscriptFile)
	tr, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(tr, []byte(`"tracectl-fixture"`), []byte(`"tracectl-fixturE"`), 1)
	if bytes.Equal(changed, tr) {
		t.Fatal("nothing to tamper with")
	}
	if err := os.WriteFile(tp, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	digestBundle, _ := attestFixture(t, "digest")
	unsigned, _ := attestFixture(t, "unsigned")

	dir := t.TempDir()
	otherKey := filepath.Join(dir, "other.pem")
	if err := sign.WriteKeyPair(otherKey, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32)), nil); err != nil {
		t.Fatal(err)
	}
	ecKey := filepath.Join(dir, "ec.pem")
	ec, err := ecdsa.GenerateKey(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WriteKeyPair(ecKey, ec, nil); err != nil {
		t.Fatal(err)
	}
	okBundle, _ := attestFixture(t, "basic")

	for _, tc := range []struct {
		name, bundle, key string
		code              int
		is                error
	}{
		{"tampered transcript", tamperedBundle, key, exitFailed, errAttestUnverified},
		{"incomplete verdict", digestBundle, key, exitIncomplete, errAttestUnverified},
		{"wrong key", okBundle, otherKey, exitUsage, errAttestWrongKey},
		{"ecdsa key", okBundle, ecKey, exitUsage, attest.ErrUnsupportedKey},
		{"unsigned bundle", unsigned, key, exitUsage, fs.ErrNotExist},
	} {
		out := filepath.Join(dir, tc.name+".json")
		stdout, err := runAttestTest(t, &attestOptions{bundle: tc.bundle, key: tc.key, out: out, format: "text"})
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != tc.code || !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want exit %d and %v", tc.name, err, tc.code, tc.is)
		}
		if len(stdout) != 0 {
			t.Errorf("%s: printed %q", tc.name, stdout)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: --out was created", tc.name)
		}
	}
}

// TestAttestFlags: flag parsing reaches the options, without running.
func TestAttestFlags(t *testing.T) {
	var got *attestOptions
	cmd := newAttestCmd(streams{}, func(_ context.Context, _ streams, o *attestOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--key", "k.pem", "--out", "a.json", "--format", "json", "run.trace"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.bundle != "run.trace" || got.key != "k.pem" || got.out != "a.json" || got.format != "json" {
		t.Errorf("options %+v", got)
	}
	for _, o := range []*attestOptions{
		{bundle: "b", key: "k", format: "yaml"},
		{bundle: "b", key: "k", format: "json"}, // a summary needs --out
		{bundle: "b", format: "text"},           // no key
	} {
		var ee *exitError
		if _, err := runAttestTest(t, o); !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("%+v: %v, want exit %d", o, err, exitUsage)
		}
	}
}
