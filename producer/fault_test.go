package producer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tracectl/tracectl/transcript"
)

// faultFS is the real file system with faults injected on demand: a fake
// for the fault only, never for the file system under test.
type faultFS struct {
	osFS
	mu        sync.Mutex
	armed     bool  // faults apply only once armed (after Open)
	writeErr  error // journal writes fail: half the bytes go in, then this error
	syncErr   error // journal fsyncs fail
	packErr   error // pack writes fail: half the bytes go in, then this error
	lockErr   error // locking fails
	truncFail bool  // the rollback truncate fails too
	syncs     int
}

func (f *faultFS) arm(set func(*faultFS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = true
	set(f)
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	file, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return file, err
	}
	switch filepath.Base(name) {
	case transcript.TranscriptFile:
		return &faultFile{File: file, fs: f}, nil
	case transcript.PackFile:
		return &faultFile{File: file, fs: f, pack: true}, nil
	}
	return file, err
}

type faultFile struct {
	File
	fs   *faultFS
	pack bool // the payload pack: packErr applies
}

func (f *faultFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	err := f.fs.writeErr
	if f.pack {
		err = f.fs.packErr
	}
	armed := f.fs.armed
	f.fs.mu.Unlock()
	if armed && err != nil {
		n, _ := f.File.Write(b[:len(b)/2]) // a torn write, as a full disk leaves it
		return n, err
	}
	return f.File.Write(b)
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncs++
	err := f.fs.syncErr
	armed := f.fs.armed
	f.fs.mu.Unlock()
	if armed && err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(n int64) error {
	f.fs.mu.Lock()
	fail := f.fs.armed && f.fs.truncFail
	f.fs.mu.Unlock()
	if fail {
		return syscall.EIO
	}
	return f.File.Truncate(n)
}

func (f *faultFile) Lock() error {
	f.fs.mu.Lock()
	err := f.fs.lockErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Lock()
}

func TestFaultsFailClosed(t *testing.T) {
	tests := []struct {
		name  string
		fault func(*faultFS)
		cause error
	}{
		{"ENOSPC on write", func(f *faultFS) { f.writeErr = syscall.ENOSPC }, syscall.ENOSPC},
		{"EIO on write", func(f *faultFS) { f.writeErr = syscall.EIO }, syscall.EIO},
		{"fsync fails", func(f *faultFS) { f.syncErr = syscall.EIO }, syscall.EIO},
		{"pack ENOSPC", func(f *faultFS) { f.packErr = syscall.ENOSPC }, syscall.ENOSPC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ffs := &faultFS{}
			r, dir := openTest(t, func(o *Options) { o.FS = ffs })
			ok := mustAttempt(t, r, call("1", "t", `{}`, ""))
			if err := ok.Response(result("1", "")); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))

			ffs.arm(tt.fault)
			h, err := r.Attempt(context.Background(), Call{Line: call("2", "t", `{}`, "")})
			if h != nil || !errors.Is(err, ErrAuditUnavailable) || !errors.Is(err, tt.cause) {
				t.Fatalf("Attempt = %v, %v; want ErrAuditUnavailable wrapping %v", h, err, tt.cause)
			}
			if !strings.Contains(err.Error(), "do not dispatch") {
				t.Errorf("error %q does not say the call must not be dispatched", err)
			}
			// Sticky: the recorder fails closed from now on, whatever the fault does.
			ffs.arm(func(f *faultFS) { f.writeErr, f.syncErr, f.packErr = nil, nil, nil })
			if _, err := r.Attempt(context.Background(), Call{Line: call("3", "t", `{}`, "")}); !errors.Is(err, ErrAuditUnavailable) {
				t.Errorf("Attempt after a failure = %v, want ErrAuditUnavailable", err)
			}
			if err := ok.Response(result("1", "")); err == nil {
				t.Errorf("an observation after a failure was accepted")
			}
			r.Close()
			// The journal is still a valid transcript; what was durable before is intact.
			after, _ := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
			if !strings.HasPrefix(string(after), string(before)) {
				t.Errorf("durable history changed")
			}
			checkTranscript(t, after)
			// And it can still be recovered and sealed.
			rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
			if err != nil {
				t.Fatal(err)
			}
			mustSeal(t, rr)
			readBundle(t, dir)
		})
	}
}

func TestFailedRollbackLeavesATornTailForRecovery(t *testing.T) {
	ffs := &faultFS{}
	r, dir := openTest(t, func(o *Options) { o.FS = ffs })
	mustAttempt(t, r, call("1", "t", "", ""))
	ffs.arm(func(f *faultFS) { f.writeErr, f.truncFail = syscall.ENOSPC, true })
	if _, err := r.Attempt(context.Background(), Call{Line: call("2", "t", "", "")}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Attempt = %v", err)
	}
	r.Close()
	if _, err := Reopen(dir, Options{Clock: testOptions(t).Clock}); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("Reopen = %v, want ErrNeedsRecovery", err)
	}
	rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
	if err != nil {
		t.Fatal(err)
	}
	if rep := rr.Recovery(); len(rep.Torn) != 1 || len(rep.Resolved) != 1 {
		t.Errorf("recovery %+v", rep)
	}
	mustSeal(t, rr)
	b := readBundle(t, dir)
	if rec := b.recoveries(); len(rec) != 2 || rec[0].TornFile == "" {
		t.Errorf("recovery events %+v", rec)
	}
}

func TestResponseFsyncFailureWithholdsDelivery(t *testing.T) {
	ffs := &faultFS{}
	r, dir := openTest(t, func(o *Options) { o.FS = ffs })
	h := mustAttempt(t, r, call("1", "t", "", ""))
	ffs.arm(func(f *faultFS) { f.syncErr = syscall.EIO })
	if err := h.Response(result("1", "")); !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("Response = %v, want ErrAuditUnavailable: the response must not be delivered as recorded", err)
	}
	r.Close()
	rr, err := Recover(dir, Options{Clock: testOptions(t).Clock})
	if err != nil {
		t.Fatal(err)
	}
	mustSeal(t, rr)
	readBundle(t, dir)
}

func TestLockContention(t *testing.T) {
	r, dir := openTest(t, nil)
	mustAttempt(t, r, call("1", "t", "", ""))
	for name, open := range map[string]func(string, Options) (*Recorder, error){"Reopen": Reopen, "Recover": Recover} {
		if _, err := open(dir, Options{Clock: testOptions(t).Clock}); !errors.Is(err, ErrLocked) {
			t.Errorf("%s while recording = %v, want ErrLocked", name, err)
		}
	}
	// The holder is not disturbed.
	h := mustAttempt(t, r, call("2", "t", "", ""))
	if err := h.Response(result("2", "")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	// An injected lock failure makes Open fail closed: no recorder, no attempts.
	ffs := &faultFS{lockErr: ErrLocked}
	o := testOptions(t)
	o.FS = ffs
	if _, err := Open(filepath.Join(t.TempDir(), "b"), o); !errors.Is(err, ErrLocked) {
		t.Errorf("Open with the lock held = %v, want ErrLocked", err)
	}
}
