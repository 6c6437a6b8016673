// Package transcript defines tracectl's evidence log: the wire types of
// transcript.jsonl (one RFC 8785 canonical JSON object per line, line 0 a
// header), the bundle layout, and the RFC 6962 Merkle commitment over the
// lines that a signed Trust Record carries as tool_transcript.hash.
//
// See spec/transcript.md for every event type and member, the identity and
// retry rules, and what each outcome does and does not prove.
package transcript
