package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/internal/policy"
)

// policyOptions are the enforcement flags of wrap and proxy
// (spec/policy.md): a policy file, a lockfile of pinned declarations, and
// the mode; and the _meta keys an agent host's tool-use id is read under
// (correlationMeta), which the decisions and retry links use. load reads
// and compiles them before anything is created or spawned: a bad policy
// refuses to start, naming the rule and its place.
type policyOptions struct {
	file, pin, mode string
	correlationMeta []string
	// loaded: the exact bytes, for producer.Options
	policy, lock []byte
	approve      approveOptions // --approve-cmd, --approve-timeout (approveflags.go)
}

func (p *policyOptions) flags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&p.file, "policy", "", "decide every tools/call under this policy file (YAML or JSON; spec/policy.md) before it is forwarded")
	f.StringVar(&p.pin, "pin", "", "deny calls to tools whose declaration differs from this lockfile (tracectl pin), or that it does not pin")
	f.StringVar(&p.mode, "policy-mode", "", "enforce (the default: a denied call is not forwarded) or audit (decide and record, forward anyway)")
	p.approve.flags(c)
	f.StringArrayVar(&p.correlationMeta, "correlation-meta", nil, "a _meta key under which the agent host puts its own tool-use id (beyond claudecode/toolUseId; repeatable, at most 8): recorded as correlation.tool_use_id, a reused one links a retry")
}

// load reads, parses and compiles the policy and the lock.
func (p *policyOptions) load() error {
	switch p.mode {
	case "", policy.ModeEnforce, policy.ModeAudit:
	default:
		return usageErr(fmt.Errorf("--policy-mode %q", p.mode), "use --policy-mode enforce or audit")
	}
	if len(p.correlationMeta) > 8 {
		return usageErr(fmt.Errorf("--correlation-meta given %d times", len(p.correlationMeta)), "give at most 8 keys")
	}
	for i, k := range p.correlationMeta {
		if !metaKeyShape(k) {
			return usageErr(fmt.Errorf("--correlation-meta %q", escapeTerminal(k)), "a _meta key is 1 to 128 letters, digits, '.', '_', '-' or '/', and not claudecode/toolUseId (read already)")
		}
		if slices.Contains(p.correlationMeta[:i], k) {
			return usageErr(fmt.Errorf("--correlation-meta %q given twice", escapeTerminal(k)), "give each key once")
		}
	}
	if p.mode != "" && p.file == "" && p.pin == "" {
		return usageErr(errors.New("--policy-mode needs --policy or --pin"), "")
	}
	if p.file != "" {
		b, err := readBounded(p.file, policy.MaxPolicyBytes)
		if err != nil {
			return usageErr(fmt.Errorf("--policy: %w", err), "")
		}
		pol, err := policy.Parse(b)
		if err != nil {
			return usageErr(fmt.Errorf("--policy %s: %w", p.file, err), "fix the rule named, then start again: a policy that does not compile never starts")
		}
		if err := p.approve.load(p.file, pol); err != nil {
			return err
		}
		p.policy = b
	} else if err := p.approve.load("", nil); err != nil {
		return err
	}
	if p.pin != "" {
		b, err := readBounded(p.pin, policy.MaxLockBytes)
		if err != nil {
			return usageErr(fmt.Errorf("--pin: %w", err), "")
		}
		if _, err := policy.ParseLock(b); err != nil {
			return usageErr(fmt.Errorf("--pin %s: %w", p.pin, err), "make the lockfile with tracectl pin BUNDLE|SNAPSHOT --out FILE")
		}
		p.lock = b
	}
	return nil
}

// deniedText is ", N denied" for a summary line, or "" when none was.
func deniedText(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d denied", n)
}

// readBounded reads a whole file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: longer than %d bytes", path, max)
	}
	return b, nil
}

// metaKeyShape is the shape transcript's header check holds a
// tool_use_meta key to (letters, digits, . _ - /; 1 to 128 bytes), minus
// the key the recorder reads already.
func metaKeyShape(k string) bool {
	if len(k) == 0 || len(k) > 128 || k == "claudecode/toolUseId" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}
