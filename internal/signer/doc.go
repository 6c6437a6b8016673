// Package signer is tracectl's signing service (spec/signer.md): a process
// that holds the signing key, so a recorder that is compromised cannot take
// it, and signs for recorders on the same host over a Unix socket.
//
// What it guarantees:
//   - It signs only the statements a recorder makes: the signature preimage
//     of a TRACE v0.2 Trust Record (a checkpoint or the sealed record), the
//     record's RFC 8785 bytes without a signature member, parsed with
//     sign.ParseRecord, committing to a transcript, naming the server's key
//     in cnf.jwk (CheckStatement). Any other bytes are refused
//     (CodeNotAStatement), so the key never signs arbitrary data.
//   - One request and one response per connection, each one JSON text and an
//     LF, bounded (MaxRequestBytes, MaxResponseBytes); every refusal carries
//     a stable code (the Code constants, listed in spec/signer.md).
//   - A peer is served only if its uid (SO_PEERCRED, linux) is the server's
//     own or one it was given (CodePeerRefused otherwise).
//   - Signatures are rate limited by a token bucket (CodeRateLimited) and
//     each one is appended to a hash-chained journal, fsynced, before the
//     signature leaves the process (CheckJournal checks the chain).
//   - Client is a sign.Signer: it checks each signature it receives under
//     the server's public key before returning it.
//
// The package never prints, exits or reads the clock: time is an input.
package signer
