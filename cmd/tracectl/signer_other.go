//go:build !linux

package main

import (
	"context"
	"errors"
)

// runSignerServe: peers are judged by SO_PEERCRED, which only linux has
// here; recorders on other systems can still use a signer (--signer).
func runSignerServe(context.Context, streams, *signerServeOptions) error {
	return usageErr(errors.New("signer serve is linux-only: it judges peers by SO_PEERCRED"), "run the signer on linux")
}
