package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/producer/httpproxy"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

type proxyOptions struct {
	listen, upstream, bundleDir, key string
	keys                             keyOptions
	checkpoint                       checkpointEvery
	anchor                           anchorOptions
	redaction                        redactOptions
	durability, retain, serverName   string
	callTimeout, streamIdle, grace   time.Duration
	sessionIdle, bodyTimeout         time.Duration
	maxSessions                      int
	maxInflight                      int64
	maxFrame                         int64
	rotateEvery                      string
	capture                          string
	otlpEndpoint                     string
	otlpSignals                      string
	upstreamCA                       string
	policy                           policyOptions
	allowRemote                      bool
	allowedHosts, allowedOrigins     []string
	redactPaths                      []string
	record                           recordIdentity
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newProxyCmd(s, runProxy) })
}

func newProxyCmd(s streams, runF func(context.Context, streams, *proxyOptions) error) *cobra.Command {
	o := &proxyOptions{}
	cmd := &cobra.Command{
		Use:   "proxy --upstream URL [--listen ADDR] [--bundle-dir DIR] [--key KEY] [flags]",
		Short: "Record a remote Streamable HTTP MCP server behind a recording reverse proxy",
		Long: `proxy listens for MCP clients and forwards every request to the Streamable HTTP
server at --upstream, committing what passes through exactly as wrap does: a
tools/call is an attempt made durable before its POST goes upstream; its
response is durable before the JSON body, or the SSE event carrying it, is
delivered. A 2026-07-28 request whose routing headers (MCP-Protocol-Version,
Mcp-Method, Mcp-Name, Mcp-Param-*) are missing or disagree with its body is
refused with HTTP 400 and a -32600 error naming the rule, and recorded.
Credentials (Authorization, cookies, API-key headers) are forwarded unchanged;
only their presence is recorded. See spec/http.md.

Each 2025-11-25 client session records into its own bundle; stateless
(2026-07-28) traffic records into a bundle rotated by --rotate-every (a
duration, or N calls). Every bundle is sealed and, with --key, signed when it
ends: the session is deleted, the bundle rotates, or the proxy stops (SIGINT,
SIGTERM).

It listens on loopback unless --allow-remote is given (which then needs
--allowed-host). A request whose Host is not the listen address, a loopback
name on its port or an --allowed-host, or whose Origin is present and not an
--allowed-origin, is refused with 403 and recorded. Proxy-Authorization and
the other hop-by-hop headers are neither forwarded nor recorded; an upstream
redirect is never relayed (502).

Bounds: request bodies held at once (--max-inflight-bytes; past it, 503 with
Retry-After) and session bundles open at once (--max-sessions; past it the
least recently used session is sealed). Mcp-Param-* values are recorded by a
salted digest and URL path segments that look like keys as [REDACTED:path]
(also --redact-path), unless --no-redaction with --retain full.

Before recording a tools/call from a client that has no complete snapshot of
the upstream's tools current (it never listed, read the first page only, or a
list_changed came since), the proxy lists them itself with the call's own
headers (--capture auto, the default; always; never): the call binds a
complete snapshot of the server it went to. Stateless clients are told apart
by their credentials and session, never by connection: a call never binds a
list another client's credentials were given.

The upstream's TLS is verified (system roots, or --upstream-ca).`,
		Example: `  tracectl proxy --upstream https://mcp.example.com/mcp --listen 127.0.0.1:8931 --key key.pem
  tracectl proxy --upstream http://127.0.0.1:3001/mcp --rotate-every 100`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runF(c.Context(), s, o) },
	}
	f := cmd.Flags()
	def := httpproxy.Defaults()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8931", "address to listen on (loopback unless --allow-remote)")
	f.StringVar(&o.upstream, "upstream", "", "the MCP server's Streamable HTTP endpoint (http:// or https://)")
	f.StringVar(&o.bundleDir, "bundle-dir", "", "directory for the bundles (default: the user's state directory, tracectl/bundles)")
	f.StringVar(&o.key, "key", "", "signing key: a PEM file or a KMS reference; without it bundles are sealed unsigned")
	o.keys.flags(cmd)
	o.keys.signerFlag(cmd)
	f.StringVar(&o.durability, "durability", transcript.DurabilityStrict, "strict, batch or none")
	f.StringVar(&o.retain, "retain", transcript.RetainFull, "full (payload bytes, redacted: see --redact) or digest (salted digests and lengths only)")
	o.redaction.flags(cmd)
	f.DurationVar(&o.callTimeout, "call-timeout", 0, "record a timeout when a tools/call has no response within this time (0: never)")
	f.DurationVar(&o.streamIdle, "stream-idle-timeout", def.StreamIdle, "abandon an upstream stream silent this long (its calls' outcome is unknown)")
	f.DurationVar(&o.sessionIdle, "session-idle", def.SessionIdle, "seal a 2025-11-25 session's bundle when no request has used it this long (its later requests record into the stateless bundle; 0: never)")
	f.DurationVar(&o.bodyTimeout, "body-timeout", def.BodyTimeout, "answer 408 (and record it) when a request body has not arrived whole within this long")
	f.IntVar(&o.maxSessions, "max-sessions", def.MaxSessions, "session bundles open at once; a new session past it seals the least recently used one")
	f.Int64Var(&o.maxInflight, "max-inflight-bytes", def.MaxInflightBytes, "request bodies held in memory at once; a request past it is answered 503 with Retry-After")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "how long calls in flight may finish when the proxy stops; then their upstream requests are closed")
	f.Int64Var(&o.maxFrame, "max-frame", defaultMaxFrame, "frames longer than this are committed by digest and length only")
	f.StringVar(&o.rotateEvery, "rotate-every", "1h", "rotate the stateless bundle after DUR (e.g. 10m) or N calls (e.g. 500)")
	f.StringVar(&o.capture, "capture", "auto", "list the upstream's tools with a call's own headers before recording it when that client has no complete snapshot current (auto), before every call (always), or never")
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "send each call's span live to this OTLP collector (http://host:4318; OTEL_EXPORTER_OTLP_PROTOCOL=grpc for gRPC), with the ids tracectl export gives the bundle")
	f.StringVar(&o.otlpSignals, "otlp-signals", "traces", "with --otlp-endpoint: traces, metrics or traces,metrics (the MCP client duration histograms)")
	f.StringVar(&o.upstreamCA, "upstream-ca", "", "PEM file of CA certificates to verify the upstream with, instead of the system roots")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "allow a non-loopback --listen address: anyone who can reach it can call the upstream's tools with the credentials they send")
	f.StringSliceVar(&o.allowedHosts, "allowed-host", nil, "a Host name clients may reach the proxy by, HOST (any port) or HOST:PORT, besides the listen address and loopback names (repeatable; required with --allow-remote)")
	f.StringSliceVar(&o.allowedOrigins, "allowed-origin", nil, "an Origin browsers may call from, scheme://host[:port] (repeatable; none by default, null never)")
	f.StringArrayVar(&o.redactPaths, "redact-path", nil, "also redact, in what is recorded, every URL path segment (of --upstream and of client requests) this Go regular expression matches (repeatable)")
	f.StringVar(&o.serverName, "server-name", "", "a label for the server recorded in the transcript (not an authenticated identity)")
	f.Var(&o.checkpoint, "checkpoint-every", "sign a checkpoint of each bundle's transcript so far every N tools/call attempts or every DUR (needs --key or --signer)")
	o.anchor.flags(cmd)
	o.record.flags(cmd)
	o.policy.flags(cmd)
	return cmd
}

