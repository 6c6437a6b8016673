package stdio

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// TestListChangedRace: the server sends notifications/tools/list_changed
// 0-150 ms after every complete tools/list, while the client's next call
// carries 64 KiB of arguments (a payload that takes a while to write). An
// attempt's snapshot binding and list_changed_since are decided where its
// line lands in the journal, so however the notification and the attempt
// interleave, the honest bundle never verifies failed, and every attempt
// that follows a list_changed line says so.
func TestListChangedRace(t *testing.T) {
	if testing.Short() {
		t.Skip("100 rounds with real processes; skipped with -short")
	}
	raw := mcptest.Build(t, "rawserver")
	big := strings.Repeat("x", 64<<10)
	for _, mode := range []string{transcript.DurabilityStrict, transcript.DurabilityBatch} {
		t.Run(mode, func(t *testing.T) {
			const rounds = 50 // per session; two sessions per mode: 100 rounds
			for session := range 2 {
				// Session 0 is the plain race; in session 1 the disk is
				// slow to take a large payload (20 ms), so each call stays
				// in flight longer and most notifications land while an
				// attempt is being recorded.
				o := wrapOpts{durability: mode}
				if session == 1 {
					o.fs = slowDisk{FS: producer.OS, delay: 20 * time.Millisecond, min: 64 << 10}
				}
				w := startWrap(t, o, raw, "-script", "paged", "-changed-after", "150ms", "-seed", fmt.Sprint(session+1))
				c := w.raw()
				c.legacyHandshake()
				// Answers and list_changed notifications interleave: read
				// until the answer to id.
				answer := func(id string) wireLine {
					for {
						if l := c.recv(); string(l.ID) == id {
							if l.Error != nil {
								t.Fatalf("%s: %s", id, l.raw)
							}
							return l
						}
					}
				}
				for r := range rounds {
					c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l1-%d","method":"tools/list","params":{}}`, r))
					answer(fmt.Sprintf(`"l1-%d"`, r))
					c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l2-%d","method":"tools/list","params":{"cursor":"page-2"}}`, r))
					answer(fmt.Sprintf(`"l2-%d"`, r))
					id := fmt.Sprint(100 + r)
					c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"raw-0000","arguments":{"s":"` + big + `"}}}`)
					answer(id)
				}
				w.end()
				w.seal()
				rep := verifyBundle(t, w.dir, w.signer.Public())
				if rep.Verdict == verify.Failed {
					t.Fatalf("session %d: an honest bundle verified failed: %q", session, notPassed(rep))
				}
				j := readJournal(t, w.dir)
				j.checkBinding(t)
				changed := len(j.notifications("notifications/tools/list_changed"))
				if changed == 0 {
					t.Fatalf("session %d: the server sent no list_changed: the race was not exercised", session)
				}
				t.Logf("session %d: %d attempts, %d list_changed, verdict %s", session, len(j.attempts()), changed, rep.Verdict)
			}
		})
	}
}

// slowDisk is a fault: writes of at least min bytes to the payload pack
// take delay longer, as on a slow or contended disk.
type slowDisk struct {
	producer.FS
	delay time.Duration
	min   int
}

func (d slowDisk) OpenFile(name string, flag int, perm fs.FileMode) (producer.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != transcript.PackFile {
		return f, err
	}
	return slowFile{File: f, d: d}, nil
}

type slowFile struct {
	producer.File
	d slowDisk
}

func (f slowFile) Write(p []byte) (int, error) {
	if len(p) >= f.d.min {
		time.Sleep(f.d.delay) // the fault itself, not a synchronization
	}
	return f.File.Write(p)
}

// TestRepeatedCancellation: a client that cancels the same call twice (and
// once more with the id spelled 5.0, which the server reads as 5) leaves
// one cancel_sent; the repeats are plain frames, never an audit failure,
// and the bundle verifies.
func TestRepeatedCancellation(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	w := startWrap(t, wrapOpts{grace: 300 * time.Millisecond}, raw, "-script", "never-answer")
	c := w.raw()
	c.legacyHandshake()
	c.send(callLine("5", "raw-0000"))
	waitJournal(t, w.dir, "the attempt", isAttempt("raw-0000"))
	for _, id := range []string{"5", "5", "5.0"} {
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"user"}}`)
	}
	c.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	for {
		if l := c.recv(); string(l.ID) == "6" {
			break
		}
	}
	w.end() // fails the test if Run returned an error (audit unavailable)
	w.seal()
	j := readJournal(t, w.dir)
	a := j.attemptFor(t, "5")
	if h := j.history(a.AttemptID); !strings.HasPrefix(h, transcript.ObsCancelSent) || strings.Count(h, transcript.ObsCancelSent) != 1 {
		t.Errorf("history %q, want one cancel_sent", h)
	}
	rep := verifyBundle(t, w.dir, w.signer.Public())
	if rep.Verdict == verify.Failed {
		t.Fatalf("verdict failed: %q", notPassed(rep))
	}
}

// TestIDSharedWithAnotherRequest: a client that sends a ping under the id
// of a call still in flight gets both answered, and the proxy does not
// take the ping's answer for the call's: neither response is attributed,
// the call's outcome stays unknown, and the bundle is honest.
func TestIDSharedWithAnotherRequest(t *testing.T) {
	raw := mcptest.Build(t, "rawserver")
	w := startWrap(t, wrapOpts{}, raw, "-script", "paged", "-call-delay", "300ms")
	c := w.raw()
	c.legacyHandshake()
	c.send(callLine("5", "raw-0000")) // answered after 300 ms
	c.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	for n := 0; n < 2; {
		if l := c.recv(); string(l.ID) == "5" {
			n++
		}
	}
	w.end()
	w.seal()
	j := readJournal(t, w.dir)
	if h := j.history(j.attemptFor(t, "5").AttemptID); strings.Contains(h, "response") {
		t.Errorf("the call's history %q: a response under a shared id was attributed to it", h)
	}
	rep := verifyBundle(t, w.dir, w.signer.Public())
	if rep.Verdict == verify.Failed {
		t.Fatalf("verdict failed: %q", notPassed(rep))
	}
}
