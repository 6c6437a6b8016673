//go:build unix

package approval

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func sh(script string) *Command {
	return &Command{Argv: []string{"/bin/sh", "-c", script}}
}

func ask(c *Command) Evidence {
	g := &Gate{Asker: c, Arguments: func([]byte) (json.RawMessage, []string, string) {
		return json.RawMessage(`{"to":"bob"}`), nil, ""
	}}
	return g.Ask(context.Background(), nil, "a7", "transfer", "big", digest, []byte(`{"jsonrpc":"2.0"}`+"\n"))
}

func TestCommandAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, script     string
		outcome, by, why string
	}{
		{"approve", `echo '{"approve":true,"by":"alice","reason":"ok"}'`, Approved, "alice", "ok"},
		{"refuse", `echo '{"approve":false,"by":"bob","reason":"no"}'`, Refused, "bob", "no"},
		{"refuse without by", `echo '{"approve":false}'`, Refused, "", ""},
		{"approve without by", `echo '{"approve":true}'`, Failed, "", "the approver approved without saying who (by)"},
		{"garbage", `echo 'yes'`, Failed, "", "the approve command's answer is not one: invalid character"},
		{"two values", `echo '{"approve":true,"by":"a"} {"approve":false}'`, Failed, "", "the approve command's answer is not one: more than one JSON value"},
		{"unknown member", `echo '{"approve":true,"by":"a","scope":"all"}'`, Failed, "", `the approve command's answer is not one: json: unknown field "scope"`},
		{"no approve", `echo '{"by":"a"}'`, Failed, "", `the approve command's answer is not one: "approve" is missing`},
		{"approve not a bool", `echo '{"approve":"yes","by":"a"}'`, Failed, "", "the approve command's answer is not one: json: cannot unmarshal"},
		{"nothing", `true`, Failed, "", "the approve command's answer is not one: EOF"},
		{"too much", `head -c 5000 /dev/zero | tr '\0' ' '; echo '{"approve":true,"by":"a"}'`, Failed, "", "the approve command wrote more than 4096 bytes"},
		{"exit", `echo '{"approve":true,"by":"a"}'; echo broken >&2; exit 4`, Failed, "", "the approve command failed: exit status 4: broken"},
		{"stderr bounded", `head -c 100000 /dev/zero | tr '\0' e >&2; exit 1`, Failed, "", "the approve command failed: exit status 1: eeee"},
		{"long by", `printf '{"approve":true,"by":"%0200d"}' 0`, Approved, strings.Repeat("0", 125) + "...", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := ask(sh(tc.script))
			if ev.Outcome != tc.outcome || ev.By != tc.by || !strings.HasPrefix(ev.Reason, tc.why) || ev.Via != ViaCommand || ev.ArgsDigest != digest {
				t.Fatalf("%+v, want %s by %q why %q", ev, tc.outcome, tc.by, tc.why)
			}
			if len(ev.Reason) > MaxReasonBytes || ev.Check() != "" {
				t.Fatalf("evidence %+v does not check: %s", ev, ev.Check())
			}
		})
	}
	if ev := ask(&Command{Argv: []string{"/nonexistent/approver"}}); ev.Outcome != Failed || !strings.HasPrefix(ev.Reason, "the approve command did not start: ") {
		t.Fatalf("%+v", ev)
	}
}

