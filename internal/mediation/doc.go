// Package mediation holds no code, only tests: they put tracectl between
// real MCP clients (the Go SDK, the TypeScript SDK v1 and v2) and a hostile
// server (internal/mcptest/hostile) that frames one tools/call answer so
// that parsers may read it two ways (issue 22), and check that a bundle that
// verifies records what the client acted on: either the client received
// result R and the verified bundle records R as the call's response, or the
// client received an error and the bundle records no response for the call.
//
// Each cell (client x transport x class) runs real processes: tracectl
// (built once per test binary), the hostile server, and for the TypeScript
// clients testdata/client.cjs under node, found as package
// internal/mcptest/tsclient finds them ($TRACECTL_TS_SDK_V1,
// $TRACECTL_TS_SDK_V2, $TRACECTL_NODE22_BIN, as .ci/run sets them, else
// .ci/npm/node_modules); a cell whose client is absent skips and says why.
// Each test logs a matrix of what each client received beside what the
// bundle records; judge in mediation_test.go lists the statuses.
package mediation
