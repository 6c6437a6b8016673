// Package canon is tracectl's canonicalization contract: a strict, bounded
// RFC 8259 parser and an RFC 8785 (JCS) serializer with explicit, named
// number policies. It refuses what it cannot represent; it never coerces.
// spec/canonicalization.md is the normative description; section numbers
// below refer to it.
//
// What it guarantees:
//   - Duplicate member names are rejected at any depth, compared after
//     unescaping ({"a":1,"\u0061":2} is a duplicate) (section 2).
//   - Invalid UTF-8, lone or reversed surrogates, raw control characters,
//     numbers outside the RFC 8259 grammar and trailing data are rejected
//     (section 2).
//   - Input size and nesting depth are bounded, inclusively, by Limits:
//     64 MiB and 1,000 levels by default (section 3).
//   - Numbers are judged from the exact decimal value of their literal,
//     never through a float64 first, under a Policy whose identifier is
//     recorded in the evidence: PolicyV02 is TRACE v0.2's boundary (integers
//     by value within ±(2^53-1)); PolicyMCPDecl additionally admits
//     non-integers whose exact value survives the binary64 round trip
//     (section 4).
//   - Output is RFC 8785: members sorted by UTF-16 code units, ES6 number
//     text, minimal string escapes, arrays in their given order (section 5).
//   - Every rejection is an *Error carrying a stable Code, the RFC 6901 JSON
//     Pointer of the offending value and its byte offset; for a given input
//     every entry point reports the same error and writes nothing (section 6).
//   - Digests are "sha256:" and 64 lowercase hex digits over the canonical
//     bytes, streamed into the hash (section 7).
//
// A worked example. Under PolicyMCPDecl the input
//
//	{ "name": "get_weather", "inputSchema": { "minimum": 0.50, "maximum": 1e2 } }
//
// canonicalizes to
//
//	{"inputSchema":{"maximum":100,"minimum":0.5},"name":"get_weather"}
//
// (1e2 is the integer 100; 0.50 is the decimal 0.5, which binary64 keeps).
// Under PolicyV02 it is refused: unsupported_number at /inputSchema/minimum
// (byte 53). With "minimum": 0.10000000000000000555 it is refused under
// both, because binary64 would round it to 0.1.
package canon