// The command reads the request on stdin, and runs with PATH only: none of
// the recorder's environment.
func TestCommandRequestAndEnv(t *testing.T) {
	t.Setenv("TRACECTL_TEST_SECRET", "s3cret")
	dir := t.TempDir()
	got := filepath.Join(dir, "req.json")
	envf := filepath.Join(dir, "env")
	c := &Command{Argv: []string{"/bin/sh", "-c", `cat > "$1"; env > "$2"; echo '{"approve":false}'`, "approver", got, envf}}
	if ev := ask(c); ev.Outcome != Refused {
		t.Fatalf("%+v", ev)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"attempt_id":"a7","tool":"transfer","rule":"big","args_digest":"` + digest + `","arguments":{"to":"bob"}}` + "\n"
	if string(b) != want {
		t.Errorf("the approver read %s, want %s", b, want)
	}
	env, err := os.ReadFile(envf)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "s3cret") || !strings.Contains(string(env), "PATH="+os.Getenv("PATH")+"\n") {
		t.Errorf("the approver's environment:\n%s", env)
	}
}

// No answer within the timeout: the command (and what it started) is
// killed, and the outcome is timeout. The timer is the test's: it fires
// once the command's own child is running; that child holds a FIFO open
// for writing, so its end is seen as the FIFO's end of file.
func TestCommandTimeout(t *testing.T) {
	dir := t.TempDir()
	started, held := filepath.Join(dir, "started"), filepath.Join(dir, "held")
	for _, f := range []string{started, held} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var holder *os.File
	var asked time.Duration
	c := &Command{
		Argv:    []string{"/bin/sh", "-c", `sleep 600 3>"$2" & echo started > "$1"; wait`, "approver", started, held},
		Timeout: 42 * time.Second,
		After: func(d time.Duration) <-chan time.Time {
			asked = d
			if _, err := os.ReadFile(started); err != nil {
				t.Error(err)
			}
			var err error
			if holder, err = os.Open(held); err != nil { // returns once the child opened it
				t.Error(err)
			}
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		},
	}
	ev := ask(c)
	if ev.Outcome != Timeout || ev.Reason != "no answer within 42s: the approve command was killed" || asked != 42*time.Second {
		t.Fatalf("%+v (timer %s)", ev, asked)
	}
	if holder == nil {
		t.Fatal("the command's child never ran")
	}
	defer holder.Close()
	// End of file: the child in the command's process group was killed
	// too (else this read blocks, and the test times out).
	if b, err := io.ReadAll(holder); err != nil || len(b) != 0 {
		t.Fatalf("%q %v", b, err)
	}
}

func TestParseArgv(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"/usr/bin/approve --team ops", []string{"/usr/bin/approve", "--team", "ops"}, ""},
		{`["/opt/my approver/bin", "a b"]`, []string{"/opt/my approver/bin", "a b"}, ""},
		{"  ", nil, "approve command is empty"},
		{`[""]`, nil, "approve command is empty"},
		{`[1]`, nil, "not a JSON array of strings"},
		{strings.Repeat("x ", 65), nil, "65 words, limit 64"},
	} {
		got, err := ParseArgv(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: %q %v", tc.in, got, err)
		}
	}
}

func TestEvidenceCheck(t *testing.T) {
	ok := Evidence{Outcome: Approved, By: "alice", ArgsDigest: digest, Via: ViaCommand}
	if ok.Check() != "" {
		t.Fatal(ok.Check())
	}
	for _, tc := range []struct {
		mod  func(*Evidence)
		want string
	}{
		{func(e *Evidence) { e.Outcome = "maybe" }, "approval.outcome"},
		{func(e *Evidence) { e.Via = "" }, "approval.via"},
		{func(e *Evidence) { e.ArgsDigest = "sha256:00" }, "approval.args_digest"},
		{func(e *Evidence) { e.By = strings.Repeat("b", 129) }, "approval.by"},
		{func(e *Evidence) { e.By = "\xff" }, "approval.by"},
		{func(e *Evidence) { e.Reason = strings.Repeat("r", 513) }, "approval.reason"},
		{func(e *Evidence) { e.By = "" }, "an approval names who approved"},
	} {
		e := ok
		tc.mod(&e)
		if got := e.Check(); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", e, got, tc.want)
		}
	}
	if ArgsDigestOf("a", "b", "c") != "a" || ArgsDigestOf("", "b", "c") != "c" || ArgsDigestOf("", "b", "") != "b" {
		t.Error("ArgsDigestOf")
	}
}

type fixed Evidence

func (f fixed) Ask(context.Context, *Request) Evidence { return Evidence(f) }

// An asker's answer that is not evidence (an unknown outcome) is a
// failure, never an approval.
func TestGateNormalizes(t *testing.T) {
	g := &Gate{Asker: fixed{Outcome: "yes", By: "x", Via: ViaCommand}}
	ev := g.Ask(context.Background(), nil, "a1", "t", "r", digest, nil)
	if ev.Outcome != Failed || !strings.HasPrefix(ev.Reason, "the approver's answer is not evidence: approval.outcome") || ev.Check() != "" {
		t.Fatalf("%+v", ev)
	}
}
