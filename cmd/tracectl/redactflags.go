package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/redact"
)

// redactOptions are the redaction flags of wrap and proxy: what is
// retained of each payload, never what is forwarded.
type redactOptions struct {
	pointers  []string
	patterns  []string
	noDefault bool
	off       bool

	rules *redact.Rules // built by build
}

func (o *redactOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&o.pointers, "redact", nil, "also redact the value at this JSON Pointer before it is retained, relative to /arguments, /result or /_meta (repeatable)")
	f.StringArrayVar(&o.patterns, "redact-pattern", nil, "also redact every string value this Go regular expression matches (repeatable)")
	f.BoolVar(&o.noDefault, "no-default-redaction", false, "turn the built-in credential detectors off (only --redact and --redact-pattern redact)")
	f.BoolVar(&o.off, "no-redaction", false, "retain payloads exactly, secrets included")
}

// build validates the flags into rules; a bad pointer or pattern is a usage
// error naming the flag and the redact code.
func (o *redactOptions) build() error {
	if o.off && (len(o.pointers) > 0 || len(o.patterns) > 0 || o.noDefault) {
		return usageErr(errors.New("--no-redaction retains payloads exactly: it does not combine with --redact, --redact-pattern or --no-default-redaction"), "")
	}
	if o.off {
		return nil
	}
	r, err := redact.NewRules(redact.Config{Pointers: o.pointers, Patterns: o.patterns, NoDefault: o.noDefault})
	if err != nil {
		var re *redact.Error
		flag := "--redact"
		if errors.As(err, &re) && (re.Code == redact.CodeBadPattern || re.Code == redact.CodeEmptyPattern) {
			flag = "--redact-pattern"
		}
		return usageErr(fmt.Errorf("%s: %w", flag, err), "")
	}
	o.rules = r
	return nil
}
