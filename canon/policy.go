package canon

import (
	"fmt"
	"strconv"

	"github.com/cockroachdb/apd/v3"
	"github.com/gowebpki/jcs"
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
	// and additionally a non-integer whose exact decimal value equals the
	// nearest binary64 value (so RFC 8785 can write it without changing it).
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

// Adjusted-exponent bounds beyond which a value cannot be a binary64 without
// overflow (above) or underflow to zero (below). Checked before apd does any
// work so a hostile exponent costs nothing.
const (
	maxAdjExp = 308
	minAdjExp = -324
)

// appendNumber appends the canonical text of the RFC 8259 number literal tok
// (already grammar-checked) under p, or returns the reason it is unsupported.
func appendNumber(dst, tok []byte, p Policy) ([]byte, string) {
	// Fast path: a plain integer literal of at most 15 digits is exact and
	// within range, and its text is already canonical (the grammar forbids
	// leading zeros) except for "-0".
	neg := tok[0] == '-'
	digits := tok
	if neg {
		digits = tok[1:]
	}
	plain := true
	for _, c := range digits {
		if c < '0' || c > '9' {
			plain = false
			break
		}
	}
	if plain {
		if len(digits) <= 15 {
			if neg && len(digits) == 1 && digits[0] == '0' {
				return append(dst, '0'), ""
			}
			return append(dst, tok...), ""
		}
		if len(digits) == 16 {
			if v, err := strconv.ParseUint(string(digits), 10, 64); err == nil && v <= MaxSafeInteger {
				return append(dst, tok...), ""
			}
		}
		return dst, "integer outside ±9007199254740991"
	}
	return appendDecimal(dst, tok, p)
}

func appendDecimal(dst, tok []byte, p Policy) ([]byte, string) {
	var d apd.Decimal
	if _, _, err := d.SetString(string(tok)); err != nil {
		// The grammar was checked, so this is an exponent apd cannot hold:
		// far outside every policy's range.
		return dst, "exponent out of range"
	}
	if d.IsZero() {
		return append(dst, '0'), "" // 0.0, -0e5, 0e999: the integer 0
	}
	adj := int64(d.Exponent) + d.NumDigits() - 1
	if adj >= 16 {
		return dst, "integer outside ±9007199254740991" // |d| >= 1e16
	}
	if adj >= 0 {
		var ip, frac apd.Decimal
		d.Modf(&ip, &frac)
		if frac.IsZero() {
			i, err := ip.Int64()
			if err != nil || i > MaxSafeInteger || i < -MaxSafeInteger {
				return dst, "integer outside ±9007199254740991"
			}
			return strconv.AppendInt(dst, i, 10), ""
		}
	}
	if p != PolicyMCPDecl {
		return dst, "non-integer number (policy " + p.ID() + " admits integers only)"
	}
	if adj > maxAdjExp || adj < minAdjExp {
		return dst, "non-integer outside the binary64 range"
	}
	f, err := d.Float64()
	if err != nil {
		return dst, "non-integer not representable as binary64"
	}
	var back apd.Decimal
	if _, err := back.SetFloat64(f); err != nil || d.Cmp(&back) != 0 {
		return dst, "non-integer whose exact value binary64 cannot hold (it would be rounded)"
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return dst, "non-integer not representable as binary64"
	}
	return append(dst, s...), ""
}
