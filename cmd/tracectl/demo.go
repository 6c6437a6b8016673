package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

type demoOptions struct {
	dir    string // where the key and bundle go (default: a new temporary directory)
	format string // text or json
}

// demoMediaType names demo's --format json result: where the bundle and
// its public key are, and the verification report (verify.MediaType).
const demoMediaType = "application/vnd.tracectl.demo.v1+json"

type demoResult struct {
	MediaType string         `json:"media_type"`
	Bundle    string         `json:"bundle"`
	PublicKey string         `json:"public_key"`
	Report    *verify.Report `json:"report"`
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newDemoCmd(s, runDemo) })
}

func newDemoCmd(s streams, runF func(context.Context, streams, *demoOptions) error) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo [--dir DIR] [--format text|json]",
		Short: "Record, sign and verify a scripted MCP session against an embedded server",
		Long: `demo runs the whole loop with no setup: it generates an ephemeral Ed25519 key,
starts an embedded MCP server (the Go SDK's, as a real child process) behind the
same recording proxy as 'tracectl wrap', drives it with a scripted MCP client
(lists every page, calls tools, lets a slow call time out and retries it, makes
the server change its tool list and lists again), seals and signs the bundle,
then verifies it offline and prints the report.`,
		Example: "  tracectl demo\n  tracectl demo --dir ./demo-out",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runF(c.Context(), s, o)
		},
	}
	cmd.Flags().StringVar(&o.dir, "dir", "", "directory for the key and the bundle (created; default: a new temporary directory)")
	formatFlag(cmd, &o.format, demoMediaType)
	return cmd
}

// demoCallTimeout makes the slow call's first attempt time out.
const demoCallTimeout = 300 * time.Millisecond

func runDemo(ctx context.Context, s streams, o *demoOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := checkFormat(o.format); err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "tracectl-demo-")
		if err != nil {
			return err
		}
		dir = d
	} else if err := os.Mkdir(dir, 0o700); err != nil {
		return usageErr(err, "--dir must name a directory that does not exist yet")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	key, err := sign.Generate(sign.Ed25519, rand.Reader)
	if err != nil {
		return err
	}
	keyPath := filepath.Join(dir, "demo-key.pem")
	if err := sign.WriteKeyPair(keyPath, key, nil); err != nil {
		return err
	}
	signer, err := sign.NewSigner(key)
	if err != nil {
		return err
	}
	bundle := filepath.Join(dir, "demo.trace")
	fmt.Fprintf(s.err, "tracectl: demo: recording an embedded MCP server to %s\n", escapeTerminal(bundle))

	c2p, clientW := io.Pipe()
	clientR, p2c := io.Pipe()
	type done struct {
		sum *sessionSummary
		err error
	}
	sessDone := make(chan done, 1)
	go func() {
		sum, err := recordSession(ctx, s, sessionOptions{
			bundle: bundle, durability: transcript.DurabilityStrict, retain: transcript.RetainFull,
			callTimeout: demoCallTimeout, grace: 3 * time.Second, maxFrame: defaultMaxFrame,
			serverName: "tracectl demo server", exe: exe, args: []string{demoServerCmd},
			clientIn: c2p, clientOut: p2c, serverErr: io.Discard, signer: signer,
		})
		p2c.Close()
		c2p.Close()
		sessDone <- done{sum, err}
	}()
	scriptErr := demoScript(ctx, s.err, clientR, clientW)
	clientW.Close()
	d := <-sessDone
	if d.sum != nil {
		fmt.Fprintln(s.err, "tracectl: demo: "+escapeTerminal(d.sum.String()))
	}
	if err := errors.Join(scriptErr, d.err); err != nil {
		return fmt.Errorf("demo session: %w", err)
	}

	// Verify offline, as an auditor would: the bundle and the public key.
	pub, err := sign.LoadPublicKeyFile(keyPath + ".pub")
	if err != nil {
		return err
	}
	v, err := verify.New(verify.Options{TrustedKey: pub, At: time.Now()})
	if err != nil {
		return err
	}
	rep, verr := v.Bundle(ctx, os.DirFS(bundle))
	if rep == nil {
		return verr
	}
	if o.format == formatJSON {
		if err := writeJSON(s.out, demoResult{MediaType: demoMediaType, Bundle: bundle, PublicKey: keyPath + ".pub", Report: rep}); err != nil {
			return err
		}
	} else {
		fmt.Fprint(s.out, textReport(rep))
		fmt.Fprintf(s.out, "\nbundle: %s\nverify it again: tracectl verify --trusted-key %s %s\n",
			escapeTerminal(bundle), escapeTerminal(keyPath+".pub"), escapeTerminal(bundle))
	}
	if rep.Verdict != verify.Verified {
		return &exitError{code: exitFailed, err: fmt.Errorf("demo bundle did not verify: %s", rep.Verdict)}
	}
	return nil
}