// parseRotate reads --rotate-every: a duration or a call count.
func parseRotate(s string) (time.Duration, int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return 0, 0, fmt.Errorf("--rotate-every %d: must be positive", n)
		}
		return 0, n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("--rotate-every %q: want a positive duration (10m) or a number of calls (500)", s)
	}
	return d, 0, nil
}

// loopback reports whether a listen address binds loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runProxy(ctx context.Context, s streams, o *proxyOptions) error {
	if o.upstream == "" {
		return usageErr(errors.New("proxy needs --upstream URL"), "tracectl proxy --upstream https://host/mcp")
	}
	u, err := url.Parse(o.upstream)
	if err != nil {
		return usageErr(fmt.Errorf("--upstream: %w", err), "")
	}
	srv, err := producer.HTTPServer(u, o.serverName)
	if err != nil {
		return usageErr(err, "--upstream http(s)://host[:port]/path")
	}
	if err := checkRecordModes(o.durability, o.retain); err != nil {
		return err
	}
	if err := o.redaction.build(); err != nil {
		return err
	}
	if err := o.policy.load(); err != nil {
		return err
	}
	if o.policy.approve.elicit {
		// Elicitation over Streamable HTTP needs the call's POST answered
		// on an SSE stream that carries the request to the client:
		// not built yet (spec/policy.md, "Not done").
		return usageErr(errors.New("--approve-elicit is not supported by proxy yet"), "use --approve-cmd with proxy; wrap asks the client through elicitation")
	}
	signs, err := o.keys.signs(o.key)
	if err != nil {
		return err
	}
	if o.checkpoint.set() && !signs {
		return usageErr(errors.New("--checkpoint-every needs --key or --signer: a checkpoint is signed"), "")
	}
	if err := o.anchor.validate(signs); err != nil {
		return err
	}
	if o.callTimeout < 0 || o.grace < 0 || o.streamIdle <= 0 || o.sessionIdle < 0 || o.maxFrame <= 0 || o.maxSessions <= 0 || o.maxInflight <= 0 {
		return usageErr(errors.New("--call-timeout, --grace and --session-idle must not be negative; --stream-idle-timeout, --max-frame, --max-sessions and --max-inflight-bytes must be positive"), "")
	}
	var pathREs []*regexp.Regexp
	for _, expr := range o.redactPaths {
		re, err := regexp.Compile(expr)
		if err != nil || expr == "" {
			return usageErr(fmt.Errorf("--redact-path %q: not a non-empty Go regular expression", expr), "")
		}
		pathREs = append(pathREs, re)
	}
	every, calls, err := parseRotate(o.rotateEvery)
	if err != nil {
		return usageErr(err, "")
	}
	if err := checkOTLPEndpoint(o.otlpEndpoint, o.otlpSignals); err != nil {
		return err
	}
	switch o.capture {
	case "", "auto", "always", "never": // "": auto, as the flag's default
	default:
		return usageErr(fmt.Errorf("--capture %q", o.capture), "use --capture auto, always or never")
	}
	if !loopback(o.listen) && !o.allowRemote {
		return usageErr(fmt.Errorf("--listen %q is not a loopback address", o.listen),
			"pass --allow-remote to expose the upstream's tools to anyone who can reach that address")
	}
	if !loopback(o.listen) && len(o.allowedHosts) == 0 {
		return usageErr(fmt.Errorf("--listen %q is not a loopback address: name the hosts clients reach it by", o.listen),
			"pass --allowed-host NAME for each name clients use (requests with any other Host are refused)")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.upstreamCA != "" {
		pem, err := os.ReadFile(o.upstreamCA)
		if err != nil {
			return usageErr(fmt.Errorf("--upstream-ca: %w", err), "")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usageErr(fmt.Errorf("--upstream-ca %q holds no PEM certificate", o.upstreamCA), "")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	dir := o.bundleDir
	if dir == "" {
		wo := &wrapOptions{}
		b, err := wo.resolveBundle(time.Now(), rand.Reader)
		if err != nil {
			return err
		}
		dir = filepath.Dir(b)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return usageErr(fmt.Errorf("create the bundle directory: %w", err), "")
	}
	var signer sign.Signer
	prod := transcript.Producer{Name: "tracectl", Version: version()}
	if signs {
		if signer, err = loadSigningKey(ctx, o.key, o.keys); err != nil {
			return err
		}
		if prod.KeyThumbprint, err = sign.Thumbprint(signer.Public()); err != nil {
			return usageErr(err, "")
		}
	}
	var rs producer.RecordSigner
	if signer != nil {
		rs = trustRecordSigner{signer: signer, identity: o.record, now: time.Now}
	}
	if err := o.anchor.checkSigner(signer); err != nil {
		return err
	}
	anchored, err := newProxyAnchors(o.anchor)
	if err != nil {
		return err
	}
	live, err := startLive(ctx, o.otlpEndpoint, o.otlpSignals, s.err)
	if err != nil {
		return err
	}
	defer live.shutdown(context.WithoutCancel(ctx))
	var liveTaps taps
	p, err := httpproxy.New(httpproxy.Config{
		Upstream: u, Transport: tr,
		Open: func(kind string) (*producer.Recorder, error) {
			name, err := bundleName(time.Now(), rand.Reader)
			if err != nil {
				return nil, err
			}
			path := filepath.Join(dir, strings.TrimSuffix(name, ".trace")+"-"+kind+".trace")
			ropts := producer.Options{
				Clock: time.Now, Entropy: rand.Reader, Durability: o.durability, Retention: o.retain,
				Redact: o.redaction.rules, NoRedaction: o.redaction.off,
				Producer: prod, Server: srv, Limits: producer.Limits{MaxFrameBytes: o.maxFrame, CallTimeout: o.callTimeout}, FramesCommitted: true,
				PolicyFile: o.policy.policy, LockFile: o.policy.lock, PolicyMode: o.policy.mode, ToolUseMeta: o.policy.correlationMeta,
				ApproveCommand: o.policy.approve.argv, ApproveTimeout: o.policy.approve.timeout,
			}
			untap := live.tap(&ropts)
			rec, err := producer.Open(path, ropts)
			if err != nil {
				untap()
				return nil, err
			}
			liveTaps.add(rec, untap)
			if anchored != nil {
				err = anchored.start(ctx, rec, o.anchor, signer, o.record, o.checkpoint, s.err)
			} else {
				err = startCheckpoints(rec, o.checkpoint, signer, o.record, s.err)
			}
			if err != nil {
				rec.Close()
				liveTaps.stop(rec)
				return nil, err
			}
			fmt.Fprintf(s.err, "tracectl: recording %s traffic to %s\n", kind, escapeTerminal(path))
			return rec, nil
		},
		Seal: func(r *producer.Recorder) error {
			rs := rs
			if sa := anchored.take(r); sa != nil {
				rs = sa
				defer sa.close()
			}
			sealed, err := r.Seal(context.WithoutCancel(ctx), rs)
			liveTaps.stop(r)
			if sealed != nil {
				sig := "signed"
				if !sealed.Signed {
					sig = "unsigned"
				}
				c := sealed.Seal
				fmt.Fprintf(s.err, "tracectl: sealed %s (%s): %d attempts: %d responses, %d transport failures, %d unknown%s\n",
					escapeTerminal(r.Dir()), sig, c.Attempts, c.Responses, c.TransportFailures, c.Unknown, deniedText(c.Denied))
			}
			return err
		},
		CaptureID:    func() (string, error) { return snapshot.NewCaptureID(rand.Reader) },
		Capture:      o.capture,
		AllowedHosts: o.allowedHosts, AllowedOrigins: o.allowedOrigins,
		MaxSessions: o.maxSessions, MaxInflightBytes: o.maxInflight, BodyTimeout: o.bodyTimeout,
		Redact: o.redaction.rules, RedactPaths: pathREs, UnsafeRecordInClear: o.redaction.off && o.retain == transcript.RetainFull,
		Failed:      func(err error) { fmt.Fprintf(s.err, "tracectl: error: %s\n", escapeTerminal(err.Error())) },
		RotateEvery: every, RotateCalls: calls, CallTimeout: o.callTimeout, StreamIdle: o.streamIdle, SessionIdle: sessionIdle(o.sessionIdle),
	})
	if err != nil {
		return usageErr(err, "")
	}
	// What is recorded and printed names the upstream with its
	// credential-like path segments redacted.
	srv.URL = p.ServerURL()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		if ioFailure(err) { // in use, not available here
			return ioErr(fmt.Errorf("listen: %w", err), "choose another --listen address")
		}
		return usageErr(fmt.Errorf("listen: %w", err), "")
	}
	if !loopback(o.listen) {
		fmt.Fprintf(s.err, "tracectl: WARNING: listening on %s, not loopback: anyone who can reach it can call %s's tools\n", escapeTerminal(ln.Addr().String()), escapeTerminal(srv.URL))
	}
	fmt.Fprintf(s.err, "tracectl: proxying http://%s -> %s\n", escapeTerminal(ln.Addr().String()), escapeTerminal(srv.URL))
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	// Calls in flight may finish for the grace; then their upstream
	// requests are closed (transport failures) and every bundle is sealed.
	sctx, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	shut := make(chan struct{})
	go func() { _ = hs.Shutdown(sctx); close(shut) }()
	closeErr := p.Shutdown(sctx)
	<-shut
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if err := errors.Join(serveErr, closeErr); err != nil {
		return &exitError{code: exitInternal, err: err, hint: "run 'tracectl seal --recover --bundle DIR' on a bundle left unsealed"}
	}
	return nil
}

// sessionIdle maps --session-idle 0 (never) to the library's negative.
func sessionIdle(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
