// Package tshttp runs npm's TypeScript SDK v1 Streamable HTTP client
// (client.cjs) against a URL, for the HTTP proxy's tests. It is test
// support: it skips the test when the SDK or node is absent (see package
// tsclient for where they are found).
package tshttp

import (
	"testing"

	"github.com/tracectl/tracectl/internal/mcptest/tsclient"
)

// Event is one line the client printed.
type Event struct {
	Event   string `json:"event"`
	Text    string `json:"text"`
	Tools   int    `json:"tools"`
	Session bool   `json:"session"`
	Version string `json:"version"`
	Message string `json:"message"`
}

// Run runs the client against url with a bearer token and returns its
// events; it fails the test when the client fails.
func Run(t *testing.T, url, token string, scenario ...string) []Event {
	t.Helper()
	sdk := tsclient.V1(t)
	return tsclient.Run[Event](t, sdk.Node, []string{"internal", "mcptest", "tshttp", "client.cjs"}, append([]string{sdk.Dir, url, token}, scenario...)...)
}
