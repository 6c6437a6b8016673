package producer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/transcript"
)

const approvePolicyFile = "version: 1\ndefault: allow\nrules:\n  - id: ask\n    tool: pay\n    action: approve\n"

// The recorder keeps an approval in its place: once, before anything else,
// only on an attempt whose decision is approve, bound to the attempt's own
// arguments digest; Denied follows only an approval that is not approved.
func TestHandleApprove(t *testing.T) {
	r, _ := openTest(t, func(o *Options) {
		o.PolicyFile = []byte(approvePolicyFile)
		o.ApproveCommand = []string{"/bin/false"} // never run here: the test asks
	})
	engine, _ := r.Policy()
	if engine.Approval() == nil {
		t.Fatal("the approve command is not the engine's approver")
	}
	ctx := context.Background()
	attempt := func(id, tool string) (*Handle, *transcript.Attempt) {
		var rec *transcript.Attempt
		h, err := r.Attempt(ctx, Call{Line: call(id, tool, `{"to":"bob"}`, ""), Decide: func(a *transcript.Attempt, s *policy.Snapshot) *transcript.Decision {
			rec = a
			d := engine.Decide(policy.Input{Tool: a.Tool, Snapshot: s})
			return &transcript.Decision{Action: d.Action, Rule: d.Rule}
		}})
		if err != nil {
			t.Fatal(err)
		}
		return h, rec
	}
	answer := func(outcome string) func(string, string) approval.Evidence {
		return func(tool, digest string) approval.Evidence {
			return approval.Evidence{Outcome: outcome, By: "erin", Via: approval.ViaCommand, ArgsDigest: "sha256:forged"}
		}
	}

	h1, a1 := attempt("1", "pay")
	var shown string
	ok, err := h1.Approve(func(tool, digest string) approval.Evidence {
		shown = digest
		if tool != "pay" {
			t.Errorf("tool %q", tool)
		}
		return approval.Evidence{Outcome: approval.Approved, By: "erin", Via: approval.ViaCommand}
	})
	if err != nil || !ok || shown == "" || shown != a1.ArgsDigest {
		t.Fatalf("approve: %v %v, shown %q, attempt's %q", ok, err, shown, a1.ArgsDigest)
	}
	if _, err := h1.Approve(answer(approval.Approved)); !errors.Is(err, ErrObservation) {
		t.Fatalf("a second approval: %v", err)
	}
	if err := h1.Denied(); !errors.Is(err, ErrObservation) {
		t.Fatalf("an approved call denied: %v", err)
	}

	h2, _ := attempt("2", "pay")
	if ok, err := h2.Approve(answer(approval.Refused)); err != nil || ok {
		t.Fatalf("refused: %v %v", ok, err)
	}
	if err := h2.Denied(); err != nil {
		t.Fatalf("a refused call denied: %v", err)
	}

	h3, _ := attempt("3", "read")
	if _, err := h3.Approve(answer(approval.Approved)); !errors.Is(err, ErrObservation) {
		t.Fatalf("an approval of an allowed call: %v", err)
	}
	if err := h3.Response(result("3", "")); err != nil {
		t.Fatal(err)
	}

	h4, _ := attempt("4", "pay")
	if err := h4.Timeout(); err != nil {
		t.Fatal(err)
	}
	if _, err := h4.Approve(answer(approval.Approved)); !errors.Is(err, ErrObservation) {
		t.Fatalf("an approval after a timeout: %v", err)
	}
	// The forged digest an asker returns is not what is recorded: the
	// approval binds the attempt's.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir(), transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	tr := string(b)
	if strings.Contains(tr, "sha256:forged") || strings.Count(tr, `"kind":"approval"`) != 2 {
		t.Fatalf("transcript:\n%s", tr)
	}
}

// TestApproveElicitHTTPRefused: ApproveElicit for a recording of a
// Streamable HTTP server is refused at Open, naming the option, rather
// than every approval failing (the HTTP proxy cannot ask its clients).
func TestApproveElicitHTTPRefused(t *testing.T) {
	o := testOptions(t)
	o.PolicyFile = []byte(approvePolicyFile)
	o.ApproveElicit = true
	o.Server.Transport = transcript.TransportHTTP
	_, err := Open(filepath.Join(t.TempDir(), "run.trace"), o)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "ApproveElicit") {
		t.Fatalf("Open: %v; want ErrInvalidOptions naming ApproveElicit", err)
	}
	o.ApproveCommand = []string{"/bin/false"}
	o.ApproveElicit = false
	r, err := Open(filepath.Join(t.TempDir(), "run2.trace"), o)
	if err != nil {
		t.Fatalf("Open with the command: %v", err)
	}
	r.Close()
}
