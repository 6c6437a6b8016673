// Package canon is tracectl's canonicalization contract: a strict, bounded
// RFC 8259 parser and an RFC 8785 (JCS) serializer with explicit, named
// number policies. It refuses what it cannot represent; it never coerces.
//
// What it guarantees (spec/canonicalization.md):
//   - Duplicate member names are rejected at any depth, compared after
//     unescaping ({"a":1,"\u0061":2} is a duplicate).
//   - Invalid UTF-8, lone or reversed surrogates, raw control characters,
//     numbers outside the RFC 8259 grammar and trailing data are rejected.
//   - Input size and nesting depth are bounded (Limits).
//   - Numbers are judged from their exact decimal literal, never through a
//     float64 first, under a Policy that is recorded in the evidence:
//     PolicyV02 is TRACE v0.2's integer boundary; PolicyMCPDecl additionally
//     admits non-integers whose exact value survives the binary64 round trip.
//   - Output is RFC 8785: members sorted by UTF-16 code units, ES6 number
//     text, minimal string escapes, arrays in their given order.
//
// Every rejection is an *Error carrying a stable Code, the RFC 6901 JSON
// Pointer of the offending value and its byte offset.
package canon