// demoScript is the scripted MCP client (the Go SDK's) the demo drives.
func demoScript(ctx context.Context, log io.Writer, r io.ReadCloser, w io.WriteCloser) error {
	changed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "tracectl-demo-client", Version: "1.0.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	// The legacy handshake: its session delivers list_changed directly.
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	step := func(format string, a ...any) { fmt.Fprintf(log, "tracectl: demo: "+format+"\n", a...) }

	listAll := func() (int, int, error) {
		tools, pages := 0, 0
		var cursor string
		for {
			res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return tools, pages, err
			}
			pages++
			tools += len(res.Tools)
			if res.NextCursor == "" {
				return tools, pages, nil
			}
			cursor = res.NextCursor
		}
	}
	call := func(ctx context.Context, name string, args map[string]any, meta mcp.Meta) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	}

	tools, pages, err := listAll()
	if err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	step("listed %d tools over %d pages", tools, pages)
	if _, err := call(ctx, "echo", map[string]any{"text": "hello"}, mcp.Meta{mcpwire.MetaCorrelationID: "demo-echo-1"}); err != nil {
		return fmt.Errorf("call echo: %w", err)
	}
	if _, err := call(ctx, "temperature", map[string]any{"value": 0.7}, nil); err != nil {
		return fmt.Errorf("call temperature: %w", err)
	}
	if res, err := call(ctx, "fail", map[string]any{}, nil); err != nil || !res.IsError {
		return fmt.Errorf("call fail: want a tool error, got %v, %v", res, err)
	}
	step("called echo, temperature and fail (a tool error)")

	// A slow call the client gives up on: the proxy records a timeout
	// (outcome unknown), the client's cancellation, and whatever the
	// server sends late. Then a declared retry, which links to it.
	slowCtx, cancel := context.WithTimeout(ctx, 2*demoCallTimeout)
	_, err = call(slowCtx, "slow", map[string]any{"ms": 3000}, mcp.Meta{mcpwire.MetaCorrelationID: "demo-slow-1"})
	cancel()
	if err == nil {
		return errors.New("call slow: want the client to give up, it got an answer")
	}
	if _, err := call(ctx, "slow", map[string]any{"ms": 10}, mcp.Meta{mcpwire.MetaCorrelationID: "demo-slow-2", mcpwire.MetaRetryOf: "demo-slow-1"}); err != nil {
		return fmt.Errorf("retry slow: %w", err)
	}
	step("a slow call timed out (outcome unknown) and was retried (linked, caller_declared)")

	if _, err := call(ctx, "add_tool", map[string]any{}, nil); err != nil {
		return fmt.Errorf("call add_tool: %w", err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		return errors.New("the server did not send notifications/tools/list_changed")
	}
	tools, pages, err = listAll()
	if err != nil {
		return fmt.Errorf("list tools again: %w", err)
	}
	if _, err := call(ctx, "added_1", map[string]any{}, nil); err != nil {
		return fmt.Errorf("call added_1: %w", err)
	}
	step("the server changed its tools (list_changed); listed %d tools over %d pages again and called the new one", tools, pages)
	return nil
}
