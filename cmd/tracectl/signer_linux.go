package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	signersvc "github.com/tracectl/tracectl/internal/signer"
	"github.com/tracectl/tracectl/sign"
)

func runSignerServe(ctx context.Context, s streams, o *signerServeOptions) error {
	if o.key == "" || o.socket == "" {
		return usageErr(errors.New("signer serve needs --key KEY and --socket PATH"), "tracectl signer serve --key KEY --socket PATH")
	}
	rate, err := signersvc.ParseRate(o.rate)
	if err != nil {
		return usageErr(fmt.Errorf("--rate: %w", err), "")
	}
	uids := make([]uint32, 0, len(o.allowUIDs))
	for _, u := range o.allowUIDs {
		if u > math.MaxUint32-1 { // (uid_t)-1 is "no uid"
			return usageErr(fmt.Errorf("--allow-uid %d: not a uid", u), "")
		}
		uids = append(uids, uint32(u))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	key, err := loadSigningKey(ctx, o.key, o.keys)
	if err != nil {
		return err
	}
	var journal *signersvc.Journal
	if o.journal != "" {
		if journal, err = signersvc.OpenJournal(o.journal); err != nil {
			if errors.Is(err, signersvc.ErrJournalBroken) {
				return usageErr(err, "the journal was edited or torn: keep it as evidence and start a new one")
			}
			return ioErr(err, "")
		}
		defer journal.Close()
	}
	srv, err := signersvc.NewServer(signersvc.Options{
		Signer: key, OwnUID: uint32(os.Getuid()), AllowUIDs: uids, Rate: rate, Clock: time.Now, Journal: journal,
		Report: func(p signersvc.Peer, op string, kind signersvc.Kind, err error) {
			if err != nil {
				fmt.Fprintf(s.err, "tracectl: signer: uid %d pid %d: %s\n", p.UID, p.PID, escapeTerminal(err.Error()))
			}
		},
	})
	if err != nil {
		return usageErr(err, "")
	}
	l, err := signersvc.Listen(o.socket)
	switch {
	case errors.Is(err, signersvc.ErrUnsafeDirectory):
		return usageErr(err, "put the socket in a directory only its owner can write, e.g. /run/tracectl (mode 0750, or setgid 2750 for a group the recorders share)")
	case errors.Is(err, os.ErrNotExist):
		return usageErr(err, "create the socket's directory first")
	case errors.Is(err, os.ErrExist):
		return usageErr(err, "another signer serves it, or a stale socket is left: remove it if no signer runs")
	case err != nil:
		return ioErr(fmt.Errorf("listen: %w", err), "")
	}
	defer l.Close()
	thumb, _ := sign.Thumbprint(key.Public())
	allowed := []string{fmt.Sprint(os.Getuid())}
	for _, u := range uids {
		allowed = append(allowed, fmt.Sprint(u))
	}
	fmt.Fprintf(s.err, "tracectl: signer serving unix:%s (key %s, uids %s, rate %s)\n",
		escapeTerminal(o.socket), thumb, strings.Join(allowed, ","), rate)
	if o.ready != nil {
		o.ready(o.socket)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx, l); err != nil {
		return ioErr(err, "")
	}
	return nil
}
