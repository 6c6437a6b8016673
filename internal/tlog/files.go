// Package tlog runs tracectl's transparency log: an embedded Tessera log on
// its POSIX driver (spec/anchoring.md, "The log"). It holds the signing key,
// takes additions over HTTP (POST /add) and serves the C2SP tlog-tiles read
// API (checkpoint, tiles, entry bundles) from the directory Tessera writes,
// so anyone can mirror the log with a static file copy. The Merkle tree,
// tiles, checkpoints and proofs are Tessera's; this package only wires them.
package tlog

// The log needs a POSIX file system (Tessera's POSIX driver: O_DIRECTORY,
// fcntl locks): the server builds everywhere but windows. These names are
// the log directory's layout, which readers of a mirror use everywhere.

// Files in the log's directory.
const (
	KeyFile   = "log.key" // the note signer key, 0600
	PubFile   = "log.pub" // the C2SP signed-note verifier key
	StaticDir = "log"     // Tessera's POSIX tree: the tlog-tiles read API
)
