package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/producer/stdio"
	"github.com/tracectl/tracectl/transcript"
)

type wrapOptions struct {
	bundle          string
	bundleDir       string
	key             string
	keys            keyOptions
	durability      string
	retain          string
	redaction       redactOptions
	callTimeout     time.Duration
	capture         string
	grace           time.Duration
	shutdownTimeout time.Duration
	maxFrame        int64
	serverName      string
	record          recordIdentity
	server          []string
	checkpoint      checkpointEvery
	anchor          anchorOptions
	otlpEndpoint    string
	otlpSignals     string
	policy          policyOptions
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

// defaultMaxFrame bounds what one frame retains; a longer frame is
// committed by digest and length.
const defaultMaxFrame = 16 << 20

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newWrapCmd(s, runWrap) })
}

func newWrapCmd(s streams, runF func(context.Context, streams, *wrapOptions) error) *cobra.Command {
	o := &wrapOptions{}
	cmd := &cobra.Command{
		Use:   "wrap [--bundle-dir DIR | --bundle DIR] [--key KEY] [flags] SERVER [ARGS...]",
		Short: "Run a stdio MCP server behind a recording reference monitor",
		Long: `wrap starts SERVER and sits between it and the MCP client on stdin/stdout.
Every frame, in either direction, is committed to the transcript before it is
passed on, unchanged. Every tools/call becomes an attempt made durable before
it is forwarded; responses are made durable before the client sees them;
tools/list pages become declaration snapshots. A client frame that is not
exactly one strict JSON-RPC object on one line (NaN, a BOM, a batch, a member
name in another letter case, a repeated member, ...) is never forwarded: it is
recorded as refused and answered with a -32600 error naming the rule.

The first argument that is not a flag starts the server's command line:
everything after it is the server's, its flags included (a "--" before it is
accepted too). Put it in an MCP client's server configuration in place of the
server command.

Each start records into a new bundle: --bundle names it; --bundle-dir (default
$XDG_STATE_HOME/tracectl/bundles, else ~/.local/state/tracectl/bundles) gets a
fresh tracectl-<UTC time to the ms>-<random>.trace per start. Its absolute path
is printed at start and in the summary. A start that never receives a byte from
the client (a launcher's probe) leaves no bundle.

Every call binds a complete snapshot of the server's tools: when no complete
one of this session is current (the client never listed, read the first page
only, or a list_changed came since), wrap collects every tools/list page
itself before forwarding the call, under request ids of its own; the pages
never reach the client and the manifest says the collection is tracectl's
(--capture auto, the default; always: before every call; never: bind only
what the client listed).

Shutdown follows the client: when it closes stdin, calls still running at the
server may finish for --grace (a call it cancelled does not wait); SIGTERM,
SIGINT or SIGHUP stop waiting at once. Then the server's stdin is closed, and
its process group gets SIGTERM after --shutdown-timeout and SIGKILL after that
again. The bundle is sealed and, with --key, signed. A client that goes away
mid-session is noted; what the server still sends is recorded.

Exit status: 0 when the client ended the session; the server's own status
when it ended on its own with a failure (128+N for signal N), or failed
(1..127) before any client byte arrived; 2 for a usage
error before the server started; 125 when tracectl itself failed (evidence
could not be made durable, sealing or signing failed; stderr says what to
run).

--checkpoint-every N|DUR signs a checkpoint of the transcript so far into the
bundle's checkpoints/ every N tools/call attempts or every DUR: a session
killed before it seals is signed up to its last checkpoint (tracectl verify
reports the rest as unsigned; 'tracectl seal --recover' keeps the checkpoints).

The passphrase variable ` + passwordEnv + ` is removed from the server's
environment.`,
		Example: `  tracectl wrap --key key.pem npx -y @modelcontextprotocol/server-everything
  tracectl wrap --bundle run.trace --key key.pem -- ./server --port 0
  tracectl verify --trusted-key key.pem.pub run.trace`,
		RunE: func(c *cobra.Command, args []string) error {
			// A launcher that adds its own "--" (or a user who writes two)
			// leaves one in the server's command line: no server is named "--".
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return usageErr(errors.New("wrap needs the server command"), "tracectl wrap [flags] SERVER [ARGS...]")
			}
			o.server = args
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	// The server's own flags are never taken for wrap's.
	f.SetInterspersed(false)
	f.StringVar(&o.bundle, "bundle", "", "evidence bundle directory to create (it must not exist)")
	f.StringVar(&o.bundleDir, "bundle-dir", "", "create a fresh bundle per start in this directory (default: the user's state directory, tracectl/bundles)")
	f.StringVar(&o.key, "key", "", "signing key: a PEM file or a KMS reference (<provider>://...); without it the bundle is sealed unsigned")
	o.keys.flags(cmd)
	o.keys.signerFlag(cmd)
	f.StringVar(&o.durability, "durability", transcript.DurabilityStrict, "strict (fsync before forwarding), batch (group commit) or none")
	f.StringVar(&o.retain, "retain", transcript.RetainFull, "full (keep payload bytes, redacted: see --redact) or digest (salted digests and lengths only)")
	o.redaction.flags(cmd)
	f.StringVar(&o.capture, "capture", "auto", "collect the server's complete tools/list before a call that has no complete snapshot to bind (auto), before every call (always), or never")
	f.DurationVar(&o.callTimeout, "call-timeout", 0, "record a timeout when a tools/call has no response within this time (0: never)")
	f.DurationVar(&o.grace, "grace", stdio.DefaultGrace, "how long calls still running at the server may finish after the client closes its input")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", stdio.DefaultKillAfter, "after closing the server's stdin, wait this long before SIGTERM, and again before SIGKILL")
	f.Int64Var(&o.maxFrame, "max-frame", defaultMaxFrame, "frames longer than this are forwarded but only their digest and length are kept")
	f.StringVar(&o.serverName, "server-name", "", "a label for the server recorded in the transcript (not an authenticated identity)")
	f.Var(&o.checkpoint, "checkpoint-every", "sign a checkpoint of the transcript so far every N tools/call attempts or every DUR (needs --key or --signer)")
	o.anchor.flags(cmd)
	o.record.flags(cmd)
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "send each call's span live to this OTLP collector (http://host:4318; OTEL_EXPORTER_OTLP_PROTOCOL=grpc for gRPC), with the ids tracectl export gives the bundle")
	f.StringVar(&o.otlpSignals, "otlp-signals", "traces", "with --otlp-endpoint: traces, metrics or traces,metrics (the MCP client duration histograms)")
	o.policy.flags(cmd)
	return cmd
}

