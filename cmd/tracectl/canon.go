package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/canon"
)

type canonOptions struct {
	policy string
	digest bool
	input  string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newCanonCmd(s, runCanon) })
}

func newCanonCmd(s streams, runF func(streams, *canonOptions) error) *cobra.Command {
	o := &canonOptions{}
	cmd := &cobra.Command{
		Use:   "canon [--policy v02|mcp-decl] [--digest] FILE|-",
		Short: "Print the RFC 8785 canonical form (or digest) of a JSON document",
		Long: `canon parses a JSON document strictly (duplicate keys, invalid UTF-8, lone
surrogates and non-RFC 8259 numbers are rejected) and prints its RFC 8785 form
under a named number policy. A value the policy cannot represent exactly is
refused with unsupported_number: it is never coerced.`,
		Example: "  tracectl canon record.json\n  tracectl canon --policy mcp-decl --digest tools.json\n  echo '{\"b\":1,\"a\":2}' | tracectl canon -",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.input = args[0]
			return runF(s, o)
		},
	}
	cmd.Flags().StringVar(&o.policy, "policy", "v02", "number policy: v02 (TRACE v0.2 integers) or mcp-decl (exact binary64 non-integers too)")
	cmd.Flags().BoolVar(&o.digest, "digest", false, "print sha256:<hex> of the canonical bytes instead of the bytes")
	return cmd
}

// maxCanonInput bounds what the command reads: the parser's own default
// limit, plus one byte so an oversized input is reported as size_limit.
const maxCanonInput = canon.DefaultMaxBytes + 1

func runCanon(s streams, o *canonOptions) error {
	p, err := canon.ParsePolicy(o.policy)
	if err != nil {
		return usageErr(err, "use --policy v02 or --policy mcp-decl")
	}
	// One document in, one out, then exit: the parse keeps everything it
	// allocates until the end, so a collection would find nothing to free.
	// The memory limit is the backstop that lets the collector run if a
	// hostile input ever makes it worth it.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(canonMemoryLimit))
	data, name, err := readCanonInput(s.in, o.input)
	if err != nil {
		return usageErr(err, "")
	}
	if o.digest {
		var d string
		if d, err = canon.Digest(data, p); err == nil {
			_, err = fmt.Fprintln(s.out, d)
			return err
		}
	} else {
		// Streamed in chunks: the canonical form is never held whole.
		// Nothing is written unless the whole document is accepted.
		var n int64
		if n, err = canon.WriteCanonical(s.out, data, p, canon.Limits{}); err == nil || n > 0 {
			return err
		}
	}
	var ce *canon.Error
	if errors.As(err, &ce) {
		ptr := ce.Pointer
		if ptr == "" {
			ptr = `""`
		}
		return usageErr(fmt.Errorf("%s at %s: %s (byte %d of %s)", ce.Code, ptr, ce.Detail, ce.Offset, name), canonHint(ce.Code))
	}
	return usageErr(err, "")
}

// canonMemoryLimit is the soft heap limit while canonicalizing: well above
// what the largest accepted input needs (about twice its size, and twice
// more for the growing buffer of a document read from a pipe).
const canonMemoryLimit = 8 * canon.DefaultMaxBytes

// readCanonInput reads the document: a regular file (standard input too,
// when it is one) in one read of exactly its size (no doubling buffer, no
// copy), anything else (a pipe) through a bounded ReadAll.
func readCanonInput(stdin io.Reader, input string) ([]byte, string, error) {
	if input == "-" {
		if f, ok := stdin.(*os.File); ok {
			data, err := readCanonFile(f, "standard input")
			return data, "standard input", err
		}
		data, err := io.ReadAll(io.LimitReader(stdin, maxCanonInput))
		if err != nil {
			return nil, "", fmt.Errorf("read standard input: %w", err)
		}
		return data, "standard input", nil
	}
	f, err := os.Open(input)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	data, err := readCanonFile(f, input)
	return data, input, err
}

func readCanonFile(f *os.File, name string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() >= maxCanonInput {
		data, err := io.ReadAll(io.LimitReader(f, maxCanonInput))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return data, nil
	}
	// From where the file is read (standard input may not be at its
	// start), and one byte more, to notice a file that grew meanwhile.
	pos, err := f.Seek(0, io.SeekCurrent)
	if err != nil || pos > fi.Size() {
		pos = 0
	}
	data := make([]byte, fi.Size()-pos+1)
	n, err := io.ReadFull(f, data)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return data[:n], nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	rest, err := io.ReadAll(io.LimitReader(f, maxCanonInput-int64(n)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return append(data, rest...), nil
}

func canonHint(c canon.Code) string {
	switch c {
	case canon.CodeUnsupportedNumber:
		return "the v02 policy admits only integers within ±(2^53-1); tool declarations may need --policy mcp-decl"
	case canon.CodeDuplicateKey:
		return "a member name appears twice in one object; the document is ambiguous and cannot be canonicalized"
	case canon.CodeSizeLimit:
		return "the input is larger than 64 MiB"
	}
	return ""
}
