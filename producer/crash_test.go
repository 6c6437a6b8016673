package producer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// The crash tests run a real helper process (this test binary, re-executed
// with crashEnv set) that records through the producer and reports on
// stdout what is durable; the test kills it with SIGKILL at a chosen point,
// then recovers the bundle in-process.
const crashEnv = "TRACECTL_PRODUCER_CRASH_HELPER"

func TestMain(m *testing.M) {
	if sc := os.Getenv(crashEnv); sc != "" {
		crashHelper(sc, os.Getenv(crashEnv+"_DIR"))
		return
	}
	os.Exit(m.Run())
}

// tearFS tears the write to file (the journal or the pack) that carries a
// chosen marker: half its bytes reach the file, then the writer stops
// until it is killed.
type tearFS struct {
	osFS
	file   string
	marker string
	out    func(string)
}

func (t *tearFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := t.osFS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != t.file {
		return f, err
	}
	return &tearFile{File: f, fs: t}, nil
}

type tearFile struct {
	File
	fs *tearFS
}

func (f *tearFile) Write(b []byte) (int, error) {
	if i := bytes.Index(b, []byte(f.fs.marker)); i >= 0 {
		cut := len(b) / 2 // a pack entry is one write
		if f.fs.file == transcript.TranscriptFile {
			start := bytes.LastIndexByte(b[:i], '\n') + 1
			cut = start + (bytes.IndexByte(b[i:], '\n')+i-start)/2
		}
		f.File.Write(b[:cut])
		f.fs.out("torn")
		for {
			time.Sleep(time.Hour) // killed here, mid-write
		}
	}
	return f.File.Write(b)
}

