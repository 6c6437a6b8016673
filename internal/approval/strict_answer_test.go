//go:build unix

package approval

import (
	"strings"
	"testing"
)

// TestCommandAnswerStrict: an answer whose meaning depends on how a lenient
// parser reads it (a member repeated, a name in another letter case, a
// stray closing bracket after the object) is no answer: an approver that
// splices a human's text into its JSON cannot be made to approve by it.
func TestCommandAnswerStrict(t *testing.T) {
	for name, script := range map[string]string{
		"repeated approve": `echo '{"approve":false,"by":"x","approve":true}'`,
		"repeated by":      `echo '{"approve":true,"by":"alice","by":"mallory"}'`,
		"case variant":     `echo '{"APPROVE":true,"by":"a"}'`,
		"case variant by":  `echo '{"approve":true,"By":"a"}'`,
		"trailing brace":   `echo '{"approve":true,"by":"a"}}'`,
		"trailing bracket": `echo '{"approve":true,"by":"a"}]'`,
		"not an object":    `echo 'true'`,
	} {
		t.Run(name, func(t *testing.T) {
			ev := ask(sh(script))
			if ev.Outcome != Failed || !strings.HasPrefix(ev.Reason, "the approve command's answer is not one: ") {
				t.Fatalf("%+v, want failed: the answer is not one", ev)
			}
		})
	}
}

// TestCommandAnswerWhitespace: white space around the one object is still
// an answer.
func TestCommandAnswerWhitespace(t *testing.T) {
	if ev := ask(sh(`printf ' \t{"approve":true, "by":"a"}\r\n\n'`)); ev.Outcome != Approved || ev.By != "a" {
		t.Fatalf("%+v, want approved by a", ev)
	}
}
