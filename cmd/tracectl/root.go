package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// exitError carries an exit code decided by a command's result, so the
// verdict decides the exit status and printing never does.
type exitError struct {
	code int
	err  error // nil when the command already printed everything it had to say
	hint string
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error, hint string) error { return &exitError{code: exitUsage, err: err, hint: hint} }

type streams struct {
	in       io.Reader
	out, err io.Writer
	// quiet is --quiet, read when a command runs (its flags parsed).
	quiet *bool
}

// progress is the command's progress line on stderr: shown on a terminal
// only, never with --quiet (nil: every progress method does nothing).
func (s streams) progress() *progress {
	if s.quiet != nil && *s.quiet {
		return nil
	}
	return newProgress(s.err)
}

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "tracectl",
		Short: "Record, sign and verify MCP tool-call transcripts (TRACE v0.3 profile)",
		Long: `tracectl records what AI agents' MCP tool calls did as signed, verifiable
evidence: every tools/call attempt with its own identity and an honest outcome,
complete paginated tools/list snapshots, and a signed TRACE v0.2 Trust Record
that commits to the transcript.

Flags a launch line would repeat default from the environment when not
given: TRACECTL_KEY (--key), TRACECTL_TRUSTED_KEY (--trusted-key),
TRACECTL_BUNDLE_DIR (--bundle-dir, unless --bundle), TRACECTL_RETAIN,
TRACECTL_DURABILITY and TRACECTL_CAPTURE, and under those from the config
file ($XDG_CONFIG_HOME/tracectl/config.yaml, or $TRACECTL_CONFIG: see
'tracectl help config'). A flag given wins.

verify, show, diff, seal, keygen, audit, snapshot, pin, prove, disclose,
vectors run and version take --format json: one JSON object on stdout.`,
		Example:       "  tracectl demo\n  tracectl canon --digest tools.json",
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Flags not given default from TRACECTL_* variables
		// (envdefaults.go).
		PersistentPreRunE: func(c *cobra.Command, _ []string) error { return applyEnvDefaults(c) },
	}
	if s.quiet == nil {
		s.quiet = new(bool)
	}
	root.PersistentFlags().BoolVarP(s.quiet, "quiet", "q", false, "no progress line on a terminal during a long verify, show, export, report or snapshot (results and errors are printed as ever)")
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr(err, "run '"+c.CommandPath()+" --help' for usage")
	})
	for _, add := range commands {
		root.AddCommand(add(s))
	}
	markOwnErrors(root)
	for _, c := range root.Commands() {
		if c.Name() == "verify" && c.RunE != nil {
			explainUnsealed(c)
		}
	}
	return root
}

// markOwnErrors makes every error a command's RunE returns an exitError, so
// exitCode can tell them from cobra's own (an unknown command, wrong
// arguments), which alone get the usage hint: a failure inside a command is
// not cured by reading --help. Such errors exit 5 when the network or the
// file system failed (ioFailure), else 2.
func markOwnErrors(c *cobra.Command) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := f(cmd, args)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				code := exitUsage
				if ioFailure(err) {
					code = exitIO
				}
				return &exitError{code: code, err: err}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		markOwnErrors(sub)
	}
}

// commands is filled by each command's file in init, so adding a command is
// one file.
var commands []func(streams) *cobra.Command

func run(args []string, in io.Reader, out, errw io.Writer) int {
	root := newRootCmd(streams{in: in, out: out, err: errw})
	root.SetArgs(args)
	err := root.Execute()
	return exitCode(err, errw)
}

// exitCode is the one place that maps a command's outcome to an exit status
// and prints its diagnostics.
func exitCode(err error, errw io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(errw, "tracectl: error: %s\n", escapeTerminal(ee.err.Error()))
		}
		if ee.hint != "" {
			fmt.Fprintf(errw, "tracectl: hint: %s\n", escapeTerminal(ee.hint))
		}
		return ee.code
	}
	// Cobra's own errors (unknown command, bad args) are usage errors.
	fmt.Fprintf(errw, "tracectl: error: %s\n", escapeTerminal(err.Error()))
	fmt.Fprintf(errw, "tracectl: hint: run 'tracectl --help' for usage\n")
	return exitUsage
}
