package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/tracectl/tracectl/internal/tlog"
)

type logServeOptions struct {
	dir, listen, origin string
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
	l, err := tlog.Open(ctx, tlog.Config{Dir: o.dir, Origin: origin})
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
