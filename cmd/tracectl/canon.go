package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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
	var r io.Reader = s.in
	name := "standard input"
	if o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return usageErr(err, "")
		}
		defer f.Close()
		r, name = f, o.input
	}
	data, err := io.ReadAll(io.LimitReader(r, maxCanonInput))
	if err != nil {
		return usageErr(fmt.Errorf("read %s: %w", name, err), "")
	}
	out, err := canon.Canonicalize(data, p)
	if err != nil {
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
	if o.digest {
		_, err = fmt.Fprintln(s.out, canon.SHA256(out))
	} else {
		_, err = s.out.Write(out)
	}
	return err
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
