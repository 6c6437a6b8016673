package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/attest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// attestMediaType is the media type of attest's --format json summary.
const attestMediaType = "application/vnd.tracectl.attest.v1+json"

type attestOptions struct {
	bundle string
	key    string
	out    string
	format string
	keys   keyOptions
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newAttestCmd(s, runAttest) })
}

func newAttestCmd(s streams, runF func(context.Context, streams, *attestOptions) error) *cobra.Command {
	o := &attestOptions{}
	cmd := &cobra.Command{
		Use:   "attest BUNDLE [--key KEY] [--out FILE] [--format text|json]",
		Short: "Restate a verified bundle's signed record as an in-toto attestation (DSSE)",
		Long: `attest writes the bundle's signed Trust Record as an in-toto Statement v1 in
a DSSE envelope (spec/attest.md), signed by the producer key that signed the
record, for tools that consume attestations (cosign, policy engines, any DSSE
verifier). Its subjects are record.json (SHA-256 of its exact bytes) and
transcript-root (the transcript commitment); its predicate is the record.

attest first verifies the bundle with --key's public key as the trusted key,
as of the record's own issue time (--at issued: an old record is not a false
one). It refuses a key that did not sign the record, and a bundle that does
not verify: an attestation never vouches for evidence verify would reject.
Only Ed25519 keys sign attestations.

The envelope goes to standard output, or to --out FILE, created new (an
existing file is never overwritten) with mode 0644; with --out a summary is
printed (--format json: ` + attestMediaType + `).

Exit status: 0 written, 1 the bundle failed verification, 3 its verdict is
incomplete, 2 a usage error (a wrong or unsupported key, an unsigned or
unreadable bundle, an existing --out).`,
		Example: "  tracectl attest --key key.pem run.trace > run.intoto.json\n" +
			"  tracectl attest --key key.pem --out run.intoto.json --format json run.trace",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.key, "key", "", "the producer's signing key (a PEM file or a KMS reference): the key that signed the record")
	f.StringVar(&o.out, "out", "", "write the envelope to this new file (default: standard output)")
	f.StringVar(&o.format, "format", "text", "summary format with --out: text or json ("+attestMediaType+")")
	o.keys.flags(cmd)
	return cmd
}

var (
	errAttestWrongKey   = errors.New("the key did not sign the record")
	errAttestUnverified = errors.New("the bundle does not verify: an attestation never vouches for evidence verify rejects")
)

func runAttest(ctx context.Context, s streams, o *attestOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.format != "text" && o.format != "json" {
		return usageErr(fmt.Errorf("unknown format %q", o.format), "use --format text or --format json")
	}
	if o.format == "json" && o.out == "" {
		return usageErr(errors.New("--format describes the summary printed with --out"), "the envelope itself is JSON: give --out FILE, or drop --format")
	}
	if o.key == "" {
		return usageErr(errors.New("attest needs --key: the key that signed the record"), "tracectl attest --key KEY BUNDLE")
	}
	signer, err := loadSigningKey(ctx, o.key, o.keys)
	if err != nil {
		return err
	}
	if signer.Alg() != sign.Ed25519 {
		return usageErr(fmt.Errorf("--key: %w (it is %s)", attest.ErrUnsupportedKey, signer.Alg()), "")
	}
	keyID, err := sign.Thumbprint(signer.Public())
	if err != nil {
		return usageErr(err, "")
	}
	// The record's bytes are read once: verify checks these bytes, and the
	// statement names their digest, whatever happens to the file meanwhile.
	recordPath := filepath.Join(o.bundle, transcript.RecordFile)
	record, err := readRegular(recordPath, sign.MaxRecordBytes+1)
	if err != nil {
		return usageErr(err, "attest takes a signed bundle; sign one sealed without a key with 'tracectl seal --bundle DIR --key KEY'")
	}
	if len(record) > sign.MaxRecordBytes {
		return usageErr(fmt.Errorf("%s: %w: more than %d bytes", recordPath, verify.ErrTooLarge, sign.MaxRecordBytes), "")
	}
	v, err := verify.New(verify.Options{AtIssued: true, TrustedKey: signer.Public()})
	if err != nil {
		return usageErr(err, "")
	}
	rep, verr := v.Bundle(ctx, pinnedFS{FS: verify.DirFS(o.bundle), name: transcript.RecordFile, data: record})
	if rep == nil {
		return usageErr(fmt.Errorf("bundle %s: %w", o.bundle, verr), "a bundle directory holds record.json and transcript.jsonl")
	}
	if rep.Signer != "" && rep.Signer != keyID {
		return usageErr(fmt.Errorf("--key %s: %w (the key's thumbprint is %s, the record's signer %s)", o.key, errAttestWrongKey, keyID, rep.Signer),
			"give the private key of the producer that signed this bundle")
	}
	hint := "see the findings with 'tracectl verify --trusted-key PUB --at issued " + o.bundle + "'"
	switch rep.Verdict {
	case verify.Verified:
	case verify.Incomplete:
		return &exitError{code: exitIncomplete, err: fmt.Errorf("%w: %w", errAttestUnverified, verr), hint: hint}
	default:
		return &exitError{code: exitFailed, err: fmt.Errorf("%w: %w", errAttestUnverified, verr), hint: hint}
	}
	st, err := attest.Statement(record)
	if err != nil {
		return usageErr(err, "")
	}
	env, err := attest.Sign(ctx, st, signer)
	if err != nil {
		return usageErr(err, "")
	}
	env = append(env, '\n')
	if o.out == "" {
		_, err := s.out.Write(env)
		return err
	}
	if err := writeNewPublic(o.out, env); err != nil {
		return err
	}
	return writeAttestSummary(s.out, o, keyID, canon.SHA256(record), rep.Root)
}

// writeNewPublic creates path (never an existing file) with mode 0644: an
// attestation is meant to be handed out.
func writeNewPublic(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if ioFailure(err) {
			return ioErr(err, "")
		}
		return usageErr(err, "the output must not exist yet; choose a new path")
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return ioErr(fmt.Errorf("write %s: %w", path, err), "")
	}
	return nil
}

func writeAttestSummary(w io.Writer, o *attestOptions, keyID, recordDigest, root string) error {
	if o.format == "json" {
		b, err := json.MarshalIndent(struct {
			MediaType     string            `json:"media_type"`
			Bundle        string            `json:"bundle"`
			Out           string            `json:"out"`
			PredicateType string            `json:"predicate_type"`
			KeyID         string            `json:"keyid"`
			Subjects      map[string]string `json:"subjects"`
		}{attestMediaType, o.bundle, o.out, attest.PredicateType, keyID,
			map[string]string{attest.SubjectRecord: recordDigest, attest.SubjectTranscriptRoot: root}}, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(jsonSafe(b), '\n'))
		return err
	}
	_, err := fmt.Fprintln(w, escapeTerminal(fmt.Sprintf("%s: attestation of %s: %s %s, %s %s; keyid %s",
		o.out, o.bundle, attest.SubjectRecord, recordDigest, attest.SubjectTranscriptRoot, root, keyID)))
	return err
}

// pinnedFS serves one file from memory and the rest from FS, so verify
// checks exactly the bytes attest restates.
type pinnedFS struct {
	fs.FS
	name string
	data []byte
}

func (p pinnedFS) Open(name string) (fs.File, error) {
	if name != p.name {
		return p.FS.Open(name)
	}
	return &memFile{Reader: bytes.NewReader(p.data), name: name, size: int64(len(p.data))}, nil
}

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{m.name, m.size}, nil }
func (m *memFile) Close() error               { return nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
