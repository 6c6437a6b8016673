package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
)

// approveOptions are the approval flags of wrap and proxy (spec/policy.md,
// "Approval"): the command asked before a call an approve rule matched is
// forwarded, and how long it has to answer.
type approveOptions struct {
	cmd     string
	elicit  bool          // --approve-elicit: ask the client (elicitation/create) when it declared the capability
	timeout time.Duration // 0: approval.DefaultTimeout
	argv    []string      // loaded: cmd as argv
}

func (a *approveOptions) flags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&a.cmd, "approve-cmd", "", "ask this command (argv: words, or a JSON array of strings; no shell) before forwarding a call a policy rule with action approve matched: a JSON request on its stdin, {\"approve\":true|false,\"by\":\"...\",\"reason\":\"...\"} on its stdout")
	f.BoolVar(&a.elicit, "approve-elicit", false, "ask the MCP client itself (elicitation/create) before forwarding a call a policy rule with action approve matched, when the client declared the elicitation capability; with --approve-cmd too, a client that did not is asked through the command, else the call is denied (wrap only)")
	f.DurationVar(&a.timeout, "approve-timeout", 0, "how long --approve-cmd or the client (--approve-elicit) has to answer (0: the default, 60s): no answer in time denies the call (the command is killed)")
}

// load reads the flags against the policy (nil: none): a policy with an
// approve rule needs --approve-cmd or --approve-elicit, and either needs a
// policy.
func (a *approveOptions) load(file string, pol *policy.Policy) error {
	if a.timeout < 0 {
		return usageErr(fmt.Errorf("--approve-timeout %s", a.timeout), "give a positive duration, e.g. 60s (0: the default, 60s)")
	}
	if a.cmd != "" {
		argv, err := approval.ParseArgv(a.cmd)
		if err != nil {
			return usageErr(fmt.Errorf("--approve-cmd: %w", err), "")
		}
		a.argv = argv
	}
	switch {
	case pol == nil && a.argv != nil:
		return usageErr(errors.New("--approve-cmd needs --policy"), "an approver is asked about the calls a policy rule with action approve matches")
	case pol == nil && a.elicit:
		return usageErr(errors.New("--approve-elicit needs --policy"), "an approver is asked about the calls a policy rule with action approve matches")
	case pol == nil:
		return nil
	case a.argv == nil && !a.elicit:
		if err := policy.NewEngine(pol, nil).CheckApproval(); err != nil {
			return usageErr(fmt.Errorf("--policy %s: %w", escapeTerminal(file), err), "give --approve-cmd or --approve-elicit, or change the rule's action to allow or deny")
		}
	}
	return nil
}

// approvalText is an approval observation's answer for show (escaped by
// the caller, as every hostile string on its way to a terminal).
func approvalText(ap *approval.Evidence) string {
	s := " " + ap.Outcome
	if ap.By != "" {
		s += " by " + strconv.Quote(ap.By)
	}
	s += " via " + ap.Via + " (arguments " + ap.ArgsDigest + ")"
	if ap.Reason != "" {
		s += ": " + ap.Reason
	}
	return s
}
