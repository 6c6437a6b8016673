package producer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// TestDictionaryAttack: a digest-only bundle of calls whose arguments are
// guessable (yes/no, a PIN, a password from a short list) holds
// commitments that no guess matches, hashed the way v2 committed (SHA-256
// of the exact line, of the canonical arguments), or salted with anything
// the bundle shows (scope, attempt ids, other digests): the salts are
// withheld with the bytes. The argv is not committed by digest at all. As
// a control, the attacker's candidate set holds every true value.
func TestDictionaryAttack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	o := testOptions(t)
	o.Entropy, o.Retention = rand.Reader, transcript.RetainDigest
	exe := filepath.Join(t.TempDir(), "srv")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	srv, err := StdioServer(nil, exe, []string{"--api-key", "hunter2"}, "s")
	if err != nil {
		t.Fatal(err)
	}
	o.Server = srv
	r, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"yes", "1234", "hunter2"}
	var lines [][]byte
	for i, v := range secrets {
		line := call(strconv.Itoa(i+1), "confirm", `{"answer":`+quote(v)+`}`, "")
		lines = append(lines, line[:len(line)-1])
		h, err := r.Attempt(context.Background(), Call{Line: line})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Response(result(strconv.Itoa(i+1), "")); err != nil {
			t.Fatal(err)
		}
	}
	mustSeal(t, r)
	b := readBundle(t, dir)

	// What the attacker can read in the bundle: every digest, and every
	// string that could serve as a salt.
	committed := map[string]bool{}
	var visible [][]byte
	for _, a := range b.attempts {
		committed[a.Request.Digest], committed[a.ArgsDigest] = true, true
		visible = append(visible, []byte(a.AttemptID), []byte(a.ExecutionScope), []byte(a.ServerDigest))
	}
	for _, f := range []string{transcript.TranscriptFile, transcript.PackFile} {
		data, _ := os.ReadFile(filepath.Join(dir, f))
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds %q in clear", f, s)
			}
		}
	}
	words := []string{"no", "yes", "0000", "1234", "password", "hunter2", "letmein", "secret"}
	guesses := 0
	tried := map[string]bool{}
	try := func(d string) {
		guesses++
		tried[d] = true
		if committed[d] {
			t.Errorf("a guess matches a commitment: %s", d)
		}
	}
	for i, w := range words {
		for id := 1; id <= len(secrets); id++ {
			line := call(strconv.Itoa(id), "confirm", `{"answer":`+quote(w)+`}`, "")
			line = line[:len(line)-1]
			try(canon.SHA256(line))
			args, _ := canon.Marshal(map[string]string{"answer": w})
			plainArgs := canon.SHA256(args)
			try(plainArgs)
			salts := append([][]byte{make([]byte, transcript.SaltBytes)}, visible...)
			for _, s := range salts {
				try(transcript.SaltedDigest(s, line))
				try(transcript.SaltedArgsDigest(s, plainArgs))
			}
		}
		argv, _ := canon.Marshal([]string{"--api-key", words[i]})
		try(canon.SHA256(argv))
	}
	// Control: the guesses include every recorded line's v2 commitment
	// (plain SHA-256 of the exact bytes), so an unsalted bundle would have
	// matched, and the argv's v2 digest.
	for _, l := range lines {
		if !tried[canon.SHA256(l)] {
			t.Fatalf("the guesses miss the plain digest of %s: the test proves nothing", l)
		}
	}
	if argv, _ := canon.Marshal([]string{"--api-key", "hunter2"}); !tried[canon.SHA256(argv)] {
		t.Fatal("the guesses miss the argv's plain digest")
	}
	h, _ := readHeader(t, dir)
	if h.Server.ArgsDigest != "" || strings.Contains(hex.EncodeToString([]byte(h.Server.Executable)), hex.EncodeToString([]byte("hunter2"))) {
		t.Errorf("the argv is committed or recorded: %+v", h.Server)
	}
	if guesses < 100 {
		t.Fatalf("only %d guesses tried", guesses)
	}
}

func readHeader(t *testing.T, dir string) (*transcript.Header, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := transcript.DecodeLine(data[:bytes.IndexByte(data, '\n')])
	if err != nil {
		t.Fatal(err)
	}
	return ev.(*transcript.Header), nil
}

// TestUnredactableWithheld: a message with a secret the redactor cannot
// hide in a checkable form (here, under a member name too long for a
// redaction pointer) is not retained at all: withheld unredactable, and
// its bytes are in no file of the bundle.
func TestUnredactableWithheld(t *testing.T) {
	r, dir := openTest(t, nil)
	long := strings.Repeat("n", 2000)
	h := mustAttempt(t, r, call("1", "t", `{"`+long+`":{"password":"hunter2"}}`, ""))
	if err := h.Response(result("1", "")); err != nil {
		t.Fatal(err)
	}
	mustSeal(t, r)
	b := readBundle(t, dir)
	a := b.attempts["a1"]
	if a.Request.Retained || a.Request.Withheld != transcript.WithheldUnredactable {
		t.Fatalf("request %+v, want withheld unredactable", a.Request)
	}
	pack, _ := os.ReadFile(filepath.Join(dir, transcript.PackFile))
	if bytes.Contains(pack, []byte("hunter2")) {
		t.Error("the unredactable request's secret is in the pack")
	}
}
