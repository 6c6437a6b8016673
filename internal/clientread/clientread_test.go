// Findings: where real MCP client readers disagree on the same server bytes.
// Each row is a class of input the gate must refuse (or must read exactly as
// the strictest reader and then refuse where any reader differs). W = WHATWG
// EventSource, Go = go-sdk v1.8.0 client, TS = TypeScript SDK v1.32.2 client
// (eventsource-parser 3.1.1 behind TextDecoderStream). Test: the table case
// that shows it.
//
// SSE (sse_test.go; the data handed to JSON parsing):
//
//	| input class                          | W              | Go                       | TS            |
//	|--------------------------------------|----------------|--------------------------|---------------|
//	| BOM before first field ("bom")       | read           | field "\ufeffdata" ignored: message lost | read |
//	| BOM then blank line                  | read           | line without colon: connection fails | read |
//	| lone CR line ends ("lone cr")        | A, B           | one message "A\r\rdata: B" | A only (a CR last in the body never ends its line) |
//	| CR inside an LF line                 | "A\nB"         | "A\rdata: B"             | "A\nB"        |
//	| final CR ("final cr")                | dispatched     | dispatched               | not dispatched |
//	| "event:  message" / "event: message "| not a message  | message (TrimSpace)      | not a message |
//	| "data:  x", "data: x ", NBSP, \v, \t | kept           | trimmed (unicode.IsSpace)| kept          |
//	|   -> JSON level: NBSP or \v around a JSON text: Go decodes it, W/TS JSON.parse refuses |
//	| field without colon ("data", "foo")  | data "" / ignored | connection fails      | as W          |
//	| final event without blank line / EOF | not dispatched | dispatched               | not dispatched |
//	| invalid UTF-8 in data                | U+FFFD         | raw bytes to the decoder | U+FFFD        |
//	| id with NUL                          | ignored        | kept                     | ignored       |
//	| id carried over / empty id resets    | yes / yes      | per event / "id" w/o colon fails | per event / ignores empty for Last-Event-ID |
//	| " id" spaces                         | " 7 "          | "7"                      | " 7 "         |
//
// JSON-RPC decoding (decode_test.go):
//
//	| input class                          | Go SDK                         | TS SDK                          |
//	|--------------------------------------|--------------------------------|---------------------------------|
//	| string-twin id "1" vs 1              | distinct ids                   | same: Number("1") == 1          |
//	| " 1 ", "0x1", "" string ids          | distinct                       | match requests 1, 1, 0          |
//	| float id 1.5                         | truncated to 1 (matches 1)     | refused (id must be safe int)   |
//	| id > 2^53                            | rounded through float64        | refused                         |
//	| unknown member / result+error / no result | accepted                  | refused (strict schema)         |
//	| bytes after the JSON value           | ignored (json.Decoder)         | refused (JSON.parse)            |
//	| BOM before application/json body     | refused                        | accepted (Response.json())      |
//	| batch array in application/json      | refused                        | accepted, each message acted on |
//	| repeated members                     | last wins                      | last wins (agree)               |
//
// stdio (stdio_test.go):
//
//	| input class                          | Go SDK (json.Decoder stream)   | TS SDK (LF lines)               |
//	|--------------------------------------|--------------------------------|---------------------------------|
//	| no final LF                          | read                           | never read                      |
//	| trailing space after a value         | connection fails               | read                            |
//	| two values on one line               | connection fails               | line refused, reading goes on   |
//	| lone CR between values               | both read                      | one line, refused               |
//	| value across lines                   | read                           | two lines, both refused         |
//	| a bad line, then good ones           | connection fails at the bad one| bad one reported, rest read     |
//
// Agreements (all three read the same): CRLF, several data lines, "data:"
// without space, "event: other" skipped, comments, unknown fields with a
// colon, empty data skipped, repeated "event" (last wins), two BOMs (none
// reads the event).
package clientread

import (
	"os"
	"strings"
	"testing"
)

// TestGoSDKVersion keeps the copies in gosdk.go tied to the SDK they copy.
func TestGoSDKVersion(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/modelcontextprotocol/go-sdk " + GoSDKVersion; !strings.Contains(string(b), want) {
		t.Errorf("go.mod does not require %s: recheck goSDKScanEvents and GoStdio against the new SDK and update GoSDKVersion", want)
	}
}
