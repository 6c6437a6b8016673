package main

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tracectl/tracectl/sign"
	"golang.org/x/term"
)

// passwordEnv holds the password of an encrypted private key. Only the
// command layer reads it; package sign takes passwords as inputs.
const passwordEnv = "TRACECTL_PASSWORD"

const passwordHint = "set " + passwordEnv + ", or run tracectl in a terminal to be prompted"

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
func loadSigningKey(ctx context.Context, ref string) (sign.Signer, error) {
	if sign.IsKMSRef(ref) {
		s, err := sign.LoadKMS(ctx, ref)
		if err != nil {
			return nil, usageErr(err, "a KMS key <name>://... needs the sigstore-kms-<name> plugin on PATH")
		}
		return s, nil
	}
	s, err := sign.LoadKeyFile(ref, func() ([]byte, error) {
		return keyPassword(os.Stdin, os.Stderr, "Password for "+escapeTerminal(ref)+": ", false)
	})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, sign.ErrPasswordRequired):
		return nil, usageErr(err, passwordHint)
	case errors.Is(err, sign.ErrKeyDecrypt):
		return nil, usageErr(err, "check the password ("+passwordEnv+")")
	case errors.Is(err, sign.ErrUnsupportedKey):
		return nil, usageErr(err, "tracectl signs with Ed25519, ECDSA P-256 or P-384 keys: see tracectl keygen")
	}
	return nil, usageErr(err, "--key takes a private key file written by tracectl keygen, or a KMS reference")
}

// loadTrustedKey reads a trusted public key: the PEM file keygen wrote
// beside the private key (KEY.pub), or a public JWK.
func loadTrustedKey(path string) (crypto.PublicKey, error) {
	pub, err := sign.LoadPublicKeyFile(path)
	if err != nil {
		return nil, usageErr(err, "--trusted-key takes the .pub file tracectl keygen wrote, or a public JWK")
	}
	return pub, nil
}
