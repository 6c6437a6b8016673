//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

// Approval end to end (spec/policy.md, "Approval"): the real tracectl
// wrap, with a policy whose rule asks for approval and a real approve
// command (a shell script run as argv), between the Go SDK client and
// sdklogserver, which logs what it executes. Only an approved call
// executes; a refusal, a timeout, a failing approver and one that writes
// garbage or too much deny the call (-32094 naming the rule and why); the
// bundle verifies with every approval checked; a producer with the key
// that rewrites an approval and re-signs is caught (approval_mismatch).

const approvePolicy = `version: 1
default: allow
rules:
  - id: needs-ok
    tool: echo
    when: 'args.message != "free"'
    action: approve
`

// A GitHub token shape the built-in redaction hides.
const approveSecret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"

// approveKit is a policyKit with the approval policy and an approver
// script that logs each request it is given, and answers by the message:
// ok* (and a redacted one) approve, no* refuse, hang* never answer, garbage* and flood* write
// what is not an answer, exit* fails.
type approveKit struct {
	*policyKit
	approverLog string
	approveCmd  string
}

func newApproveKit(t *testing.T) *approveKit {
	t.Helper()
	k := &approveKit{policyKit: newPolicyKit(t)}
	if err := os.WriteFile(k.policy, []byte(approvePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	k.approverLog = filepath.Join(k.dir, "approver.jsonl")
	script := `req=$(cat); printf '%s\n' "$req" >> "$1"
case "$req" in
*'"message":"ok'* | *'"message":"[REDACTED:'*) echo '{"approve":true,"by":"alice\u001b[31m","reason":"looks fine"}' ;;
*'"message":"no'*) echo '{"approve":false,"by":"bob","reason":"not today"}' ;;
*'"message":"hang'*) exec sleep 600 ;;
*'"message":"garbage'*) echo 'yes please' ;;
*'"message":"flood'*) head -c 100000 /dev/zero | tr '\0' x ;;
*'"message":"exit'*) echo 'approver broke' >&2; exit 3 ;;
*) echo "unexpected request: $req" >&2; exit 9 ;;
esac`
	argv, err := json.Marshal([]string{"/bin/sh", "-c", script, "approver", k.approverLog})
	if err != nil {
		t.Fatal(err)
	}
	k.approveCmd = string(argv)
	return k
}

// requests are the approval requests the approver was given.
func (k *approveKit) requests(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(k.approverLog)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("approver request %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestApprovalStdioGoSDK(t *testing.T) {
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	msgs := []string{"ok go", "free", "no thanks", "garbage", "flood", "exit"}
	errs := goSDKSession(t, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-cmd", k.approveCmd}), msgs...)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the approved call: %v; the call no approve rule matched: %v", errs[0], errs[1])
	}
	for i, want := range map[int]string{
		2: "tracectl: denied by policy rule needs-ok: approval refused: not today",
		3: "tracectl: denied by policy rule needs-ok: approval failed: the approve command's answer is not one: ",
		4: "tracectl: denied by policy rule needs-ok: approval failed: the approve command wrote more than 4096 bytes",
		5: "tracectl: denied by policy rule needs-ok: approval failed: the approve command failed: exit status 3: approver broke",
	} {
		if msg := deniedBy(t, errs[i], "needs-ok"); !strings.HasPrefix(msg, want) {
			t.Errorf("call %q: the client was told %q, want %q", msgs[i], msg, want)
		}
	}
	got := k.executed(t)
	for i, m := range msgs {
		if ran := strings.Contains(got, `"`+m); ran != (i < 2) {
			t.Errorf("the server executed %q: %v, want %v; its log:\n%s", m, ran, i < 2, got)
		}
	}
	// The approver was asked about the approve rule's calls only, with the
	// attempt, the rule and the arguments.
	reqs := k.requests(t)
	if len(reqs) != 5 {
		t.Fatalf("the approver was asked %d times, want 5: %v", len(reqs), reqs)
	}
	first := reqs[0]
	raw, _ := json.Marshal(first)
	if !strings.Contains(string(raw), `"arguments":{"message":"ok go"}`) {
		t.Errorf("the approver saw %s", raw)
	}
	if first["attempt_id"] != "a1" || first["tool"] != "echo" || first["rule"] != "needs-ok" || first["version"] != float64(1) {
		t.Errorf("approval request %s", raw)
	}
	digest, _ := first["args_digest"].(string)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(digest) {
		t.Fatalf("args_digest %q", digest)
	}
	// The transcript binds the approval to the attempt's own arguments
	// digest, with the approver's answer.
	tr, err := os.ReadFile(filepath.Join(bundle, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"args_digest":"` + digest + `"`, // the attempt line's
		`{"approval":{"args_digest":"` + digest + `","by":"alice\u001b[31m","outcome":"approved","reason":"looks fine","via":"command"},`,
		`"approval":{"args_digest":"sha256:`, `"outcome":"refused","reason":"not today","via":"command"}`,
		`"decision":{"action":"approve","declaration":"sha256:`,
	} {
		if !bytes.Contains(tr, []byte(want)) {
			t.Errorf("transcript lacks %s:\n%s", want, tr)
		}
	}
	rep := k.verified(t, bundle)
	for _, want := range []string{"decisions_verified: 6 decisions (0 deny)", "counts: 6 attempts (2 responses, 0 transport failures, 0 unknown, 4 denied)"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	// export says why the denied calls were denied.
	csv, err := exec.Command(k.bin, "export", "--format", "jsonl", bundle).CombinedOutput()
	if err != nil || !bytes.Contains(csv, []byte(`"outcome":"denied","outcome_class":"denied","outcome_label":"denied (rule needs-ok: approval refused)"`)) || !bytes.Contains(csv, []byte(`"detail":"rule needs-ok: approval failed"`)) {
		t.Errorf("export: %v\n%s", err, csv)
	}
	// show names the approval, with the approver's hostile "by" escaped:
	// the ESC never reaches a terminal.
	out, err := exec.Command(k.bin, "show", "--attempt", "a1", bundle).CombinedOutput()
	if err != nil || bytes.ContainsRune(out, 0x1b) || !bytes.Contains(out, []byte(`approval approved by "alice\x1b[31m" via command (arguments `+digest+"): looks fine (line ")) {
		t.Fatalf("show: %v\n%q", err, out)
	}
}

// TestApprovalTimeout: an approver that never answers is killed at
// --approve-timeout; the call is denied, never executes, and the bundle
// verifies with the timeout recorded.
func TestApprovalTimeout(t *testing.T) {
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	errs := goSDKSession(t, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-cmd", k.approveCmd, "--approve-timeout", "300ms"}), "hang on")
	if msg := deniedBy(t, errs[0], "needs-ok"); msg != "tracectl: denied by policy rule needs-ok: approval timed out" {
		t.Errorf("the client was told %q", msg)
	}
	if got := k.executed(t); strings.Contains(got, "hang") {
		t.Fatalf("the server executed:\n%s", got)
	}
	tr, err := os.ReadFile(filepath.Join(bundle, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tr, []byte(`"outcome":"timeout","reason":"no answer within 300ms: the approve command was killed","via":"command"}`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	if rep := k.verified(t, bundle); !strings.Contains(rep, "1 denied)") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestApprovalAudit: in audit mode the approver is asked and its refusal
// recorded, and the call is forwarded anyway; the bundle verifies.
func TestApprovalAudit(t *testing.T) {
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	errs := goSDKSession(t, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--policy-mode", "audit", "--approve-cmd", k.approveCmd}), "no way")
	if errs[0] != nil {
		t.Fatalf("audit mode: %v", errs[0])
	}
	if got := k.executed(t); !strings.Contains(got, "no way") {
		t.Fatalf("the server executed:\n%s\nwant the call, forwarded in audit mode", got)
	}
	if len(k.requests(t)) != 1 {
		t.Fatalf("the approver was not asked once")
	}
	if rep := k.verified(t, bundle); !strings.Contains(rep, "1 decisions (0 deny) re-derived from the committed policy and lock (mode audit)") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestApprovalNeedsApprover: a policy with an approve rule and no
// --approve-cmd never starts (exit 2), naming the rule; --approve-cmd
// without a policy neither.
func TestApprovalNeedsApprover(t *testing.T) {
	k := newApproveKit(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--policy", k.policy}, `rule 0 ("needs-ok"): action "approve" needs an approver: start with --approve-cmd`},
		{[]string{"--approve-cmd", "/bin/true"}, "--approve-cmd needs --policy"},
		{[]string{"--policy", k.policy, "--approve-cmd", "[1]"}, "--approve-cmd: approve command: not a JSON array of strings"},
		{[]string{"--policy", k.policy, "--approve-cmd", "/bin/true", "--approve-timeout", "-1s"}, "--approve-timeout -1s"},
	} {
		argv := k.wrap(filepath.Join(k.dir, "never.trace"), tc.flags)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, want exit 2 naming %q:\n%s", tc.flags, err, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(k.dir, "never.trace")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused start made a bundle: %v", err)
	}
}

// TestApprovalHostileProducer: a producer holding the key rewrites an
// approval (a refusal as an approval, or the approved arguments' digest)
// and re-signs. The signature verifies; the approval does not fit its
// attempt, so verify fails with approval_mismatch on it.
func TestApprovalHostileProducer(t *testing.T) {
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	goSDKSessionUnsigned(t, k.wrap(bundle, []string{"--policy", k.policy, "--approve-cmd", k.approveCmd}), "ok go", "no stop")
	orig, err := os.ReadFile(filepath.Join(bundle, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, attempt, why string }{
		{"refusal as approval", `"outcome":"refused"`, `"outcome":"approved"`, "a2", "although its approval approved it"},
		{"other arguments", "", "", "a1", ""}, // from and to below
		{"approval as refusal, forwarded", `"outcome":"approved"`, `"outcome":"refused"`, "a1", "but its approval says refused: in enforce mode the call was forwarded without an approval"},
		{"approval of an allowed call", `"decision":{"action":"approve"`, `"decision":{"action":"allow"`, "a1", "but its decision is not approve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := tc.from, tc.to
			if tc.name == "other arguments" {
				// Replace the first approval's digest with another.
				re := regexp.MustCompile(`"approval":\{"args_digest":"sha256:[0-9a-f]{64}"`)
				loc := re.FindIndex(orig)
				if loc == nil {
					t.Fatal("no approval in the transcript")
				}
				from, to = string(orig[loc[0]:loc[1]]), `"approval":{"args_digest":"sha256:`+strings.Repeat("0", 64)+`"`
				tc.why = "binds arguments sha256:" + strings.Repeat("0", 64)
			}
			if !bytes.Contains(orig, []byte(from)) {
				t.Fatalf("the transcript has no %s:\n%s", from, orig)
			}
			tampered := bytes.Replace(orig, []byte(from), []byte(to), 1)
			out := k.resignFails(t, bundle, tampered)
			if !strings.Contains(string(out), "signature_valid") || !strings.Contains(string(out), "fail        approval_mismatch [attempt "+tc.attempt+"]") || !strings.Contains(string(out), tc.why) {
				t.Fatalf("want a valid signature and approval_mismatch on %s (%s):\n%s", tc.attempt, tc.why, out)
			}
		})
	}
}

// TestApprovalRedacted: the approver is shown the arguments as the bundle
// keeps them: a secret the redaction hides is hidden from it too. (The
// decision on a redacted request is decision_unverifiable, as any; the
// approval still binds the attempt's arguments digest, and fits.)
func TestApprovalRedacted(t *testing.T) {
	k := newApproveKit(t)
	bundle := filepath.Join(k.dir, "b.trace")
	errs := goSDKSession(t, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-cmd", k.approveCmd}), "ok "+approveSecret)
	if errs[0] != nil {
		t.Fatalf("the approved call: %v", errs[0])
	}
	reqs := k.requests(t)
	raw, _ := json.Marshal(reqs)
	if len(reqs) != 1 || strings.Contains(string(raw), approveSecret) || !strings.Contains(string(raw), `"arguments":{"message":"[REDACTED:github_token]"}`) || !strings.Contains(string(raw), `"redacted":["/params/arguments/message"]`) {
		t.Errorf("the approver saw %s: want the secret redacted", raw)
	}
	if got := k.executed(t); !strings.Contains(got, approveSecret) {
		t.Errorf("the server did not execute the approved call (redaction changes what is kept, never what is forwarded):\n%s", got)
	}
	out, err := exec.Command(k.bin, "verify", "--trusted-key", k.key+".pub", bundle).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.Contains(string(out), "approval_mismatch") || !strings.Contains(string(out), "decision_unverifiable [attempt a1]") {
		t.Fatalf("verify: %v, want exit 3 (decision_unverifiable), no approval_mismatch\n%s", err, out)
	}
}

// TestApprovalStdioTypeScript: the TypeScript SDK v1 client likewise: its
// approved call runs, and its application sees the refused one rejected
// with -32094, the rule and the refusal.
func TestApprovalStdioTypeScript(t *testing.T) {
	sdk := tsclient.V1(t)
	k := newApproveKit(t)
	argv, err := json.Marshal([]string{"/bin/sh", "-c", `case "$(cat)" in *'"message":"through'*) echo '{"approve":true,"by":"frank"}' ;; *) echo '{"approve":false,"by":"frank","reason":"not that"}' ;; esac`})
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(k.dir, "b.trace")
	c := tsclient.Start(t, sdk, k.env(), "denied", k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-cmd", string(argv)})...)
	c.Expect(t, "connected", 30*time.Second)
	c.Expect(t, "listed", 10*time.Second)
	c.Expect(t, "echo", 10*time.Second)
	e := c.Expect(t, "denied", 10*time.Second)
	if !strings.HasPrefix(e.Outcome, "rejected: code=-32094 ") || !strings.Contains(e.Outcome, `"rule":"needs-ok"`) || !strings.Contains(e.Outcome, `"detail":"approval refused: not that"`) {
		t.Fatalf("the refused call as the TypeScript client saw it: %s", e.Outcome)
	}
	c.Closed(t)
	if got := k.executed(t); !strings.Contains(got, "through tracectl") || strings.Contains(got, "forbidden") {
		t.Fatalf("the server executed:\n%s\nwant the approved call only", got)
	}
	if rep := k.verified(t, bundle); !strings.Contains(rep, "decisions_verified: 2 decisions (0 deny)") || !strings.Contains(rep, "1 denied)") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestApprovalSIGTERM: SIGTERM while the approver is still deciding (it
// never answers; the approval timeout is the default 60 s) gives the
// approver up: wrap exits 0 at once, the call is denied and never
// executed, the approval is recorded as failed, and the bundle verifies.
func TestApprovalSIGTERM(t *testing.T) {
	k := newApproveKit(t)
	// The approver appends its request to a FIFO: reading it is the event
	// that the approver was asked.
	if err := syscall.Mkfifo(k.approverLog, 0o600); err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(k.approverLog) // until the approver's write ends
		asked <- string(b)
	}()
	bundle := filepath.Join(k.dir, "b.trace")
	outR, outW := io.Pipe()
	defer outW.Close()
	w := k.startArgs(t, outW, k.wrap(bundle, []string{"--key", k.key, "--policy", k.policy, "--approve-cmd", k.approveCmd})[1:]...)
	go io.Copy(io.Discard, outR)
	if _, err := io.WriteString(w.in, modernCall(1, "echo", `{"message":"hang on"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-asked:
		if !strings.Contains(req, `"rule":"needs-ok"`) {
			t.Fatalf("the approver was asked %q", req)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the approver was never asked; stderr:\n%s", w.stderr)
	}
	t0 := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, w.stderr)
	}
	if took := time.Since(t0); took >= 5*time.Second {
		t.Errorf("SIGTERM to exit took %s: the session waited for the approver", took)
	}
	if got := k.executed(t); strings.Contains(got, "hang") {
		t.Fatalf("the server executed:\n%s", got)
	}
	tr, err := os.ReadFile(filepath.Join(bundle, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tr, []byte(`"outcome":"failed","reason":"the recording ended before the approver answered"`)) {
		t.Errorf("transcript:\n%s", tr)
	}
	k.verified(t, bundle)
}
