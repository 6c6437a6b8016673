//go:build unix

package stdio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer/internal/session"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// serverRead returns the lines the rawserver (run with -v) logged as read,
// in order.
func serverRead(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if _, rest, ok := strings.Cut(l, "rawserver: <- "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// TestWrapPipelinedOrder: many calls in flight at once, with notifications
// and pings interleaved, sent without waiting for any answer. The server
// reads exactly the client's frames in the client's order (a frame that
// needs no durable wait never overtakes a call queued before it), every
// call is answered, and the bundle verifies (frame indexes in journal
// order). Strict durability pipelines; batch keeps the synchronous path
// and must give the same.
func TestWrapPipelinedOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{transcript.DurabilityStrict, transcript.DurabilityBatch} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			raw := mcptest.Build(t, "rawserver")
			w := startWrap(t, wrapOpts{durability: mode}, raw, "-v", "-script", "paged")
			c := w.raw()
			c.legacyHandshake()
			c.listPaged()

			const calls = 120
			var sent []string
			want := map[string]bool{} // ids awaiting an answer
			for i := range calls {
				id := fmt.Sprint(100 + i)
				l := callLine(id, fmt.Sprintf("raw-%04d", i%6))
				sent = append(sent, l)
				want[id] = true
				switch i % 4 {
				case 1:
					sent = append(sent, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
				case 3:
					pid := fmt.Sprintf(`"p%d"`, i)
					sent = append(sent, `{"jsonrpc":"2.0","id":`+pid+`,"method":"ping"}`)
					want[pid] = true
				}
			}
			for _, l := range sent {
				c.send(l)
			}
			for len(want) > 0 {
				r := c.recv()
				if !want[string(r.ID)] || r.Error != nil {
					t.Fatalf("client got %s; still waiting for %d answers", r.raw, len(want))
				}
				delete(want, string(r.ID))
			}
			res := w.end()
			if len(res.InFlight) != 0 || res.TransportFailures != 0 {
				t.Errorf("Result %+v, want every call answered", res)
			}
			// What the server read after the last tools/list page (its log
			// is complete once Run returned).
			got := serverRead(w.stderr.String())
			for len(got) > 0 && !strings.Contains(got[0], `"id":"l2"`) {
				got = got[1:]
			}
			if len(got) == 0 {
				t.Fatal("the server's log has no tools/list page 2")
			}
			if got = got[1:]; !slices.Equal(got, sent) {
				for i := range min(len(got), len(sent)) {
					if got[i] != sent[i] {
						t.Fatalf("the server read frame %d as %s, the client sent %s (%d read, %d sent)", i, got[i], sent[i], len(got), len(sent))
					}
				}
				t.Fatalf("the server read %d frames, the client sent %d", len(got), len(sent))
			}
			sealed := w.seal()
			j := readJournal(t, w.dir)
			w.checkTraffic(j)
			if s := sealed.Seal; s.Attempts != calls || s.Responses != calls {
				t.Errorf("seal %+v, want %d attempts, all answered", s, calls)
			}
			// The attempts are in the journal in the order of the client's
			// frames.
			last := int64(-1)
			for _, a := range j.attempts() {
				if a.Frame == nil || *a.Frame <= last {
					t.Fatalf("attempt %s has frame %v after frame %d", a.AttemptID, a.Frame, last)
				}
				last = *a.Frame
			}
			requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
		})
	}
}

// syncGate is a fault for the one thing a real disk will not do on demand:
// once armed, the journal's next fsync is held (entered is told) until
// release says how it ends; an error fails it as a failing disk does.
type syncGate struct {
	producer.FS
	armed   atomic.Bool
	entered chan struct{}
	release chan error
	// when, if set, picks the fsync to hold: the first one armed that
	// finds it true of the journal's bytes.
	when func(journal []byte) bool
}

func (g *syncGate) OpenFile(name string, flag int, perm fs.FileMode) (producer.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != transcript.TranscriptFile {
		return f, err
	}
	return &gatedFile{File: f, g: g, name: name}, nil
}

