// Package redact finds credentials in MCP JSON-RPC messages and command
// lines and replaces them before anything is retained. It changes what is
// stored, never what is forwarded: callers redact a copy for the evidence
// and commit to the exact original separately (DESIGN.md).
//
// What it guarantees:
//   - Exact bytes. Message parses the message with canon's strict parser
//     (duplicate member names allowed) and splices: each redacted value's
//     token is replaced by the JSON string "[REDACTED:<class>]", and every
//     other byte, whitespace and escapes included, is the input's. The
//     output is valid JSON of the same shape, except that a redacted value
//     of any type is now that string.
//   - Whole values. A secret found inside a longer string ("token=ghp_...
//     and more") redacts the whole string; a member whose name is
//     secret-like ("password", "clientSecret", "X-Api-Key", "set-cookie")
//     has its whole value redacted, whatever its type (null, booleans, ""
//     and empty containers are kept: they hide nothing). So has the "value"
//     of a name/value pair whose "name" (or "key") is secret-like
//     ({"name":"DB_PASSWORD","value":"..."}). One exception keeps schema
//     evidence: an object under a secret-like name inside a JSON Schema
//     "properties", "patternProperties", "$defs" or "definitions" map is a
//     parameter's declaration, and is searched, not redacted whole.
//   - Fail closed. A message that is not strict JSON, whose member names
//     themselves hold a secret, or with a value to redact under a repeated
//     member name (its pointer would be ambiguous), or at a pointer longer
//     than 1024 bytes (Check could not take it), is an *Error
//     (CodeInvalidMessage, CodeSecretInName, CodeAmbiguousPointer,
//     CodePointerTooLong): the caller withholds it whole.
//   - Idempotence. A value that already is a marker is never redacted
//     again, so Message(Message(m).Redacted) gives the same bytes and no
//     redactions; Argv likewise.
//   - Checkable without the rules. Check confirms that a list of
//     redactions describes the redacted bytes; apply re-applies a list to
//     the original, and apply(original, list) equals Message's output. A
//     verifier needs neither detectors nor patterns (DESIGN.md).
//   - Stable names. classes and Codes are never renamed; a Redaction is a
//     JSON Pointer and a Class, never an offset or a length.
//
// Detection runs on the decoded text of every string value and member name
// anywhere in the message (params, result, error, _meta). Built-in
// detectors, in order (the first match names the class): see classes.
//
// # Pointer bases
//
// An operator pointer (Config.Pointers, --redact) is an RFC 6901 pointer
// whose first reference token names its base:
//
//	/arguments/REST  the message's /params/arguments/REST (tools/call, prompts/get)
//	/result/REST     the message's /result/REST (any response)
//	/_meta/REST      the message's /params/_meta/REST and /result/_meta/REST
//
// "/arguments/db/password" redacts params.arguments.db.password of every
// request that has it; "/result/content/0/text" the first content block's
// text of every response. Array elements are named by their decimal index;
// there are no wildcards. The value at the pointer is redacted whole, as
// class operator_pointer, whatever its type; a pointer that reaches nothing
// in a message does nothing there. Pointers redact even with NoDefault.
//
// Operator patterns (Config.Patterns, --redact-pattern) are Go RE2
// expressions matched, unanchored, against the decoded text of every string
// value (class operator_pattern) and every argv entry; a pattern that
// matches the empty string is refused, as it would redact everything.
//
// A worked example: with the default rules,
//
//	{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch",
//	 "arguments":{"url":"https://api.example.com","headers":{"Authorization":"Bearer abc.def.123456"}}}}
//
// becomes (every other byte unchanged)
//
//	{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch",
//	 "arguments":{"url":"https://api.example.com","headers":{"Authorization":"[REDACTED:secret_name]"}}}}
//
// with one Redaction {"/params/arguments/headers/Authorization", "secret_name"}.
package redact
