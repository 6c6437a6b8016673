package producer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// StdioServer describes a stdio MCP server as the producer observes it at
// start: the resolved executable path, the SHA-256 of the executable file's
// bytes (read through fsys) and the SHA-256 of the canonical JSON array of
// its arguments with their count. The arguments themselves are never
// recorded: they may hold secrets. name is an operator's label, not an
// authenticated identity.
func StdioServer(fsys FS, executable string, args []string, name string) (transcript.Server, error) {
	if fsys == nil {
		fsys = osFS{}
	}
	if len(executable) > transcript.MaxPathBytes || len(name) > transcript.MaxReportedBytes {
		return transcript.Server{}, fmt.Errorf("%w: server path or name too long", ErrInvalidOptions)
	}
	for i, a := range args {
		if !utf8.ValidString(a) {
			// JCS has no form for it, and replacing bytes would commit to
			// different arguments than the server got.
			return transcript.Server{}, fmt.Errorf("%w: server argument %d is not UTF-8", ErrInvalidOptions, i+1)
		}
	}
	if args == nil {
		args = []string{}
	}
	// The argv is counted, not committed by digest: an unsalted digest of
	// a command line lets anyone holding the bundle confirm a guessed
	// secret in it (--api-key hunter2), and nothing checks it.
	if _, err := canon.Marshal(args); err != nil {
		return transcript.Server{}, fmt.Errorf("%w: server arguments: %w", ErrInvalidOptions, err)
	}
	f, err := fsys.OpenFile(executable, os.O_RDONLY, 0)
	if err != nil {
		return transcript.Server{}, fmt.Errorf("read server executable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return transcript.Server{}, fmt.Errorf("read server executable: %w", err)
	}
	return transcript.Server{
		Transport:        transcript.TransportStdio,
		Executable:       executable,
		ExecutableSHA256: "sha256:" + hex.EncodeToString(h.Sum(nil)),
		Argc:             int64(len(args)),
		Name:             name,
	}, nil
}
