// Package clientread is the reference side of tracectl's differential fuzz
// test: it says what real MCP clients read from the bytes a server sends, so a
// fuzz target can compare those readings with the recorder's strict gate
// (package mcpwire) and refuse any frame that some client reads differently.
//
// Each reader is either the client's own code run for real, or a copy of it
// that names the file and version it was copied from and is tested against
// the original:
//
//   - [WHATWG]: the HTML standard's event stream interpretation (what a
//     browser's EventSource dispatches).
//   - [GoSDK], [GoSDKMessages], [GoSDKDecode], [GoStdio]: the Go MCP SDK
//     (github.com/modelcontextprotocol/go-sdk v1.8.0) client's SSE reader,
//     the events its streamable client hands to its JSON-RPC decoder, that
//     decoder, and its stdio framing.
//   - [Node]: the TypeScript SDK v1 client's readers run in Node: the
//     eventsource-parser package behind TextDecoderStream, the SDK's own
//     JSONRPCMessageSchema, fetch's Response.json(), the stdio ReadBuffer,
//     and Protocol's Number(response.id).
//   - [TSStdioLines], [JSNumber]: Go mirrors of the stdio ReadBuffer's
//     framing and of JavaScript's Number(string), tested against Node.
//
// The readers disagree with one another on some inputs; the table at the top
// of clientread_test.go lists each disagreement found. A frame on which they
// disagree is one the gate must refuse.
//
// Nothing here is used on tracectl's data path: these are test oracles, and
// they are not bounded the way tracectl's own parsers are.
package clientread

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the event type ("event" field). Empty means the reader had no
	// type: every reader here treats "" like "message".
	Type string
	Data string
	// ID is the event's id as the reader reports it; see each reader for
	// whether it carries over from earlier events.
	ID string
}

// IsMessage reports whether both MCP SDKs would pass e's data to their
// JSON-RPC decoder: a type of "" or "message", and non-empty data.
func (e Event) IsMessage() bool {
	return (e.Type == "" || e.Type == "message") && e.Data != ""
}