// crashHelper records three answered calls, then acts out the scenario and
// waits to be killed.
func crashHelper(scenario, dir string) {
	var mu sync.Mutex
	out := func(s string) { mu.Lock(); fmt.Println(s); mu.Unlock() }
	fail := func(err error) { out("error " + err.Error()); os.Exit(3) }
	var c testClock
	o := Options{Clock: c.now, Entropy: zeros{}, Producer: transcript.Producer{Name: "crash-helper", Version: "v0"},
		Server: transcript.Server{Transport: transcript.TransportInProcess}}
	switch scenario {
	case "mid-write":
		o.FS = &tearFS{file: transcript.TranscriptFile, marker: `"attempt_id":"a4","correlation"`, out: out}
	case "mid-pack":
		o.FS = &tearFS{file: transcript.PackFile, marker: `{"n":4}`, out: out}
	}
	r, err := Open(dir, o)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		id := fmt.Sprint(i)
		h, err := r.Attempt(ctx, Call{Line: call(id, "t", `{"n":`+id+`}`, "")})
		if err != nil {
			fail(err)
		}
		if err := h.Response(result(id, "")); err != nil {
			fail(err)
		}
		out("answered " + h.ID())
	}
	switch scenario {
	case "after-attempt", "after-dispatch":
		// Two calls in flight at once, durable, then (maybe) dispatched.
		var wg sync.WaitGroup
		for _, id := range []string{"4", "5"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := r.Attempt(ctx, Call{Line: call(id, "t", `{"n":`+id+`}`, "")})
				if err != nil {
					fail(err)
				}
				out("durable " + h.ID())
				if scenario == "after-dispatch" {
					out("dispatched " + h.ID())
				}
			}()
		}
		wg.Wait()
	case "after-response":
		h, err := r.Attempt(ctx, Call{Line: call("4", "t", `{"n":4}`, "")})
		if err != nil {
			fail(err)
		}
		out("durable " + h.ID())
		if err := h.Response(result("4", "")); err != nil {
			fail(err)
		}
		out("answered-undelivered " + h.ID())
	case "mid-write", "mid-pack":
		r.Attempt(ctx, Call{Line: call("4", "t", `{"n":4}`, "")}) // blocks in the torn write
	}
	out("ready")
	for {
		time.Sleep(time.Hour) // until killed
	}
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	tests := []struct {
		scenario string
		until    string   // the helper line after which it is killed
		unknown  []string // attempts recovery must resolve unknown
		answered []string
		torn     bool
	}{
		{"after-attempt", "ready", []string{"a4", "a5"}, []string{"a1", "a2", "a3"}, false},
		{"after-dispatch", "ready", []string{"a4", "a5"}, []string{"a1", "a2", "a3"}, false},
		{"after-response", "ready", nil, []string{"a1", "a2", "a3", "a4"}, false},
		{"mid-write", "torn", nil, []string{"a1", "a2", "a3"}, true},
		// The request's pack entry torn: its attempt line was never written
		// (the line follows its payload), so nothing of it is in the
		// transcript; recovery cuts the torn entry and keeps every whole one.
		{"mid-pack", "torn", nil, []string{"a1", "a2", "a3"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run.trace")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+tt.scenario, crashEnv+"_DIR="+dir)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			reported := map[string]string{} // attempt id -> last durable state the helper saw
			sc := bufio.NewScanner(stdout)
			deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
			defer deadline.Stop()
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "error ") {
					t.Fatalf("helper: %s", line)
				}
				if kind, id, ok := strings.Cut(line, " "); ok {
					reported[id] = kind
				}
				if line == tt.until {
					break
				}
			}
			before, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()

			r, err := Recover(dir, Options{Clock: testOptions(t).Clock})
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			rep := r.Recovery()
			if _, err := r.Seal(context.Background(), &testSigner{}); err != nil {
				t.Fatalf("Seal: %v", err)
			}
			after, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
			if err != nil {
				t.Fatal(err)
			}
			b := checkTranscript(t, after)

			// History is only appended to; a torn tail moved to quarantine, byte for byte.
			kept := before
			if tt.torn {
				cut := bytes.LastIndexByte(before, '\n') + 1
				kept = before[:cut]
				tornBytes := before[cut:]
				if len(rep.Torn) != 1 || rep.Torn[0].Digest != canon.SHA256(tornBytes) {
					t.Fatalf("torn lines %+v, want one of %d bytes", rep.Torn, len(tornBytes))
				}
				q, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rep.Torn[0].File)))
				if err != nil || !bytes.Equal(q, tornBytes) {
					t.Errorf("quarantine holds %q, %v; want the torn bytes %q", q, err, tornBytes)
				}
				if rec := b.recoveries(); len(rec) == 0 || rec[0].TornDigest != rep.Torn[0].Digest || rec[0].TornFile != rep.Torn[0].File {
					t.Errorf("no recovery event names the quarantined bytes: %+v", rec)
				}
			} else if len(rep.Torn) != 0 {
				t.Errorf("unexpected torn lines %+v", rep.Torn)
			}
			if tornPack := tt.scenario == "mid-pack"; tornPack != (rep.PackTorn > 0) {
				t.Errorf("PackTorn = %d bytes in scenario %s", rep.PackTorn, tt.scenario)
			}
			if !bytes.HasPrefix(after, kept) {
				t.Fatalf("recovery rewrote durable history")
			}
			// Everything the helper saw durable is there, with its outcome.
			for id, kind := range reported {
				if kind == "durable" || kind == "answered" || kind == "answered-undelivered" || kind == "dispatched" {
					if b.attempts[id] == nil {
						t.Errorf("durable attempt %s lost", id)
					}
				}
			}
			for _, id := range tt.answered {
				if b.status(id) != transcript.ObsResponse {
					t.Errorf("%s: status %s, want its durable response", id, b.status(id))
				}
			}
			for _, id := range tt.unknown {
				res := b.res[id]
				if b.status(id) != "unknown" || res == nil || res.Reason != transcript.ReasonProducerCrashed {
					t.Errorf("%s: status %s resolution %+v, want unknown producer_crashed", id, b.status(id), res)
				}
			}
			// Every retained payload of a durable line is in the pack the
			// killed process left, byte for byte.
			for id, a := range b.attempts {
				payloads := []transcript.Payload{a.Request}
				for _, o := range b.obs[id] {
					if o.Response != nil {
						payloads = append(payloads, *o.Response)
					}
				}
				for _, p := range payloads {
					if _, err := readPayload(dir, p.Digest); err != nil {
						t.Errorf("%s: payload %s not retained after recovery: %v", id, p.Digest, err)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "blobs")); err == nil {
				t.Errorf("a blobs directory in a bundle written with the pack")
			}
			if len(b.attempts) != len(tt.answered)+len(tt.unknown) {
				t.Errorf("%d attempts in the transcript, want %d", len(b.attempts), len(tt.answered)+len(tt.unknown))
			}
			if s := b.seal(); s == nil || !s.Recovered || s.Unknown != int64(len(tt.unknown)) {
				t.Errorf("seal %+v", s)
			}
		})
	}
}

