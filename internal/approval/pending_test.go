//go:build unix

package approval

import (
	"strings"
	"testing"
)

// TestCommandPendingBounded: each approval runs a process that may wait a
// whole timeout for a human, and over HTTP every client's call may ask at
// once. Past MaxPending approve commands running in the process, another
// call's approval fails at once (the call is denied) and nothing is
// started; a slot freed is taken again.
func TestCommandPendingBounded(t *testing.T) {
	for range MaxPending {
		pending <- struct{}{}
	}
	ev := ask(sh(`echo '{"approve":true,"by":"a"}'`))
	if ev.Outcome != Failed || !strings.Contains(ev.Reason, "approve commands are running already") {
		<-pending
		t.Fatalf("%+v, want failed: too many approvals pending", ev)
	}
	<-pending
	if ev := ask(sh(`echo '{"approve":true,"by":"a"}'`)); ev.Outcome != Approved {
		t.Fatalf("%+v after a slot was freed, want approved", ev)
	}
	for range MaxPending - 1 {
		<-pending
	}
}
