//go:build !windows

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/transparency-dev/tessera"
	"k8s.io/klog/v2"

	"github.com/tracectl/tracectl/internal/tlog"
)

type logServeOptions struct {
	dir, listen, origin    string
	witnesses, witnessKeys []string // paired by position
	// ready, when set, is called with the address served (tests).
	ready func(addr string)
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command {
		cmd := &cobra.Command{Use: "log", Short: "Run a transparency log for anchoring (tracectl log serve)", Args: cobra.NoArgs}
		cmd.AddCommand(newLogServeCmd(s, runLogServe))
		return cmd
	})
}

func newLogServeCmd(s streams, runF func(context.Context, streams, *logServeOptions) error) *cobra.Command {
	o := &logServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve --dir DIR --listen ADDR",
		Short: "Serve an embedded Tessera transparency log (C2SP tlog-tiles)",
		Long: `log serve runs a transparency log on Tessera's POSIX driver in DIR. On first
start it creates the log's signing key (DIR/log.key, mode 0600) and writes the
C2SP signed-note verifier key to DIR/log.pub: give that file to wrap and proxy
(--anchor-key), verify (--log-key) and audit (--log-key).

It takes additions (POST /add, answered once a published checkpoint covers the
entry) and serves the C2SP tlog-tiles read API from DIR/log: /checkpoint,
/tile/... and /tile/entries/..., plus /entries/<index> (the entry a record's
transparency URI names). A copy of DIR/log is a mirror tracectl audit reads
offline. The Merkle tree, tiles and checkpoints are Tessera's.

Exit status: 0 after SIGINT or SIGTERM, 2 usage error, 4 the address or the
directory cannot be used.`,
		Example: "  tracectl log serve --dir /var/lib/tracectl-log --listen 127.0.0.1:7480",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "the log's directory: key, verifier key and tiles (required)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:7480", "address to serve on")
	f.StringVar(&o.origin, "origin", "", "the checkpoint origin of a new log (default: tracectl.log/<hostname>)")
	f.StringArrayVar(&o.witnesses, "witness", nil, "a witness's URL (C2SP tlog-witness; repeatable): every one must cosign a checkpoint before it is published")
	f.StringArrayVar(&o.witnessKeys, "witness-key", nil, "the verifier key file of the --witness at the same position")
	return cmd
}

func runLogServe(ctx context.Context, s streams, o *logServeOptions) error {
	if o.dir == "" {
		return usageErr(errors.New("log serve needs --dir DIR"), "tracectl log serve --dir DIR --listen ADDR")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	origin := o.origin
	if origin == "" {
		h, _ := os.Hostname()
		if h == "" {
			h = "localhost"
		}
		origin = "tracectl.log/" + h
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Tessera logs through klog: its progress notes are dropped, its
	// warnings and errors kept on stderr.
	klog.LogToStderr(false)
	klog.SetOutputBySeverity("INFO", io.Discard)
	klog.SetOutputBySeverity("WARNING", s.err)
	group, err := witnessGroup(o.witnesses, o.witnessKeys)
	if err != nil {
		return err
	}
	// The log's own lifetime ends with Close, after the signal: a
	// shutdown publishes what was added.
	l, err := tlog.Open(context.WithoutCancel(ctx), tlog.Config{Dir: o.dir, Origin: origin, Witnesses: group})
	if err != nil {
		return ioErr(fmt.Errorf("open log %s: %w", o.dir, err), "")
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		_ = l.Close(context.Background())
		return ioErr(fmt.Errorf("listen: %w", err), "choose another --listen address")
	}
	fmt.Fprintf(s.err, "tracectl: log %s serving http://%s (verifier key %s)\n", escapeTerminal(l.Origin), ln.Addr(), escapeTerminal(filepath.Join(o.dir, tlog.PubFile)))
	if o.ready != nil {
		o.ready(ln.Addr().String())
	}
	hs := &http.Server{Handler: l.Handler(), ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, l.Close(sctx))
}

// witnessGroup pairs --witness URLs with --witness-key files: all of them
// must cosign (nil without witnesses).
func witnessGroup(urls, keys []string) (*tessera.WitnessGroup, error) {
	if len(urls) != len(keys) {
		return nil, usageErr(fmt.Errorf("%d --witness and %d --witness-key: give one key per witness", len(urls), len(keys)), "")
	}
	if len(urls) == 0 {
		return nil, nil
	}
	var ws []tessera.Witness
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, usageErr(fmt.Errorf("--witness %q: not an http(s) URL", raw), "")
		}
		kb, err := readBounded(keys[i], 4<<10)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--witness-key: %w", err), "")
		}
		w, err := tessera.NewWitness(strings.TrimSpace(string(kb)), u)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--witness-key %s: %w", keys[i], err), "")
		}
		ws = append(ws, w)
	}
	g := allOf(ws)
	return &g, nil
}

// allOf is a group every witness of ws must satisfy, nested pairwise
// (tessera's group takes its components one by one).
func allOf(ws []tessera.Witness) tessera.WitnessGroup {
	if len(ws) == 1 {
		return tessera.NewWitnessGroup(1, ws[0])
	}
	return tessera.NewWitnessGroup(2, ws[0], allOf(ws[1:]))
}
