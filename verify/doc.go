// Package verify checks tracectl evidence offline and reports what it
// found as findings with stable codes (spec/verification.md).
//
// A Verifier is made from Options validated together: a reference time is
// required (the package never reads the clock), and the caller either names
// the key it trusts or explicitly accepts the record's embedded key, which
// proves internal consistency only. It then verifies one of:
//
//   - a bundle (Bundle): the signed TRACE v0.2 Trust Record, the transcript
//     it commits to (streamed; the RFC 6962 commitment recomputed over the
//     exact bytes received), every attempt's identity, retry link, outcome
//     history and snapshot binding, every snapshot's manifest and pages, and
//     every payload's bytes;
//   - a record alone (Record);
//   - a record and an inclusion proof of some of its transcript's lines
//     (Proof; ProveAttempt writes one).
//
// The result is a Report: a verdict (verified, failed, incomplete), the
// reference time, the trust basis, counts recomputed from the transcript, and
// findings {code, check, status, subject, detail}. The verdict follows from
// the statuses alone: any fail is failed; otherwise anything unavailable or
// unsupported, or trust on the embedded key only, is incomplete. Missing
// bytes are never a pass and never a mismatch. The error returned is nil iff
// the verdict is verified; otherwise it is a *VerdictError carrying the
// report, so a caller that only checks err fails safe.
//
// What a verified report does not say: that the server is who it claims
// (its identity and responses are the producer's observations), that the
// server's catalog was atomic across pages or truthful, that a call whose
// outcome is unknown did or did not execute, or that any business operation
// completed. Those limits are findings too (producer_observation_only,
// outcome_unknown).
//
// Evidence is hostile input. Bundle reads only regular files (DirFS opens
// them without following links or blocking on FIFOs; any fs.FS gets the
// regular-file check), scans the bundle for links and special files,
// reads the transcript within Limits, and keeps a few dozen bytes per
// attempt identity; nothing in a bundle can make it block or run without
// end (spec/verification.md, "Bounded input", "Resources").
//
// The package never imports the producer: a verifier needs nothing from the
// code that wrote the evidence. Package verifytest builds bundles for tests.
package verify
