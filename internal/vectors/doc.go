// Package vectors holds the acceptance vectors of the proposed TRACE v0.3
// MCP transcript profile's section 6 as tracectl implements it
// (spec/vectors.md): the data, the generator that makes it, and the runner
// that scores a verifier against it.
//
// What it guarantees:
//   - Every row of section 6 has a positive control and each negative or
//     boundary case the row names, as a directory of files: an evidence
//     bundle (or, for row 4, also a single JSON value) and a vector.json
//     with the expected verdict and the required and forbidden codes, drawn
//     from the closed lists of spec/verification.md and
//     spec/canonicalization.md.
//   - Generate is deterministic: a fixed Ed25519 seed, a fixed clock and
//     fixed entropy are its only inputs, and evidence is recorded through
//     the real producer into memory. The committed vectors (testdata/v2,
//     also compiled in: Embedded) are its output byte for byte, so a change
//     to any format shows as a diff.
//   - A faulted bundle that must still be validly signed is faulted before
//     its record is signed again with the same key, so each vector fails for
//     the reason it names, never for a broken signature.
//   - ParseManifest and ParseOutcome are strict and bounded; the manifest is
//     its own canonical form, so parsing and encoding give the same bytes.
//   - Run never decides by printing: each Result says whether its vector
//     passed and why not.
//
// The package never reads the clock or the environment; WriteDir writes
// only where it is told, creating every file exclusively.
package vectors
