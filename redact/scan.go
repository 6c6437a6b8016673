package redact

import (
	"bytes"
	"strings"
)

// Scan reports whether raw bytes that are not a redactable JSON message (a
// frame the gate refused, say) hold a secret as the rules see one: a
// detector's shape, an operator pattern, or a secret-like member name
// followed by a value. The caller then keeps none of the bytes; when Scan
// finds nothing, the exact bytes hold nothing Message would have hidden
// from any reading of them, and can be kept. rules nil means Default().
func Scan(raw []byte, rules *Rules) bool {
	if rules == nil {
		rules = Default()
	}
	if rules.classify(raw, &scratch{}) != "" {
		return true
	}
	if !rules.defaults {
		return false
	}
	// A secret-like name anywhere, quoted as a member name would be: the
	// value next to it is not found by position in bytes that do not parse.
	lower := bytes.ToLower(raw)
	for i := 0; i < len(lower); {
		j := bytes.IndexByte(lower[i:], '"')
		if j < 0 {
			break
		}
		start := i + j + 1
		end := bytes.IndexByte(lower[start:], '"')
		if end < 0 {
			break
		}
		if name := string(lower[start : start+end]); len(name) <= 64 && secretName(strings.TrimSpace(name)) {
			return true
		}
		i = start + end + 1
	}
	return false
}

// Policy says what the rules redact, for a record of the policy in force
// (never the rules' text: an operator's pattern can describe the secret).
func (r *Rules) Policy() (defaults bool, pointers, patterns int) {
	return r.defaults, r.nPointers, len(r.patterns)
}

// PolicyID names the built-in detector set: adding or changing a detector
// changes it.
const PolicyID = "tracectl/redact-v1"
