package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/sign"
)

type keygenOptions struct {
	out     string
	alg     string
	encrypt bool
	format  string
}

// keygenMediaType is the media type of `tracectl keygen --format json`.
const keygenMediaType = "application/vnd.tracectl.keygen.v1+json"

// keygenResult is what `tracectl keygen --format json` prints.
type keygenResult struct {
	MediaType  string `json:"media_type"`
	PrivateKey string `json:"private_key"` // the paths as given to --out
	PublicKey  string `json:"public_key"`
	Algorithm  string `json:"algorithm"`
	Encrypted  bool   `json:"encrypted"`
	// Thumbprint is the key's id: its RFC 7638 JWK thumbprint, which
	// verify reports as signer_thumbprint.
	Thumbprint string `json:"thumbprint"`
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newKeygenCmd(s, runKeygen) })
}

func newKeygenCmd(s streams, runF func(streams, *keygenOptions) error) *cobra.Command {
	o := &keygenOptions{}
	cmd := &cobra.Command{
		Use:   "keygen --out KEY [--alg ed25519|p256|p384] [--encrypt] [--format text|json]",
		Short: "Create a signing key pair (KEY and KEY.pub)",
		Long: `keygen writes a new private key to KEY (PKCS#8 PEM, mode 0600) and its public
key to KEY.pub (PKIX PEM), and prints the key's RFC 7638 JWK thumbprint: the
value verifiers match against cnf.jwk in the records this key signs.

It never overwrites: if KEY or KEY.pub exists, nothing is written.

With --encrypt the private key is written in sigstore's encrypted format
(scrypt + secretbox; cosign reads it too). The password comes from
TRACECTL_PASSWORD, or from a prompt (asked twice) when standard input is a
terminal.

Ed25519 is the default and the algorithm every TRACE v0.2 verifier accepts;
p256 and p384 records are signed with ECDSA in JWS r||s form, which other
verifiers may refuse (spec/signing.md).

--format json prints one JSON object: private_key, public_key, algorithm,
encrypted and thumbprint (what verify reports as signer_thumbprint).`,
		Example: "  tracectl keygen --out tracectl.key\n  TRACECTL_PASSWORD=... tracectl keygen --out ci.key --alg p256 --encrypt",
		Args:    cobra.NoArgs,
		RunE:    func(c *cobra.Command, args []string) error { return runF(s, o) },
	}
	cmd.Flags().StringVar(&o.out, "out", "", "path of the new private key; the public key goes to PATH.pub")
	cmd.Flags().StringVar(&o.alg, "alg", string(sign.Ed25519), "ed25519, p256 or p384")
	cmd.Flags().BoolVar(&o.encrypt, "encrypt", false, "encrypt the private key with a password ("+passwordEnv+" or a terminal prompt)")
	formatFlag(cmd, &o.format, keygenMediaType)
	return cmd
}

func runKeygen(s streams, o *keygenOptions) error {
	if err := checkFormat(o.format); err != nil {
		return err
	}
	if o.out == "" {
		return usageErr(errors.New("--out is required"), "tracectl keygen --out KEY writes KEY and KEY.pub")
	}
	alg, err := sign.ParseAlg(o.alg)
	if err != nil {
		return usageErr(err, "")
	}
	pubPath := o.out + sign.PublicKeySuffix
	// Checked before asking for a password; WriteKeyPair's exclusive
	// creation is what guarantees it.
	for _, p := range []string{o.out, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return refuseOverwrite(p)
		}
	}
	var password []byte
	if o.encrypt {
		password, err = keyPassword(s.in, s.err, "Password for the new key: ", true)
		if err != nil {
			return usageErr(err, passwordHint)
		}
	}
	key, err := sign.Generate(alg, rand.Reader)
	if err != nil {
		return err
	}
	if err := sign.WriteKeyPair(o.out, key, password); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return refuseOverwrite(o.out + " or " + pubPath)
		}
		return usageErr(err, "")
	}
	// Read back what was written, so the thumbprint printed is the one of
	// the key in the file.
	signer, err := sign.LoadKeyFile(o.out, func() ([]byte, error) { return password, nil })
	if err != nil {
		return fmt.Errorf("read back %s: %w", o.out, err)
	}
	tp, err := sign.Thumbprint(signer.Public())
	if err != nil {
		return err
	}
	if o.format == formatJSON {
		return writeJSON(s.out, keygenResult{MediaType: keygenMediaType, PrivateKey: o.out, PublicKey: pubPath,
			Algorithm: string(alg), Encrypted: o.encrypt, Thumbprint: tp})
	}
	_, err = fmt.Fprintf(s.out, "private key: %s\npublic key: %s\nthumbprint: %s\n", escapeTerminal(o.out), escapeTerminal(pubPath), tp)
	return err
}

func refuseOverwrite(path string) error {
	return usageErr(fmt.Errorf("%s already exists: keygen never overwrites a key", path),
		"choose another --out, or move the old key away yourself")
}