// unblock ends a held fsync (with the fault) if the test stopped before
// releasing it, so the session can end.
func (g *syncGate) unblock() {
	select {
	case g.release <- errInjectedFsync:
	default:
	}
}

type gatedFile struct {
	producer.File
	g    *syncGate
	name string
}

func (f *gatedFile) Sync() error {
	if f.g.when != nil && f.g.armed.Load() {
		if b, err := os.ReadFile(f.name); err != nil || !f.g.when(b) {
			return f.File.Sync()
		}
	}
	if f.g.armed.CompareAndSwap(true, false) {
		f.g.entered <- struct{}{}
		if err := <-f.g.release; err != nil {
			return err
		}
	}
	return f.File.Sync()
}

var errInjectedFsync = errors.New("injected fsync failure")

// TestWrapPipelinedFsyncFailure: the fsync that would make three queued
// calls durable fails. While it is held, the proxy goes on reading: the
// later calls and a notification are written to the journal (pipelining).
// When it fails, none of the three calls reaches the server, each gets
// -32091 in order, and none is left in flight; the notification, committed
// as forwarded before the failure, is forwarded after them (its line says
// so). Frames read after the failure fail closed. The bundle recovers, the
// three attempts resolved unknown, and verifies.
func TestWrapPipelinedFsyncFailure(t *testing.T) {
	t.Parallel()
	raw := mcptest.Build(t, "rawserver")
	gate := &syncGate{FS: producer.OS, entered: make(chan struct{}, 1), release: make(chan error, 1)}
	w := startWrap(t, wrapOpts{fs: gate}, raw, "-v", "-script", "paged")
	t.Cleanup(gate.unblock)
	c := w.raw()
	c.legacyHandshake()
	c.listPaged()
	c.send(callLine("3", "raw-0000"))
	if r := c.recv(); string(r.ID) != "3" || r.Error != nil {
		t.Fatalf("call before the fault: %s", r.raw)
	}

	gate.armed.Store(true)
	c.send(callLine("4", "raw-0001"))
	select {
	case <-gate.entered: // the fsync for call 4 is under way, and held
	case <-time.After(15 * time.Second):
		t.Fatal("call 4 was never fsynced")
	}
	c.send(callLine("5", "raw-0002"))
	c.send(callLine("6", "raw-0003"))
	const note = `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`
	c.send(note)
	waitJournal(t, w.dir, "the notification after calls 5 and 6, during the fsync", func(ev any) bool {
		f, ok := ev.(*transcript.Frame)
		return ok && f.Method == "notifications/roots/list_changed"
	})
	gate.release <- errInjectedFsync

	for _, id := range []string{"4", "5", "6"} {
		r := c.recv()
		if string(r.ID) != id || r.Error == nil || r.Error.Code != mcpwire.CodeAuditUnavailable {
			t.Fatalf("want error %d for call %s, client got %s", mcpwire.CodeAuditUnavailable, id, r.raw)
		}
	}
	// Read after the failure: not recorded, not forwarded.
	c.send(callLine("7", "raw-0004"))
	c.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	for _, id := range []string{"7", "8"} {
		if r := c.recv(); string(r.ID) != id || r.Error == nil || r.Error.Code != mcpwire.CodeAuditUnavailable {
			t.Fatalf("want error %d for %s after the failure, client got %s", mcpwire.CodeAuditUnavailable, id, r.raw)
		}
	}
	c.w.clientW.Close()
	res, runErr := w.wait()
	if !errors.Is(runErr, session.ErrAuditUnavailable) {
		t.Fatalf("Run error %v, want session.ErrAuditUnavailable", runErr)
	}
	if len(res.InFlight) != 0 || res.TransportFailures != 0 {
		t.Errorf("Result %+v: the calls never forwarded must not stay in flight", res)
	}
	read := serverRead(w.stderr.String())
	var calls []string
	for _, l := range read {
		if strings.Contains(l, `"tools/call"`) {
			calls = append(calls, l)
		}
	}
	if len(calls) != 1 || !strings.Contains(calls[0], `"id":3,`) {
		t.Fatalf("the server read these tools/call lines: %q, want only id 3", calls)
	}
	if read[len(read)-1] != note || strings.Contains(strings.Join(read, "\n"), `"id":8`) {
		t.Errorf("the server's last reads %q: want the notification committed before the failure, nothing after", read[max(0, len(read)-3):])
	}

	if _, err := w.rec.Seal(context.Background(), recordSigner{w.signer}); !errors.Is(err, producer.ErrAuditUnavailable) || !errors.Is(err, errInjectedFsync) {
		t.Fatalf("Seal after the failed fsync: %v, want session.ErrAuditUnavailable wrapping the fault", err)
	}
	rec, err := recoverBundle(w.dir, producer.Options{Clock: time.Now})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep := rec.Recovery(); len(rep.Resolved) != 3 {
		t.Errorf("recovery resolved %v, want the three attempts never forwarded", rep.Resolved)
	}
	if _, err := rec.Seal(context.Background(), recordSigner{w.signer}); err != nil {
		t.Fatal(err)
	}
	j := readJournal(t, w.dir)
	if s := j.seal(t); s.Attempts != 4 || s.Responses != 1 || !s.Recovered {
		t.Errorf("seal %+v, want 4 attempts, 1 answered", s)
	}
	requireUnknownOnly(t, verifyBundle(t, w.dir, w.signer.Public()), "a2", "a3", "a4")
}

