//go:build unix

package httpproxy

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tracectl/tracectl/verify"
)

// TestApprovalCancelWhileAsking: a notifications/cancelled for a call
// still awaiting approval is a plain frame (spec/policy.md), and it does
// not use up the call's cancellation: once approved and forwarded, the
// client's cancellation of it is recorded (cancel_sent), and the server's
// answer after it is a late one with its warning.
func TestApprovalCancelWhileAsking(t *testing.T) {
	dir := t.TempDir()
	started, goOn := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	for _, p := range []string{started, goOn} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	url, called, release := blockingUpstream(t)
	policy := strings.Replace(approveYAML, "tool: echo", "tool: block", 1)
	h := newHarness(t, url, nil, withPolicy(policy, ""), func(h *harness) {
		h.approve = []string{"/bin/sh", "-c", `cat >/dev/null; echo s >'` + started + `'; read x <'` + goOn + `'; echo '{"approve":true,"by":"carol"}'`}
	})
	done := make(chan string, 1)
	go func() {
		_, body := rawPost(t, h.srv.URL, blockCall, "sess-A")
		done <- body
	}()
	// The approver is asked: cancel the call while it waits.
	if b, err := os.ReadFile(started); err != nil || string(b) != "s\n" {
		t.Fatalf("the approver's start: %q %v", b, err)
	}
	if code, _ := rawPost(t, h.srv.URL, cancel5, "sess-A"); code != http.StatusAccepted {
		t.Fatalf("the cancellation while asking: status %d", code)
	}
	if err := os.WriteFile(goOn, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Approved and forwarded: now the cancellation names a call in flight.
	<-called
	if code, _ := rawPost(t, h.srv.URL, cancel5, "sess-A"); code != http.StatusAccepted {
		t.Fatalf("the cancellation in flight: status %d", code)
	}
	close(release)
	if body := <-done; !strings.Contains(body, `"done"`) {
		t.Fatalf("the call's answer: %s", body)
	}
	reps := h.close()
	files := bundleBytes(t, reps)
	if n := countIn(files, `"kind":"cancel_sent"`); n != 1 {
		t.Fatalf("%d cancel_sent observations, want 1: the cancellation of the forwarded call was not recorded", n)
	}
	var warned int
	for _, rep := range reps {
		warned += len(rep.Find(verify.CodeAnsweredAfterCancel))
		for _, f := range rep.Find(verify.CodeApprovalMismatch) {
			t.Errorf("%s", f.Detail)
		}
	}
	if warned != 1 {
		t.Fatalf("%d answered_after_cancel warnings, want 1", warned)
	}
}
