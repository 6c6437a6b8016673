package canon

import (
	"fmt"
	"strconv"
)

// Policy decides which JSON numbers a canonical form may hold. Each policy
// has an identifier that evidence records next to every digest made under it,
// so a verifier knows which contract produced the bytes.
type Policy uint8

const (
	// PolicyV02 is the TRACE v0.2 boundary: a number is accepted iff its
	// exact value is an integer within ±MaxSafeInteger ("1.0", "1e3" and
	// "-0" are integers). It is written as plain integer text. Every other
	// number is unsupported. Trust Records always use this policy.
	PolicyV02 Policy = 1
	// PolicyMCPDecl is an explicit widening for MCP tool declarations, whose
	// schemas hold values such as "minimum": 0.5: integers as in PolicyV02,
	// and additionally a non-integer whose exact decimal value survives the
	// binary64 round trip: it is the shortest decimal that rounds to its
	// nearest binary64, so RFC 8785 writes the same value back ("0.1" and
	// "4.50" pass; "0.10000000000000000555" and "1e-400" do not).
	PolicyMCPDecl Policy = 2
)

// Policy identifiers as recorded in evidence. Never renamed.
const (
	PolicyV02ID     = "tracectl/jcs-trace-v0.2-int53"
	PolicyMCPDeclID = "tracectl/jcs-mcp-decl-exact-binary64"
)

// MaxSafeInteger is 2^53-1, the largest integer TRACE v0.2 admits.
const MaxSafeInteger = 9007199254740991

// ID returns the identifier recorded in evidence.
func (p Policy) ID() string {
	switch p {
	case PolicyV02:
		return PolicyV02ID
	case PolicyMCPDecl:
		return PolicyMCPDeclID
	}
	return "invalid-policy-" + strconv.Itoa(int(p))
}

func (p Policy) String() string { return p.ID() }

// ParsePolicy accepts a short name ("v02", "mcp-decl") or an identifier.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "v02", PolicyV02ID:
		return PolicyV02, nil
	case "mcp-decl", PolicyMCPDeclID:
		return PolicyMCPDecl, nil
	}
	return 0, fmt.Errorf("unknown canonicalization policy %q (want v02 or mcp-decl)", s)
}

func (p Policy) valid() bool { return p == PolicyV02 || p == PolicyMCPDecl }