// validate checks every flag before anything is created or spawned.
func (o *wrapOptions) validate() error {
	if err := checkOTLPEndpoint(o.otlpEndpoint, o.otlpSignals); err != nil {
		return err
	}
	if err := o.policy.load(); err != nil {
		return err
	}
	if err := checkRecordModes(o.durability, o.retain); err != nil {
		return err
	}
	if err := o.redaction.build(); err != nil {
		return err
	}
	switch o.capture {
	case "auto", "always", "never":
	default:
		return usageErr(fmt.Errorf("--capture %q", o.capture), "use --capture auto, always or never")
	}
	if o.callTimeout < 0 || o.grace < 0 {
		return usageErr(errors.New("--call-timeout and --grace must not be negative"), "")
	}
	if o.shutdownTimeout <= 0 {
		return usageErr(fmt.Errorf("--shutdown-timeout %s: must be positive", o.shutdownTimeout), "")
	}
	if o.maxFrame <= 0 {
		return usageErr(fmt.Errorf("--max-frame %d: must be positive", o.maxFrame), "")
	}
	if o.bundle != "" && o.bundleDir != "" {
		return usageErr(errors.New("--bundle and --bundle-dir exclude each other"), "--bundle names one bundle; --bundle-dir gets a new one per start")
	}
	signs, err := o.keys.signs(o.key)
	if err != nil {
		return err
	}
	if o.checkpoint.set() && !signs {
		return usageErr(errors.New("--checkpoint-every needs --key or --signer: a checkpoint is signed"), "")
	}
	return o.anchor.validate(signs)
}

// checkOutputs refuses a bundle path that exists or aliases the key.
func checkOutputs(bundle, key string) error {
	abs, err := filepath.Abs(bundle)
	if err != nil {
		return usageErr(err, "")
	}
	if _, err := os.Lstat(abs); err == nil {
		return usageErr(fmt.Errorf("bundle %q already exists", bundle), "bundles are created exclusively, never reused: use --bundle-dir DIR for a new bundle per start")
	}
	if key != "" && !strings.Contains(key, "://") {
		k, err := filepath.Abs(key)
		if err == nil && (k == abs || strings.HasPrefix(k, abs+string(filepath.Separator))) {
			return usageErr(fmt.Errorf("--key %q aliases the bundle %q", key, bundle), "keep the signing key outside the bundle")
		}
	}
	return nil
}

