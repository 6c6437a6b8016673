// Package transcript defines tracectl's evidence log: the wire types of
// transcript.jsonl (one RFC 8785 canonical JSON object per line, line 0 a
// header), the bundle layout, and the RFC 6962 Merkle commitment over the
// lines that a signed Trust Record carries as tool_transcript.hash.
//
// What it guarantees (spec/transcript.md):
//   - DecodeLine accepts a line only if it is canonical under
//     canon.PolicyV02, of a known event type, with every required member
//     present, no unknown member, optional members absent rather than
//     empty, and values the format allows; the decoded event re-encodes to
//     exactly the line's bytes. Rejections are *LineError with a stable Code.
//   - Reader streams a transcript in memory bounded by MaxLineBytes: line 0
//     is the header, seq is contiguous, nothing follows the seal, attempts
//     name the header's execution scope, and a final line without its LF is
//     reported as torn_line with its bytes, never dropped.
//   - Committer computes the commitment in O(log n) memory: leaf =
//     SHA-256(0x00 || line without LF), node = SHA-256(0x01 || left ||
//     right), RFC 6962's tree shape (golang.org/x/mod/sumdb/tlog hashing).
//   - Prove and CheckProof disclose chosen lines with their audit paths
//     (and always the last line, which binds the tree size); ParseProof is
//     bounded and strict.
//
// The package reads and writes nothing itself: producers (package producer)
// append lines, verifiers (package verify) read them. Attempt-level checks
// that need the whole history (ids unique, observations naming known
// attempts, counts) belong to the verifier.
package transcript
