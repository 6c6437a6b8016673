package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
)

// Command asks by running a command (--approve-cmd): Argv, no shell, with
// the request as one JSON object on stdin and an environment of PATH
// only (none of the recorder's secrets). It answers on stdout, at most
// MaxAnswerBytes, with one JSON object:
//
//	{"approve": true, "by": "alice", "reason": "..."}
//
// approve is required; by is required to approve; no other member. A
// non-zero exit, anything else on stdout, or more of it, is Failed; no exit
// within Timeout is Timeout, and the command (its process group, where the
// platform has one) is killed.
type Command struct {
	Argv    []string
	Timeout time.Duration // 0: DefaultTimeout
	// After is the timer (nil: time.After); tests inject their own.
	After func(time.Duration) <-chan time.Time
}

// MaxPending bounds the approve commands running at once in the process:
// each may wait a whole timeout for a human, and over HTTP every client's
// call may be asked about at once. Past it, a call's approval fails at once
// (the call is denied in enforce mode) and nothing is started.
const MaxPending = 64

// pending holds a token for each approve command running.
var pending = make(chan struct{}, MaxPending)

// ParseArgv reads --approve-cmd: a JSON array of strings (for arguments
// with spaces), or else words separated by white space. No shell.
func ParseArgv(s string) ([]string, error) {
	var argv []string
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal([]byte(t), &argv); err != nil {
			return nil, fmt.Errorf("approve command: not a JSON array of strings: %v", err)
		}
	} else {
		argv = strings.Fields(s)
	}
	switch {
	case len(argv) == 0 || argv[0] == "":
		return nil, errors.New("approve command is empty")
	case len(argv) > maxArgvElements:
		return nil, fmt.Errorf("approve command: %d words, limit %d", len(argv), maxArgvElements)
	}
	return argv, nil
}

// Ask runs the command once for req.
func (c *Command) Ask(ctx context.Context, req *Request) Evidence {
	ev := Evidence{Via: ViaCommand}
	fail := func(outcome, why string) Evidence {
		ev.Outcome, ev.Reason = outcome, why
		return ev
	}
	select {
	case pending <- struct{}{}:
		defer func() { <-pending }()
	default:
		return fail(Failed, fmt.Sprintf("%d approve commands are running already: no other is started", MaxPending))
	}
	in, err := json.Marshal(req)
	if err != nil {
		return fail(Failed, "the request cannot be encoded: "+err.Error())
	}
	in = append(asciiJSON(in), '\n')
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	after := c.After
	if after == nil {
		after = time.After
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Stdin = bytes.NewReader(in)
	stdout := &capped{max: MaxAnswerBytes}
	stderr := &capped{max: maxStderrBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A child of the approver that keeps a pipe open does not hold us
	// past the kill.
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fail(Failed, "the approve command did not start: "+err.Error())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-after(timeout):
		kill(cmd)
		<-done
		return fail(Timeout, fmt.Sprintf("no answer within %s: the approve command was killed", timeout))
	case <-ctx.Done():
		kill(cmd)
		<-done
		return fail(Failed, "the recording ended before the approver answered")
	}
	if werr != nil {
		why := "the approve command failed: " + werr.Error()
		if e := strings.TrimSpace(stderr.String()); e != "" {
			why += ": " + e
		}
		return fail(Failed, why)
	}
	if stdout.over {
		return fail(Failed, fmt.Sprintf("the approve command wrote more than %d bytes", MaxAnswerBytes))
	}
	ans, err := parseAnswer(stdout.buf.Bytes())
	if err != nil {
		return fail(Failed, "the approve command's answer is not one: "+err.Error())
	}
	ev.By, ev.Reason = ans.By, ans.Reason
	if *ans.Approve {
		ev.Outcome = Approved
	} else {
		ev.Outcome = Refused
	}
	return ev
}

// asciiJSON escapes every byte of JSON text outside printable ASCII as \u
// escapes (UTF-16 pairs past the BMP). encoding/json leaves DEL, C1
// controls, bidi and other format characters raw inside strings (they
// occur nowhere else): an approver that shows its request on a terminal
// would show hostile arguments as they pretend to be, not as they are.
// The text decodes to the same value.
func asciiJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if c := b[i]; c < 0x7f {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

type answer struct {
	Approve *bool  `json:"approve"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
}

// parseAnswer reads an approver's stdout strictly: one JSON object, no
// unknown member, approve present, then only white space; and in the
// strict grammar (canon), each member once under its exact name, so that
// no lenient reading (the last of repeated members, names matched in any
// letter case, bytes after the object) decides what was answered.
func parseAnswer(b []byte) (answer, error) {
	var a answer
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, err
	}
	if dec.More() {
		return a, errors.New("more than one JSON value")
	}
	if _, err := dec.Token(); err == nil {
		return a, errors.New("more than one JSON value")
	}
	if a.Approve == nil {
		return a, errors.New(`"approve" is missing`)
	}
	doc, err := canon.Parse(bytes.TrimRight(b, " \t\r\n"), canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxAnswerBytes, MaxDepth: 2}})
	if err != nil {
		return a, fmt.Errorf("not strict JSON: %w", err)
	}
	for _, m := range doc.Root().Members() {
		if m.Name != "approve" && m.Name != "by" && m.Name != "reason" {
			return a, fmt.Errorf("member %q: want approve, by or reason", m.Name)
		}
	}
	return a, nil
}

// capped keeps the first max bytes written and notes that there were
// more (a writer never blocks the child).
type capped struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.over = true
	} else {
		c.buf.Write(p)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if c.over {
		s += "..."
	}
	return s
}