// bundleName is a per-start bundle name: UTC time to the millisecond, so
// names sort by start, and a random suffix, so two starts in the same
// millisecond (a launcher's probe and its session, two clients) never
// collide.
func bundleName(now time.Time, entropy io.Reader) (string, error) {
	var b [4]byte
	if _, err := io.ReadFull(entropy, b[:]); err != nil {
		return "", err
	}
	return "tracectl-" + now.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:]) + ".trace", nil
}

// stateBundleDir is where bundles go when neither --bundle nor --bundle-dir
// is given: the user's state directory, never the working directory (MCP
// clients start servers in / or wherever they happen to run).
func stateBundleDir(goos string, getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "tracectl", "bundles"), nil
	}
	if goos == "windows" {
		if d := getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "tracectl", "bundles"), nil
		}
		return "", errors.New("%LocalAppData% is not set")
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither $XDG_STATE_HOME nor $HOME is set")
	}
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "tracectl", "bundles"), nil
	}
	return filepath.Join(home, ".local", "state", "tracectl", "bundles"), nil
}

// resolveBundle decides the bundle path of this start, creating the bundle
// directory (0700, with its parents) when one is used.
func (o *wrapOptions) resolveBundle(now time.Time, entropy io.Reader) (string, error) {
	if o.bundle != "" {
		return filepath.Abs(o.bundle)
	}
	dir := o.bundleDir
	if dir == "" {
		d, err := stateBundleDir(runtime.GOOS, os.Getenv)
		if err != nil {
			return "", usageErr(fmt.Errorf("default bundle directory: %w", err), "pass --bundle-dir DIR")
		}
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", usageErr(err, "")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", usageErr(fmt.Errorf("create the bundle directory: %w", err), "")
	}
	name, err := bundleName(now, entropy)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// serverEnv is the server's environment: ours, less what tracectl alone
// needs and the server must not see.
func serverEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k == passwordEnv {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func runWrap(ctx context.Context, s streams, o *wrapOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	bundle, err := o.resolveBundle(time.Now(), rand.Reader)
	if err != nil {
		return err
	}
	if err := checkOutputs(bundle, o.key); err != nil {
		return err
	}
	exe, err := exec.LookPath(o.server[0])
	if err != nil {
		return usageErr(fmt.Errorf("server %q: %w", o.server[0], err), "check the server command")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// A client that goes away must not kill tracectl with SIGPIPE on its
	// next write: the write fails instead, the proxy notes the client
	// gone, and the bundle is sealed. (Caught, not ignored: an ignored
	// signal would be inherited by the server.)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) { // started under nohup: leave it ignored
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(ctx, sigs...)
	defer stop()
	live, err := startLive(ctx, o.otlpEndpoint, o.otlpSignals, s.err)
	if err != nil {
		return err
	}
	defer live.shutdown(context.WithoutCancel(ctx))
	sum, err := recordSession(ctx, s, sessionOptions{
		bundle: bundle, key: o.key, keys: o.keys, durability: o.durability, retain: o.retain, redaction: o.redaction,
		callTimeout: o.callTimeout, capture: o.capture, grace: o.grace, killAfter: o.shutdownTimeout, maxFrame: o.maxFrame, serverName: o.serverName,
		record: o.record, exe: exe, args: o.server[1:], env: serverEnv(os.Environ()), dropEmpty: true, announce: true,
		clientIn: s.in, clientOut: s.out, checkpoint: o.checkpoint, anchor: o.anchor, live: live, policy: o.policy,
	})
	if sum != nil {
		fmt.Fprintln(s.err, "tracectl: "+escapeTerminal(sum.String()))
	}
	return wrapExit(sum, err)
}

// wrapExit decides wrap's exit status (see the command's help).
func wrapExit(sum *sessionSummary, err error) error {
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) || sum == nil {
			return err // refused before the server started
		}
		hint := ""
		if sum.sealed == nil {
			hint = "run 'tracectl seal --recover --bundle " + sum.bundle + "'"
		} else if !sum.signed {
			hint = "sign it with 'tracectl seal --bundle " + sum.bundle + " --key KEY'"
		}
		return &exitError{code: exitInternal, err: err, hint: hint}
	}
	// The server's own failure is wrap's status: when it ended on its own,
	// and when no client byte ever arrived (a server failing at start races
	// a client at EOF: closing its stdin asked nothing of a server that
	// read nothing), unless tracectl's own signal ended it.
	if r := sum.res; r != nil && r.ExitCode != 0 && (r.EndedOnItsOwn || (r.ClientBytes == 0 && r.ExitCode > 0 && r.ExitCode < 128)) {
		code := r.ExitCode
		if code < 0 || code > 255 {
			code = 1
		}
		return &exitError{code: code}
	}
	return nil
}
