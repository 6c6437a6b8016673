// Package snapshot records complete, paginated MCP tools/list collections as
// declaration snapshots and checks them against their retained pages
// (spec/snapshot.md). The CLI compares two snapshots for declaration drift
// with internal/snapdiff.
//
// What it guarantees:
//   - Pages are evidence: the exact request and response bytes of every
//     tools/list exchange are kept and committed to by SHA-256. Nothing is
//     re-serialized, projected or decoded through a float.
//   - A manifest (canonical JSON under canon.PolicyV02, format id
//     ManifestFormat) records the collection facts: whether the first request
//     carried no cursor, each request cursor (absent, present, the empty
//     string being a real cursor), each page's nextCursor, ttlMs, cacheScope
//     and resultType as served, whether a terminal page was reached, why
//     collection stopped, list_changed notifications, duplicate and missing
//     tool names, and cache provenance. Its SHA-256 is the snapshot
//     commitment.
//   - Complete is computed from those facts and nothing else; an incomplete
//     collection is never reported as complete, and ParseManifest rejects a
//     manifest whose "complete" disagrees with its own facts.
//   - Each tool gets a declaration digest under canon.PolicyMCPDecl over the
//     tool object exactly as served (every member kept), or is marked
//     unsupported with the canon error code and a JSON Pointer: never dropped,
//     never coerced.
//   - Collection is bounded (Limits); reaching a limit stops collection and
//     the snapshot is incomplete with that reason.
//
// A complete snapshot records what tracectl observed. It does not prove an
// atomic server catalog across pages, a truthful server, or that the server
// executed the declaration it served.
//
// The Collector is passive (the stdio proxy feeds it what the client
// fetched); Capture drives a stdio server itself and feeds a Collector.
package snapshot