// TestWrapPipelinedResponseFsyncFailure: the fsync that would make a
// call's response durable fails. While it is held, the server direction
// goes on reading (a ping's response is written to the journal behind it).
// The response is never delivered: the client gets -32091 for its id in
// its place, then the ping's response, which was committed as forwarded
// before the failure. The bundle recovers and verifies.
func TestWrapPipelinedResponseFsyncFailure(t *testing.T) {
	t.Parallel()
	raw := mcptest.Build(t, "rawserver")
	gate := &syncGate{FS: producer.OS, entered: make(chan struct{}, 1), release: make(chan error, 1),
		when: func(j []byte) bool { return strings.Contains(string(j), `"type":"observation"`) }}
	w := startWrap(t, wrapOpts{fs: gate}, raw, "-script", "paged")
	t.Cleanup(gate.unblock)
	c := w.raw()
	c.legacyHandshake()
	c.listPaged()
	gate.armed.Store(true) // the fsync of the first response line
	c.send(callLine("3", "raw-0000"))
	select {
	case <-gate.entered:
	case <-time.After(15 * time.Second):
		t.Fatal("the response was never fsynced")
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	waitJournal(t, w.dir, "the ping's response, during the fsync", func(ev any) bool {
		f, ok := ev.(*transcript.Frame)
		return ok && f.Direction == transcript.ServerToClient && f.RPCID != nil && f.RPCID.Text == "4"
	})
	gate.release <- errInjectedFsync
	if r := c.recv(); string(r.ID) != "3" || r.Error == nil || r.Error.Code != mcpwire.CodeAuditUnavailable || !strings.Contains(r.Error.Message, "response withheld") {
		t.Fatalf("want error %d (response withheld) for call 3, client got %s", mcpwire.CodeAuditUnavailable, r.raw)
	}
	if r := c.recv(); string(r.ID) != "4" || r.Error != nil {
		t.Fatalf("want the ping's response next, client got %s", r.raw)
	}
	c.w.clientW.Close()
	if _, err := w.wait(); !errors.Is(err, session.ErrAuditUnavailable) {
		t.Fatalf("Run error %v, want session.ErrAuditUnavailable", err)
	}
	for _, l := range splitWire(t, w.got.Bytes()) {
		if string(l.ID) == "3" && l.Error == nil {
			t.Errorf("the response whose fsync failed reached the client: %s", l.raw)
		}
	}
	if _, err := w.rec.Seal(context.Background(), recordSigner{w.signer}); !errors.Is(err, producer.ErrAuditUnavailable) {
		t.Fatalf("Seal after the failed fsync: %v, want session.ErrAuditUnavailable", err)
	}
	rec, err := recoverBundle(w.dir, producer.Options{Clock: time.Now})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if _, err := rec.Seal(context.Background(), recordSigner{w.signer}); err != nil {
		t.Fatal(err)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}
