package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes: the contract scripts rely on, the same for every command.
// exitCodeTable describes each; `tracectl help exit-codes`, README.md and
// spec/README.md list exactly that table (TestExitCodeTableDocumented).
const (
	exitOK         = 0   // success, verified, identical
	exitFailed     = 1   // verification failed, drift found
	exitUsage      = 2   // usage error or unreadable input
	exitIncomplete = 3   // evidence unavailable or unsupported
	exitWarnings   = 4   // verified, with warnings, under verify --fail-on warning
	exitIO         = 5   // a network or I/O failure
	exitInternal   = 125 // wrap, proxy: tracectl failed after it started recording
)

// exitServer stands for wrap's other statuses: the server's own.
const exitServer = -1

var exitCodeTable = []struct {
	code    int
	name    string
	meaning string
}{
	{exitOK, "ok", "success: verified, identical, written"},
	{exitFailed, "failed", "verification failed, drift found, or a vector failed"},
	{exitUsage, "usage", "a usage error, invalid options, or input that cannot be read as what it should be (a missing or malformed bundle, record or file; an output that already exists)"},
	{exitIncomplete, "incomplete", "evidence unavailable or unsupported: the verdict is incomplete"},
	{exitWarnings, "warnings", "verified with warnings, under verify --fail-on warning"},
	{exitIO, "io", "a network or I/O failure: a collector or upstream that cannot be reached or refuses, an address in use, a disk that fails or is full; the same command may succeed later"},
	{exitInternal, "internal", "wrap and proxy: tracectl itself failed after recording started (the evidence could not be made durable, sealing or signing failed); stderr names the command that recovers the bundle"},
	{exitServer, "server", "wrap: the server failed on its own; wrap exits with the server's status (128+N for signal N)"},
}

// exitCodeText is the code column: the number, or what stands for it.
func exitCodeText(code int) string {
	if code == exitServer {
		return "other"
	}
	return strconv.Itoa(code)
}

// exitCodesHelp is the text of `tracectl help exit-codes`.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Every tracectl command exits with one of these statuses; the verdict or the\n" +
		"failure decides it, never what was printed.\n\n")
	const indent = "                   " // the meaning column
	for _, e := range exitCodeTable {
		line := fmt.Sprintf("  %-5s %-10s ", exitCodeText(e.code), e.name)
		for i, w := range strings.Fields(e.meaning) {
			if i > 0 && len(line)+1+len(w) > 80 {
				b.WriteString(line + "\n")
				line = indent + w
				continue
			}
			if i > 0 {
				line += " "
			}
			line += w
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("\nverify of many bundles exits with the worst status among them: failed (1),\n" +
		"then unreadable (2), then incomplete (3), then warnings (4, under --fail-on\n" +
		"warning).")
	return b.String()
}

func init() {
	commands = append(commands, func(streams) *cobra.Command {
		// No Run: cobra lists it under "Additional help topics", and
		// `tracectl help exit-codes` prints it.
		return &cobra.Command{Use: "exit-codes", Short: "The exit status of every command", Long: exitCodesHelp()}
	})
}

func ioErr(err error, hint string) error { return &exitError{code: exitIO, err: err, hint: hint} }

// ioFailure reports an error of the network or the file system rather than
// of the invocation (exit 5, not 2): a peer that cannot be reached, refuses, resets or
// times out, an address in use, a failing, full or read-only disk. A
// malformed address stays a usage error.
func ioFailure(err error) bool {
	var addr *net.AddrError
	if errors.As(err, &addr) {
		return false
	}
	// Concrete types: syscall.Errno satisfies net.Error too, so that
	// interface would take every file error for a network one.
	var op *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	if errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &ue) {
		return true
	}
	for _, e := range []error{syscall.EIO, syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EPIPE,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EADDRINUSE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
