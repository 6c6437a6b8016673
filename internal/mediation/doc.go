// Package mediation holds no code, only tests: they put tracectl between
// real MCP clients (the Go SDK, the TypeScript SDK v1 and v2) and a hostile
// server (internal/mcptest/hostile) that frames one tools/call answer so
// that parsers may read it two ways (issue 22), and check that a bundle that
// verifies records what the client acted on: either the client received
// result R and the verified bundle records R as the call's response, or the
// client received an error and the bundle records no response for the call.
package mediation
