package producer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

func packEntry(b []byte) string {
	return string(transcript.AppendPackHeader(nil, canon.SHA256(b), int64(len(b)))) + string(b) + "\n"
}

// TestPackIsTheFinalForm: a bundle's payloads are entries of one pack,
// written once: no blob files, no spool, nothing moved at seal, and the
// pack's length is exactly the sum of its entries.
func TestPackIsTheFinalForm(t *testing.T) {
	r, dir := openTest(t, nil)
	var want [][]byte
	for i := range 50 {
		id := strconv.Itoa(i)
		req := call(id, "t", `{"n":`+id+`}`, "")
		h := mustAttempt(t, r, req)
		resp := result(id, "")
		if err := h.Response(resp); err != nil {
			t.Fatal(err)
		}
		want = append(want, req[:len(req)-1], resp[:len(resp)-1])
	}
	before, err := os.ReadFile(filepath.Join(dir, transcript.PackFile))
	if err != nil {
		t.Fatal(err)
	}
	mustSeal(t, r)
	after, err := os.ReadFile(filepath.Join(dir, transcript.PackFile))
	if err != nil || string(after) != string(before) {
		t.Fatalf("seal changed the pack (%d -> %d bytes, %v)", len(before), len(after), err)
	}
	var all strings.Builder
	for _, b := range want {
		all.WriteString(packEntry(b))
	}
	if string(after) != all.String() {
		t.Errorf("the pack is not exactly the payloads' entries in order")
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "payloads.pack record.json transcript.jsonl" {
		t.Errorf("bundle files %v", names)
	}
	for _, b := range want {
		if got, err := readPayload(dir, canon.SHA256(b)); err != nil || string(got) != string(b) {
			t.Errorf("payload %q = %q, %v", b, got, err)
		}
	}
}

// TestPackTornTail: a pack whose last entry a crash cut short needs
// recovery (Reopen refuses it); Recover cuts exactly the torn entry, keeps
// every whole one, and the bundle seals.
func TestPackTornTail(t *testing.T) {
	for _, cut := range []int{1, 30, 70, 80} {
		t.Run(strconv.Itoa(cut), func(t *testing.T) {
			r, dir := openTest(t, nil)
			h := mustAttempt(t, r, call("1", "t", `{}`, ""))
			if err := h.Response(result("1", "")); err != nil {
				t.Fatal(err)
			}
			r.Close()
			path := filepath.Join(dir, transcript.PackFile)
			whole, _ := os.ReadFile(path)
			torn := packEntry([]byte(`{"jsonrpc":"2.0","id":"2","method":"tools/call","params":{"name":"t"}}`))
			if err := os.WriteFile(path, append(whole, torn[:cut]...), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Reopen(dir, Options{Clock: testOptions(t).Clock}); !errors.Is(err, ErrNeedsRecovery) {
				t.Fatalf("Reopen of a torn pack = %v, want ErrNeedsRecovery", err)
			}
			rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
			if err != nil {
				t.Fatal(err)
			}
			if got := rr.Recovery().PackTorn; got != int64(cut) {
				t.Errorf("PackTorn = %d, want %d", got, cut)
			}
			mustSeal(t, rr)
			b := readBundle(t, dir)
			for _, o := range b.obs["a1"] {
				if o.Response != nil {
					if _, err := readPayload(dir, o.Response.Digest); err != nil {
						t.Errorf("a whole entry was lost: %v", err)
					}
				}
			}
			if got, _ := os.ReadFile(path); !strings.HasPrefix(string(got), string(whole)) {
				t.Errorf("recovery changed whole entries")
			}
		})
	}
}

// TestPackDamageFailsClosed: a pack that is not whole entries (damage, not
// a tear) is never guessed at: Reopen and Recover refuse it.
func TestPackDamageFailsClosed(t *testing.T) {
	r, dir := openTest(t, nil)
	mustAttempt(t, r, call("1", "t", `{}`, ""))
	r.Close()
	path := filepath.Join(dir, transcript.PackFile)
	whole, _ := os.ReadFile(path)
	damaged := append([]byte(nil), whole...)
	damaged[len(damaged)-1] = 'x' // the entry's closing LF
	if err := os.WriteFile(path, append(damaged, packEntry([]byte("next"))...), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string, Options) (*Recorder, error){"Reopen": Reopen, "Recover": Recover} {
		if _, err := open(dir, Options{Clock: testOptions(t).Clock}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s of a damaged pack = %v, want ErrCorrupt", name, err)
		}
	}
}

// TestPackWriteFailureRollsBack: a pack write that fails part way (a full
// disk) is truncated away, the recorder fails closed, and the pack stays
// whole entries, so the bundle recovers.
func TestPackWriteFailureRollsBack(t *testing.T) {
	ffs := &faultFS{}
	r, dir := openTest(t, func(o *Options) { o.FS = ffs })
	mustAttempt(t, r, call("1", "t", `{}`, ""))
	before, _ := os.ReadFile(filepath.Join(dir, transcript.PackFile))
	ffs.arm(func(f *faultFS) { f.packErr = errors.New("no space") })
	if _, err := r.Attempt(context.Background(), Call{Line: call("2", "t", `{"big":"`+strings.Repeat("x", 4096)+`"}`, "")}); !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("Attempt = %v, want ErrAuditUnavailable", err)
	}
	r.Close()
	after, _ := os.ReadFile(filepath.Join(dir, transcript.PackFile))
	if string(after) != string(before) {
		t.Fatalf("the failed entry was not rolled back (%d -> %d bytes)", len(before), len(after))
	}
	rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Recovery().PackTorn != 0 {
		t.Errorf("PackTorn = %d after a rolled-back write", rr.Recovery().PackTorn)
	}
	mustSeal(t, rr)
}

// TestPackDurableBeforeTheLine: in strict mode the pack is fsynced before
// the journal's fsync, so a durable attempt line's request bytes are
// durable too.
func TestPackDurableBeforeTheLine(t *testing.T) {
	r, _ := openTest(t, nil) // strict by default
	before := r.pack.syncs.Load()
	mustAttempt(t, r, call("1", "t", `{}`, ""))
	if got := r.pack.syncs.Load() - before; got != 1 {
		t.Errorf("%d pack fsyncs for one strict attempt, want 1", got)
	}
	r.pack.mu.Lock()
	synced, size := r.pack.synced, r.pack.size
	r.pack.mu.Unlock()
	if synced != size {
		t.Errorf("after a strict attempt %d of %d pack bytes are durable", synced, size)
	}
	r.Close()
}

// TestLegacySpoolMigrates: an unsealed bundle written before the pack
// (blobs/sha256 and a spool) is sealed with its spooled payloads moved into
// the pack; damaged or torn spool frames are never trusted.
func TestLegacySpoolMigrates(t *testing.T) {
	r, dir := openTest(t, nil)
	mustAttempt(t, r, call("1", "t", `{}`, ""))
	r.Close()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	good, bad := []byte("spooled payload"), []byte("tampered")
	damaged := canon.SHA256([]byte("original"))[len("sha256:"):] + " 8\n" + string(bad) + "\n"
	spool := packEntry(good) + damaged + packEntry([]byte("torn"))[:10]
	if err := os.WriteFile(filepath.Join(dir, "blobs", ".spool"), []byte(spool), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", ".tmp-1-abc"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
	if err != nil {
		t.Fatal(err)
	}
	if rep := rr.Recovery(); rep.Migrated != 1 || rep.TempBlobs != 1 {
		t.Errorf("recovery %+v, want 1 payload migrated and 1 temporary blob removed", rep)
	}
	mustSeal(t, rr)
	if got, err := readPayload(dir, canon.SHA256(good)); err != nil || string(got) != string(good) {
		t.Errorf("migrated payload = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs", ".spool")); err == nil {
		t.Errorf("the legacy spool is still there")
	}
	if _, err := readPayload(dir, canon.SHA256([]byte("original"))); err == nil {
		t.Errorf("a damaged spool frame was trusted")
	}
}
