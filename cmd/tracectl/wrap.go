package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracectl/tracectl/transcript"
)

type wrapOptions struct {
	bundle      string
	key         string
	durability  string
	retain      string
	callTimeout time.Duration
	grace       time.Duration
	maxFrame    int64
	serverName  string
	record      recordIdentity
	server      []string
}

// recordIdentity are the Trust Record members an operator may set.
type recordIdentity struct {
	subject, modelProvider, modelID, dataClass string
}

func (r *recordIdentity) flags(c *cobra.Command) {
	c.Flags().StringVar(&r.subject, "subject", "", "record subject: spiffe://... or did:... (default: the documented tracectl subject)")
	c.Flags().StringVar(&r.modelProvider, "model-provider", "", "record model.provider (default \"unknown\")")
	c.Flags().StringVar(&r.modelID, "model-id", "", "record model.model_id (default \"unknown\")")
	c.Flags().StringVar(&r.dataClass, "data-class", "", "record data_class (default \"internal\")")
}

// defaultMaxFrame bounds what one frame retains; longer frames are still
// forwarded unchanged and committed by digest and length.
const defaultMaxFrame = 16 << 20

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newWrapCmd(s, runWrap) })
}

func newWrapCmd(s streams, runF func(context.Context, streams, *wrapOptions) error) *cobra.Command {
	o := &wrapOptions{}
	cmd := &cobra.Command{
		Use:   "wrap [--bundle DIR] [--key KEY] [flags] -- SERVER [ARGS...]",
		Short: "Run a stdio MCP server behind a byte-transparent recording proxy",
		Long: `wrap starts SERVER and sits between it and the MCP client on stdin/stdout.
Every byte is forwarded unchanged in both directions. Every tools/call becomes an
attempt made durable before it is forwarded; responses are made durable before
the client sees them; tools/list pages become declaration snapshots. When the
client closes stdin (or on SIGINT/SIGTERM) the bundle is sealed and, with --key,
signed.

Put it in an MCP client's server configuration in place of the server command.`,
		Example: `  tracectl wrap --bundle run.trace --key key.pem -- npx -y @modelcontextprotocol/server-everything
  tracectl verify --trusted-key key.pem.pub run.trace`,
		RunE: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usageErr(errors.New("wrap needs the server command after --"), "tracectl wrap [flags] -- SERVER [ARGS...]")
			}
			o.server = args
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bundle, "bundle", "", "evidence bundle directory to create (default: tracectl-<UTC time>.trace in the current directory)")
	f.StringVar(&o.key, "key", "", "signing key: a PEM file or a KMS reference (<provider>://...); without it the bundle is sealed unsigned")
	f.StringVar(&o.durability, "durability", transcript.DurabilityStrict, "strict (fsync before forwarding), batch (group commit) or none")
	f.StringVar(&o.retain, "retain", transcript.RetainFull, "full (keep payload bytes) or digest (digests and lengths only)")
	f.DurationVar(&o.callTimeout, "call-timeout", 0, "record a timeout when a tools/call has no response within this time (0: never)")
	f.DurationVar(&o.grace, "grace", 5*time.Second, "how long in-flight calls may finish after the client closes its input")
	f.Int64Var(&o.maxFrame, "max-frame", defaultMaxFrame, "frames longer than this are forwarded but only their digest and length are kept")
	f.StringVar(&o.serverName, "server-name", "", "a label for the server recorded in the transcript (not an authenticated identity)")
	o.record.flags(cmd)
	return cmd
}

// validate checks every flag before anything is created or spawned.
func (o *wrapOptions) validate() error {
	switch o.durability {
	case transcript.DurabilityStrict, transcript.DurabilityBatch, transcript.DurabilityNone:
	default:
		return usageErr(fmt.Errorf("--durability %q: want strict, batch or none", o.durability), "")
	}
	switch o.retain {
	case transcript.RetainFull, transcript.RetainDigest:
	default:
		return usageErr(fmt.Errorf("--retain %q: want full or digest", o.retain), "")
	}
	if o.callTimeout < 0 || o.grace < 0 {
		return usageErr(errors.New("--call-timeout and --grace must not be negative"), "")
	}
	if o.maxFrame <= 0 {
		return usageErr(fmt.Errorf("--max-frame %d: must be positive", o.maxFrame), "")
	}
	return nil
}

// checkOutputs refuses a bundle path that exists or aliases the key.
func checkOutputs(bundle, key string) error {
	abs, err := filepath.Abs(bundle)
	if err != nil {
		return usageErr(err, "")
	}
	if _, err := os.Lstat(abs); err == nil {
		return usageErr(fmt.Errorf("bundle %q already exists", bundle), "choose a new --bundle directory: bundles are created exclusively, never reused")
	}
	if key != "" && !strings.Contains(key, "://") {
		k, err := filepath.Abs(key)
		if err == nil && (k == abs || strings.HasPrefix(k, abs+string(filepath.Separator))) {
			return usageErr(fmt.Errorf("--key %q aliases the bundle %q", key, bundle), "keep the signing key outside the bundle")
		}
	}
	return nil
}

func defaultBundleName(now time.Time) string {
	return "tracectl-" + now.UTC().Format("20060102T150405Z") + ".trace"
}

func runWrap(ctx context.Context, s streams, o *wrapOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.bundle == "" {
		o.bundle = defaultBundleName(time.Now())
		fmt.Fprintf(s.err, "tracectl: recording to %s\n", escapeTerminal(o.bundle))
	}
	if err := checkOutputs(o.bundle, o.key); err != nil {
		return err
	}
	exe, err := exec.LookPath(o.server[0])
	if err != nil {
		return usageErr(fmt.Errorf("server %q: %w", o.server[0], err), "check the command after --")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := recordSession(ctx, s, sessionOptions{
		bundle: o.bundle, key: o.key, durability: o.durability, retain: o.retain,
		callTimeout: o.callTimeout, grace: o.grace, maxFrame: o.maxFrame, serverName: o.serverName,
		record: o.record, exe: exe, args: o.server[1:],
		clientIn: s.in, clientOut: s.out,
	})
	if sum != nil {
		fmt.Fprintln(s.err, "tracectl: "+escapeTerminal(sum.String()))
	}
	return err
}
