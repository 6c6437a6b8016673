//go:build linux

package signer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

// fakeClock is the server's clock in tests: it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testKey(t testing.TB, seed byte) sign.Signer {
	t.Helper()
	s, err := sign.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// preimage is the signature preimage of a record for key: what wrap's
// signer sends.
func preimage(t testing.TB, key sign.Signer, calls int64) []byte {
	t.Helper()
	rec, err := sign.Build(sign.RecordOptions{
		IssuedAt: time.Unix(1_800_000_000, 0), Key: key.Public(),
		Digest:         canon.SHA256([]byte("tracectl test executable")),
		TranscriptHash: canon.SHA256([]byte("transcript commitment")), CallCount: calls,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := canon.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type testServer struct {
	*Server
	path  string
	clock *fakeClock
}

// startServer serves o on a real Unix socket in a fresh directory until
// the test ends.
func startServer(t testing.TB, o Options) *testServer {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	if o.Signer == nil {
		o.Signer = testKey(t, 1)
	}
	if o.Rate == (Rate{}) {
		o.Rate = Rate{N: 1000, Per: time.Second}
	}
	o.Clock, o.OwnUID = clock.now, uint32(os.Getuid())
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{Server: s, path: path, clock: clock}
}

// raw sends one request line and returns the decoded response.
func raw(t *testing.T, path string, line []byte) response {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(line); err != nil {
		t.Fatal(err)
	}
	var r response
	if err := readMessage(c, MaxResponseBytes, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func signRequest(t *testing.T, kind Kind, payload []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeMessage(&b, &request{V: Version, Op: opSign, Kind: kind, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSignsStatements: a client gets the server's key, and signatures
// over a record's and a checkpoint's preimage that verify under it.
func TestSignsStatements(t *testing.T) {
	s := startServer(t, Options{})
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	if tp, _ := sign.Thumbprint(c.Public()); tp != s.thumb || c.Alg() != sign.Ed25519 {
		t.Fatalf("client key %s %s, want %s", tp, c.Alg(), s.thumb)
	}
	for _, signer := range []sign.Signer{c, c.ForCheckpoints()} {
		rec, err := sign.ParseRecord(preimage(t, signer, 3))
		if err != nil {
			t.Fatal(err)
		}
		out, err := sign.Sign(rec, signer)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sign.ParseRecord(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := sign.VerifySignature(out, got); err != nil {
			t.Errorf("%v: %v", signer.(*Client).kind, err)
		}
	}
}

// TestRefusesNonStatements: everything but a statement's exact preimage
// is refused with its code, and nothing is signed or journaled.
func TestRefusesNonStatements(t *testing.T) {
	jpath := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	s := startServer(t, Options{Journal: j})
	key := s.o.Signer
	pre := preimage(t, key, 2)
	rec, _ := sign.ParseRecord(pre)
	signed, err := sign.Sign(rec, key)
	if err != nil {
		t.Fatal(err)
	}
	anchored := *rec
	anchored.Transparency = "http://127.0.0.1:1/entries/0"
	anchoredPre, _ := canon.Marshal(&anchored)
	bare := *rec
	bare.ToolTranscript = nil
	noTranscript, _ := canon.Marshal(&bare)
	other := preimage(t, testKey(t, 2), 2)
	const atPrefix = `{"v":1,"op":"sign","kind":"record","pad":"`
	at := bytes.Repeat([]byte("x"), MaxRequestBytes-len(atPrefix)-len("\"}\n"))
	tests := []struct {
		name string
		line []byte
		want Code
	}{
		{"arbitrary JSON", signRequest(t, KindRecord, []byte(`{"sign":"me"}`)), CodeNotAStatement},
		{"arbitrary bytes", signRequest(t, KindRecord, []byte("git commit object")), CodeNotAStatement},
		{"record with trailing garbage", signRequest(t, KindRecord, append(bytes.Clone(pre), "garbage"...)), CodeNotAStatement},
		{"record with trailing space", signRequest(t, KindRecord, append(bytes.Clone(pre), ' ')), CodeNotAStatement},
		{"record not in RFC 8785 form", signRequest(t, KindRecord, append([]byte("{ "), pre[1:]...)), CodeNotAStatement},
		{"signed record", signRequest(t, KindRecord, signed), CodeNotAStatement},
		{"record without transcript", signRequest(t, KindRecord, noTranscript), CodeNotAStatement},
		{"checkpoint naming a log entry", signRequest(t, KindCheckpoint, anchoredPre), CodeNotAStatement},
		{"another key's record", signRequest(t, KindRecord, other), CodeKeyMismatch},
		{"unknown kind", signRequest(t, "blob", pre), CodeBadRequest},
		{"unknown op", []byte(`{"v":1,"op":"sign_anything"}` + "\n"), CodeBadRequest},
		{"wrong version", []byte(`{"v":2,"op":"public_key"}` + "\n"), CodeBadRequest},
		{"unknown member", []byte(`{"v":1,"op":"public_key","x":1}` + "\n"), CodeBadRequest},
		{"two requests", []byte(`{"v":1,"op":"public_key"}{"v":1,"op":"public_key"}` + "\n"), CodeBadRequest},
		{"not terminated", []byte(`{"v":1,"op":"public_key"}`), CodeBadRequest},
		{"at MaxRequestBytes", []byte(atPrefix + string(at) + "\"}\n"), CodeBadRequest},
		{"over MaxRequestBytes", append(bytes.Repeat([]byte(" "), MaxRequestBytes), '\n'), CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r response
			if tt.name == "not terminated" {
				c, err := net.Dial("unix", s.path)
				if err != nil {
					t.Fatal(err)
				}
				c.Write(tt.line)
				c.(*net.UnixConn).CloseWrite()
				if err := readMessage(c, MaxResponseBytes, &r); err != nil {
					t.Fatal(err)
				}
				c.Close()
			} else {
				r = raw(t, s.path, tt.line)
			}
			if r.Error == nil || r.Error.Code != tt.want || r.Signature != nil {
				t.Fatalf("response %+v, want %s\n%s", r, tt.want, tt.line)
			}
			if tt.name == "at MaxRequestBytes" && strings.Contains(r.Error.Detail, "too large") {
				t.Errorf("a request of the limit was refused for its size: %s", r.Error.Detail)
			}
			if tt.name == "over MaxRequestBytes" && !strings.Contains(r.Error.Detail, "too large") {
				t.Errorf("detail %q, want too large", r.Error.Detail)
			}
		})
	}
	// The limit itself: the request at the bound has its size.
	if n := len(tests[15].line); n != MaxRequestBytes {
		t.Fatalf("at-limit request is %d bytes, want %d", n, MaxRequestBytes)
	}
	if st := j.State(); st.Lines != 0 {
		t.Errorf("journal has %d lines after refusals", st.Lines)
	}
	// The client sees the sentinel.
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignRecordBytes([]byte(`{"sign":"me"}`)); !errors.Is(err, ErrNotAStatement) {
		t.Errorf("client error %v, want ErrNotAStatement", err)
	}
}

// TestPeerRefused: a peer whose uid is neither the server's nor allowed is
// refused before anything else, public key included; allowed, it is served.
func TestPeerRefused(t *testing.T) {
	other := func(net.Conn) (Peer, error) { return Peer{UID: 4242, PID: 7}, nil }
	s := startServer(t, Options{PeerOf: other})
	if _, err := Dial(context.Background(), s.path); !errors.Is(err, ErrPeerRefused) {
		t.Fatalf("Dial: %v, want ErrPeerRefused", err)
	}
	r := raw(t, s.path, signRequest(t, KindRecord, preimage(t, s.o.Signer, 1)))
	if r.Error == nil || r.Error.Code != CodePeerRefused || r.Signature != nil {
		t.Fatalf("sign: %+v", r)
	}
	s = startServer(t, Options{PeerOf: other, AllowUIDs: []uint32{4242}})
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignRecordBytes(preimage(t, c, 1)); err != nil {
		t.Fatal(err)
	}
}

// TestRateLimit: a 3/s bucket signs 3 at once, then refuses until the
// injected clock has moved a third of a second, and never holds more than
// 3 however long it waits.
func TestRateLimit(t *testing.T) {
	s := startServer(t, Options{Rate: Rate{N: 3, Per: time.Second}})
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	pre := preimage(t, c, 1)
	signs := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := c.SignRecordBytes(pre); err != nil {
				t.Fatalf("signature %d: %v", i+1, err)
			}
		}
		if _, err := c.SignRecordBytes(pre); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("signature %d: %v, want ErrRateLimited", n+1, err)
		}
	}
	signs(3)
	s.clock.add(300 * time.Millisecond)
	signs(0)
	s.clock.add(34 * time.Millisecond)
	signs(1)
	s.clock.add(time.Hour)
	signs(3)
	// the public key is never limited
	if _, err := Dial(context.Background(), s.path); err != nil {
		t.Fatal(err)
	}
}

// TestJournalChain: each signature is one line naming its peer, kind and
// the SHA-256 of the bytes signed, chained to the line before; the file is
// 0600; an edited, dropped or reordered line breaks CheckJournal at that
// line, and OpenJournal refuses to continue such a journal.
func TestJournalChain(t *testing.T) {
	jpath := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, Options{Journal: j})
	c, err := Dial(context.Background(), s.path)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for i := range 5 {
		var signer sign.Signer = c
		if i < 4 {
			signer = c.ForCheckpoints()
		}
		pre := preimage(t, c, int64(i))
		if _, err := signer.SignRecordBytes(pre); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(pre)
		sums = append(sums, hex.EncodeToString(sum[:]))
		s.clock.add(time.Second)
	}
	j.Close()
	if fi, err := os.Stat(jpath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode: %v %v", fi.Mode(), err)
	}
	data, _ := os.ReadFile(jpath)
	st, err := CheckJournal(bytes.NewReader(data))
	if err != nil || st.Lines != 5 {
		t.Fatalf("CheckJournal: %+v %v", st, err)
	}
	lines := strings.SplitAfter(string(data), "\n")[:5]
	for i, l := range lines {
		e, reason := parseEntry([]byte(strings.TrimSuffix(l, "\n")))
		kind := KindCheckpoint
		if i == 4 {
			kind = KindRecord
		}
		if reason != "" || e.SHA256 != sums[i] || e.Kind != kind || e.UID != uint32(os.Getuid()) || e.PID != int32(os.Getpid()) || e.Key != s.thumb ||
			e.Time != time.Date(2026, 12, 6, 12, 0, i, 0, time.UTC).Format(time.RFC3339Nano) {
			t.Errorf("line %d: %+v %s", i+1, e, reason)
		}
	}
	tampered := []struct {
		name     string
		journal  string
		wantLine int64
	}{
		{"uid edited", lines[0] + lines[1] + strings.Replace(lines[2], `"peer_uid":`+strconv.Itoa(os.Getuid()), `"peer_uid":9`+strconv.Itoa(os.Getuid()), 1) + lines[3] + lines[4], 4},
		{"digest edited", lines[0] + lines[1] + lines[2] + strings.Replace(lines[3], sums[3], sums[0], 1) + lines[4], 5},
		{"line dropped", lines[0] + lines[2] + lines[3] + lines[4], 2},
		{"lines swapped", lines[0] + lines[2] + lines[1] + lines[3] + lines[4], 2},
		{"last line edited", lines[0] + lines[1] + lines[2] + lines[3] + strings.Replace(lines[4], `"record"`, `"checkpoint"`, 1), 0},
		{"torn last line", lines[0] + lines[1] + lines[2] + lines[3] + lines[4][:40], 5},
		{"seq edited with its chain", strings.Replace(lines[0], `"seq":1`, `"seq":2`, 1), 1},
	}
	for _, tt := range tampered {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CheckJournal(strings.NewReader(tt.journal))
			var je *JournalError
			if tt.wantLine == 0 {
				// The last line has no successor to hold its hash: an edit
				// there keeps the chain, and only a kept Last shows it.
				st, err := CheckJournal(strings.NewReader(tt.journal))
				if err != nil || st.Last == lineHash([]byte(strings.TrimSuffix(lines[4], "\n"))) {
					t.Fatalf("%+v %v", st, err)
				}
				return
			}
			if !errors.As(err, &je) || !errors.Is(err, ErrJournalBroken) || je.Line != tt.wantLine {
				t.Fatalf("CheckJournal: %v, want a break at line %d", err, tt.wantLine)
			}
			p := filepath.Join(t.TempDir(), "journal")
			os.WriteFile(p, []byte(tt.journal), 0o600)
			if _, err := OpenJournal(p); !errors.Is(err, ErrJournalBroken) {
				t.Errorf("OpenJournal: %v", err)
			}
		})
	}
	// An intact journal is continued: the next line chains to the last.
	j, err = OpenJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Entry{Time: time.Unix(0, 0).UTC().Format(time.RFC3339Nano), Kind: KindRecord, SHA256: sums[0], Key: s.thumb}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	data, _ = os.ReadFile(jpath)
	if st, err := CheckJournal(bytes.NewReader(data)); err != nil || st.Lines != 6 {
		t.Fatalf("reopened: %+v %v", st, err)
	}
}

// TestListen: the socket is SocketMode in a directory not world-writable;
// a world-writable directory and an existing path are refused.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.sock")
	l, err := Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != SocketMode || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket %v %v", fi.Mode(), err)
	}
	if _, err := Listen(p); !errors.Is(err, os.ErrExist) {
		t.Errorf("existing path: %v", err)
	}
	l.Close()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after close: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o1777)
	if _, err := Listen(filepath.Join(open, "s.sock")); !errors.Is(err, ErrUnsafeDirectory) {
		t.Errorf("world-writable directory: %v", err)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{"10/s": {10, time.Second}, "1/m": {1, time.Minute}, "1000000/h": {1_000_000, time.Hour}} {
		if got, err := ParseRate(in); err != nil || got != want || got.String() != in {
			t.Errorf("ParseRate(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "10", "0/s", "-1/s", "1000001/s", "10/d", "x/s", "1.5/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}
