package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	signersvc "github.com/tracectl/tracectl/internal/signer"
	"github.com/tracectl/tracectl/sign"
)

// passwordEnv holds the password of an encrypted private key. Only the
// command layer reads it; package sign takes passwords as inputs.
const passwordEnv = "TRACECTL_PASSWORD"

const passwordHint = "set " + passwordEnv + ", pass --password-file FILE, or run tracectl in a terminal to be prompted"

// keyOptions are how a command that signs finds its key's password and how
// strict it is about the key file.
type keyOptions struct {
	passwordFile string // the password is this file's content (one trailing newline dropped)
	// unsafePermissions accepts a private key file that group or others
	// can read.
	unsafePermissions bool
	// signer is --signer unix:PATH: a tracectl signer serve holds the key
	// (wrap, proxy and seal; exclusive with --key).
	signer string
}

// signerFlag adds --signer to a command that records or seals.
func (k *keyOptions) signerFlag(c *cobra.Command) {
	c.Flags().StringVar(&k.signer, "signer", "", "sign through 'tracectl signer serve' at unix:PATH instead of holding a --key (spec/signer.md)")
}

// signs reports whether the command signs: with --key or through --signer.
// Both at once is a usage error.
func (k *keyOptions) signs(key string) (bool, error) {
	if key != "" && k.signer != "" {
		return false, usageErr(errors.New("--key and --signer exclude each other"), "--signer unix:PATH signs with the key the signer process holds")
	}
	if k.signer != "" {
		if p, ok := strings.CutPrefix(k.signer, "unix:"); !ok || p == "" {
			return false, usageErr(fmt.Errorf("--signer %q: want unix:PATH", k.signer), "the socket of 'tracectl signer serve --socket PATH'")
		}
	}
	return key != "" || k.signer != "", nil
}

func (k *keyOptions) flags(c *cobra.Command) {
	c.Flags().StringVar(&k.passwordFile, "password-file", "", "read the password of an encrypted --key from this file instead of "+passwordEnv)
	c.Flags().BoolVar(&k.unsafePermissions, "unsafe-key-permissions", false, "use a private key file that group or others can read")
}

// maxPasswordFile bounds what --password-file reads: a password, not a file.
const maxPasswordFile = 4096

func readPasswordFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --password-file: %w", sign.ErrPasswordRequired, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: --password-file: %w", sign.ErrPasswordRequired, err)
	}
	if len(b) > maxPasswordFile {
		return nil, fmt.Errorf("%w: --password-file %q: longer than %d bytes", sign.ErrPasswordRequired, path, maxPasswordFile)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: --password-file %q is empty", sign.ErrPasswordRequired, path)
	}
	return b, nil
}

// errKeyPermissions: a private key others can read is not private.
var errKeyPermissions = errors.New("private key is readable by group or others")

// checkKeyPermissions refuses a private key file whose mode lets group or
// others read or write it (ssh does the same). Windows has no such bits.
func checkKeyPermissions(path string, unsafe bool) error {
	if unsafe || runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil // the load reports it
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return usageErr(fmt.Errorf("--key %q: %w (mode %04o)", path, errKeyPermissions, perm),
			"run 'chmod 600 "+path+"', or pass --unsafe-key-permissions to use it anyway")
	}
	return nil
}

// keyPassword returns the password from TRACECTL_PASSWORD, or prompts on
// errw when in is a terminal (twice with confirm). Otherwise it fails with
// sign.ErrPasswordRequired: there is nobody to ask.
func keyPassword(in io.Reader, errw io.Writer, prompt string, confirm bool) ([]byte, error) {
	if pw, ok := os.LookupEnv(passwordEnv); ok {
		if pw == "" {
			return nil, fmt.Errorf("%w: %s is set but empty", sign.ErrPasswordRequired, passwordEnv)
		}
		return []byte(pw), nil
	}
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, fmt.Errorf("%w: %s is not set and standard input is not a terminal", sign.ErrPasswordRequired, passwordEnv)
	}
	read := func(p string) ([]byte, error) {
		fmt.Fprint(errw, p)
		pw, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(errw)
		return pw, err
	}
	pw, err := read(prompt)
	if err != nil {
		return nil, fmt.Errorf("read password: %w", err)
	}
	if len(pw) == 0 {
		return nil, fmt.Errorf("%w: empty password", sign.ErrPasswordRequired)
	}
	if confirm {
		again, err := read("Repeat the password: ")
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		if !bytes.Equal(pw, again) {
			return nil, errors.New("the passwords do not match")
		}
	}
	return pw, nil
}

// loadSigningKey loads the key a command signs with: a sigstore KMS
// reference ("<name>://...", served by the sigstore-kms-<name> plugin on
// PATH) or a PEM private key file, asking for the password of an encrypted
// key only when it is needed. Failures are usage errors with a hint.
func loadSigningKey(ctx context.Context, ref string, ko keyOptions) (sign.Signer, error) {
	if ko.signer != "" {
		return dialSigner(ctx, ko.signer)
	}
	if sign.IsKMSRef(ref) {
		s, err := sign.LoadKMS(ctx, ref)
		if err != nil {
			return nil, usageErr(err, "a KMS key <name>://... needs the sigstore-kms-<name> plugin on PATH")
		}
		return s, nil
	}
	if err := checkKeyPermissions(ref, ko.unsafePermissions); err != nil {
		return nil, err
	}
	s, err := sign.LoadKeyFile(ref, func() ([]byte, error) {
		if ko.passwordFile != "" {
			return readPasswordFile(ko.passwordFile)
		}
		return keyPassword(os.Stdin, os.Stderr, "Password for "+escapeTerminal(ref)+": ", false)
	})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, sign.ErrPasswordRequired):
		return nil, usageErr(err, passwordHint)
	case errors.Is(err, sign.ErrKeyDecrypt):
		return nil, usageErr(err, "check the password ("+passwordEnv+" or --password-file)")
	case errors.Is(err, sign.ErrUnsupportedKey):
		return nil, usageErr(err, "tracectl signs with Ed25519, ECDSA P-256 or P-384 keys: see tracectl keygen")
	}
	return nil, usageErr(err, "--key takes a private key file written by tracectl keygen, or a KMS reference")
}

// dialSigner connects to the signer at unix:PATH and gets its public key.
// A signer that cannot be reached is an I/O failure (exit 5); one that
// refuses this process is a usage error (exit 2).
func dialSigner(ctx context.Context, ref string) (sign.Signer, error) {
	path := strings.TrimPrefix(ref, "unix:")
	c, err := signersvc.Dial(ctx, path)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, signersvc.ErrPeerRefused):
		return nil, usageErr(err, fmt.Sprintf("the signer serves its own uid and each --allow-uid: this process runs as uid %d", os.Getuid()))
	case ioFailure(err) || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission):
		return nil, ioErr(err, "is 'tracectl signer serve --socket "+path+"' running, and may this user connect to the socket?")
	}
	return nil, ioErr(err, "")
}

// checkpointSigner is s signing checkpoints: a signer process journals
// what it signs by kind.
func checkpointSigner(s sign.Signer) sign.Signer {
	if c, ok := s.(*signersvc.Client); ok {
		return c.ForCheckpoints()
	}
	return s
}