func TestRecoverIsIdempotentAndReopenSeals(t *testing.T) {
	clock := Options{Clock: testOptions(t).Clock}
	// A clean Close with a call in flight: Reopen + Seal resolves it sealed_in_flight.
	r, dir := openTest(t, nil)
	mustAttempt(t, r, call("1", "t", "", ""))
	r.Close()
	rr, err := Reopen(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rr.Attempt(context.Background(), Call{Line: call("2", "t", "", "")}); err != ErrSealOnly {
		t.Errorf("Attempt on a reopened recorder = %v, want ErrSealOnly", err)
	}
	mustSeal(t, rr)
	b := readBundle(t, dir)
	if res := b.res["a1"]; res == nil || res.Reason != transcript.ReasonSealedInFlight {
		t.Errorf("resolution %+v", res)
	}
	if _, err := Reopen(dir, clock); err == nil || !isErr(err, ErrSealed) {
		t.Errorf("Reopen of a sealed bundle = %v, want ErrSealed", err)
	}

	// Recover twice: the second run appends a recovery event and nothing else.
	r, dir = openTest(t, nil)
	mustAttempt(t, r, call("1", "t", "", ""))
	r.Close()
	for i := 0; i < 2; i++ {
		rr, err := Recover(dir, clock)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rr.Recovery().Resolved); got != 1-i {
			t.Errorf("recovery %d resolved %d attempts", i, got)
		}
		rr.Close()
	}
	rr, err = Reopen(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	mustSeal(t, rr)
	b = readBundle(t, dir)
	if len(b.recoveries()) != 2 || len(b.res) != 1 {
		t.Errorf("%d recovery events, %d resolutions", len(b.recoveries()), len(b.res))
	}

	// A seal line without a record (the signer failed): Reopen signs it.
	r, dir = openTest(t, nil)
	if _, err := r.Seal(context.Background(), &testSigner{err: fmt.Errorf("kms down")}); err == nil {
		t.Fatal("Seal with a failing signer succeeded")
	}
	rr, err = Reopen(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	s := mustSeal(t, rr)
	if b := readBundle(t, dir); s.Root != b.root || !s.Signed || len(b.lines) != 2 {
		t.Errorf("resealed root %s, transcript %s, %d lines", s.Root, b.root, len(b.lines))
	}
}

// A recovery that crashed after truncating the journal but before appending
// its event left quarantined bytes no event names: the next recovery names
// them. A second tear with the same bytes is named again.
func TestRecoverNamesEveryQuarantinedTear(t *testing.T) {
	clock := Options{Clock: testOptions(t).Clock}
	r, dir := openTest(t, nil)
	mustAttempt(t, r, call("1", "t", "", ""))
	r.Close()
	orphan := []byte(`{"at_ms":1`)
	if err := writeQuarantine(osFS{}, dir, canon.SHA256(orphan), orphan); err != nil {
		t.Fatal(err)
	}
	tear := func() {
		f, err := os.OpenFile(filepath.Join(dir, transcript.TranscriptFile), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(orphan)
		f.Close()
	}
	rr, err := Recover(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	if rep := rr.Recovery(); len(rep.Torn) != 1 || rep.Torn[0].Digest != canon.SHA256(orphan) {
		t.Errorf("orphaned quarantine not named: %+v", rep)
	}
	rr.Close()
	tear()
	rr, err = Recover(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	if rep := rr.Recovery(); len(rep.Torn) != 1 {
		t.Errorf("a second identical tear not named: %+v", rep)
	}
	mustSeal(t, rr)
	b := readBundle(t, dir)
	named := 0
	for _, rec := range b.recoveries() {
		if rec.TornDigest == canon.SHA256(orphan) {
			named++
		}
	}
	if named != 2 {
		t.Errorf("%d recovery events name the torn bytes, want 2", named)
	}
}
