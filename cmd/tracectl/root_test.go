package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestOwnErrorsGetNoUsageHint: a failure inside a command is not cured by
// reading --help: only cobra's own errors (an unknown command) get that
// hint. Both keep exit status 2.
func TestOwnErrorsGetNoUsageHint(t *testing.T) {
	root := &cobra.Command{Use: "tracectl", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(&cobra.Command{Use: "fails", RunE: func(*cobra.Command, []string) error {
		return errors.New("disk on fire")
	}})
	markOwnErrors(root)
	for _, tc := range []struct {
		args     []string
		wantHint bool
	}{
		{[]string{"fails"}, false},
		{[]string{"no-such-command"}, true},
	} {
		root.SetArgs(tc.args)
		var errw bytes.Buffer
		code := exitCode(root.Execute(), &errw)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d", tc.args, code, exitUsage)
		}
		if got := strings.Contains(errw.String(), "tracectl: hint: run 'tracectl --help'"); got != tc.wantHint {
			t.Errorf("%q: usage hint %v, want %v:\n%s", tc.args, got, tc.wantHint, errw.String())
		}
	}
}
