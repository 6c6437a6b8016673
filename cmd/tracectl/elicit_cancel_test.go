//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestApprovalElicitCancelWhileAsking: the client cancels a call still
// awaiting its approval (the Go SDK sends notifications/cancelled when the
// call's context ends). As over HTTP, the cancellation is a plain frame
// (the server never saw the call); the approval goes on, and once approved
// the call is forwarded and runs; the bundle verifies.
func TestApprovalElicitCancelWhileAsking(t *testing.T) {
	k := newApproveKit(t)
	ctx, bundle, c := k.elicitWrap(t, "--key", k.key)
	callCtx, cancelCall := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() { held <- c.call(callCtx, "hang on") }()
	<-c.hanging
	cancelCall()
	if err := <-held; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v", err)
	}
	// A call after the cancellation is read and answered while the
	// approval still waits.
	if err := c.call(ctx, "free"); err != nil {
		t.Fatal(err)
	}
	c.release <- true
	if err := c.call(ctx, "ok then"); err != nil {
		t.Fatal(err)
	}
	c.close(t, "signed")
	if got := k.executed(t); !strings.Contains(got, "hang on") || !strings.Contains(got, "ok then") {
		t.Fatalf("the server executed:\n%s", got)
	}
	tr := transcriptOf(t, bundle)
	if !bytes.Contains(tr, []byte(`"method":"notifications/cancelled"`)) || bytes.Count(tr, []byte(`"outcome":"approved"`)) != 2 {
		t.Errorf("transcript:\n%s", tr)
	}
	k.verified(t, bundle)
}
