package transcript

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

func i64(v int64) *int64 { return &v }

// validEvents is one or more valid instance of every event type.
func validEvents() []Event {
	h := sampleHeader()
	hb := sampleHeader()
	hb.Durability, hb.Limits.BatchIntervalMs, hb.Retention = DurabilityBatch, 10, RetainDigest
	hb.Producer.KeyThumbprint = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
	a := sampleAttempt(1, "a1")
	a2 := sampleAttempt(2, "a2")
	a2.RetryOf, a2.RetryBasis = "a1", BasisInferred
	a2.RPCID = JSONRPCID{Present: true, Kind: IDString, Text: `""`}
	a2.Correlation = Correlation{
		Traceparent:   &CorrValue{Valid: true, Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Tracestate:    &CorrValue{Valid: false, Reason: CorrBadShape},
		CorrelationID: &CorrValue{Valid: true, Value: "req-42"},
		RetryOf:       &CorrValue{Valid: false, Reason: CorrTooLong},
	}
	a3 := sampleAttempt(3, "a3")
	a3.Tool, a3.ToolInvalid, a3.ArgsDigest, a3.ArgsUnsupport = "", toolTooLong, "", "unsupported_number"
	a3.RPCID = JSONRPCID{Present: false}
	a3.Protocol = AttemptProto{Era: mcpwire.EraLegacy, State: ProtoNegotiated, Value: "2025-11-25"}
	a3.Snapshot = SnapshotRef{NoneReason: NoneNoSnapshot}
	a3.Terminator = mcpwire.TermNone
	a4 := sampleAttempt(4, "a4")
	a4.RPCID = JSONRPCID{Present: true, Kind: IDString, Digest: dig1}
	a4.Protocol = AttemptProto{Era: mcpwire.EraUnknown, State: ProtoMalformed}
	a4.Snapshot.ListChangedSince = true
	a4.Request.OverLimit, a4.Request.Retained = true, false
	errObs := &Observation{Type: typeObservation, Seq: 5, AtMs: 3, AttemptID: "a1", Kind: ObsResponse, ResultType: ResultTypeError,
		ErrorCode: i64(0), Response: &Payload{Digest: dig1, Length: 3}, Terminator: mcpwire.TermCRLF, Basis: BasisProducer}
	return []Event{
		h, hb,
		&Protocol{Type: typeProtocol, Seq: 1, AtMs: 1, Era: mcpwire.EraLegacy, Version: "2025-11-25", Source: SourceInitialize, ServerName: "srv", Payload: &Payload{Digest: dig1, Length: 10, Retained: true}},
		&SnapshotEvent{Type: typeSnapshot, Seq: 2, AtMs: 1, SnapshotID: "s1", ManifestDigest: dig1, Complete: true, Tools: 3, Pages: 1},
		&SnapshotEvent{Type: typeSnapshot, Seq: 2, AtMs: 1, SnapshotID: "s2", ManifestDigest: dig1, IncompleteReason: "repeated_cursor", Tools: 3, Pages: 2, Reuse: true},
		&Notification{Type: typeNotification, Seq: 3, AtMs: 1, Method: "notifications/tools/list_changed", Direction: ServerToClient, Payload: Payload{Digest: dig1, Length: 5, Retained: true}},
		&Notification{Type: typeNotification, Seq: 3, AtMs: 1, Method: "notifications/cancelled", Direction: ClientToServer, RequestID: &JSONRPCID{Present: true, Kind: IDNumber, Text: "-0"}, AttemptID: "a1", Payload: Payload{Digest: dig1, Length: 5}},
		a, a2, a3, a4,
		sampleResponse(5, "a1"), errObs,
		&Observation{Type: typeObservation, Seq: 5, AtMs: 3, AttemptID: "a1", Kind: ObsTimeout, Basis: BasisProducer},
		&Observation{Type: typeObservation, Seq: 5, AtMs: 3, AttemptID: "a1", Kind: ObsTransportFailure, Detail: "server exited: signal: killed", Basis: BasisProducer},
		&Resolution{Type: typeResolution, Seq: 6, AtMs: 4, AttemptID: "a1", Outcome: OutcomeUnknown, Reason: ReasonProducerCrashed},
		&Recovery{Type: typeRecovery, Seq: 7, AtMs: 4, Detail: "clean"},
		&Recovery{Type: typeRecovery, Seq: 7, AtMs: 4, TornDigest: dig1, TornLength: 17, TornFile: QuarantinePath(dig1), Detail: "torn final line quarantined"},
		&Seal{Type: typeSeal, Seq: 8, AtMs: 5, Attempts: 3, Responses: 1, TransportFailures: 1, Unknown: 1, Recovered: true},
		&HTTPEvent{Type: typeHTTP, Seq: 9, AtMs: 6, Event: HTTPRequest, Exchange: 1, Method: "POST", Path: "/mcp", ContentType: "application/json",
			Headers: map[string]string{"mcp-method": "tools/call", "mcp-name": "echo \"quoted\""}, HeaderDigests: map[string]string{"mcp-param-x": dig1},
			Session: dig1, Connection: dig1, Credentials: []string{"authorization", "cookie"}, Frame: i64(0)},
		&HTTPEvent{Type: typeHTTP, Seq: 10, AtMs: 6, Event: HTTPUpstream, URL: "https://example.test/mcp",
			TLS: &HTTPTLS{Version: "TLS 1.3", SPKISHA256: dig1, Chain: ChainVerified, ChainLen: 2}},
		&HTTPEvent{Type: typeHTTP, Seq: 11, AtMs: 7, Event: HTTPResponse, Exchange: 1, Status: 200, ContentType: "text/event-stream"},
	}
}

func TestDecodeLineRoundTrip(t *testing.T) {
	for _, want := range validEvents() {
		line := mustLine(t, want)
		got, err := DecodeLine(line)
		if err != nil {
			t.Errorf("DecodeLine(%s): %v", line, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeLine(%s) = %+v, want %+v", line, got, want)
		}
	}
}

// mutate re-encodes v's line with the edit applied as a JSON text replace.
func mutated(t *testing.T, v any, old, new string) []byte {
	t.Helper()
	s := string(mustLine(t, v))
	if !strings.Contains(s, old) {
		t.Fatalf("%s does not contain %s", s, old)
	}
	out := []byte(strings.Replace(s, old, new, 1))
	if c, err := canon.Canonicalize(out, canon.PolicyV02); err == nil && !bytes.Equal(c, out) {
		// Keep the mutation canonical, so the test reaches the member check.
		out = c
	}
	return out
}

func TestDecodeLineRejects(t *testing.T) {
	h, a := sampleHeader(), sampleAttempt(1, "a1")
	obs := sampleResponse(2, "a1")
	withEdit := func(v any, edit func()) []byte { edit(); return mustLine(t, v) }
	attempt := func(edit func(a *Attempt)) []byte { x := sampleAttempt(1, "a1"); edit(x); return mustLine(t, x) }
	tests := []struct {
		name string
		line []byte
		code string
	}{
		{"empty", nil, CodeNotCanonical},
		{"whitespace", []byte(" " + string(mustLine(t, a))), CodeNotCanonical},
		{"key order", []byte(`{"type":"seal","seq":1}`), CodeNotCanonical},
		{"duplicate", []byte(`{"seq":1,"seq":1,"type":"seal"}`), CodeNotCanonical},
		{"float", mutated(t, a, `"at_ms":1700000000001`, `"at_ms":1.5`), CodeNotCanonical},
		{"array", []byte(`[1]`), codeUnknownType},
		{"no type", []byte(`{"seq":1}`), codeUnknownType},
		{"type number", []byte(`{"seq":1,"type":1}`), codeUnknownType},
		{"unknown type", []byte(`{"seq":1,"type":"completion"}`), codeUnknownType},
		{"missing required", mutated(t, a, `"terminator":"lf",`, ``), CodeInvalidMember},
		{"unknown member", mutated(t, a, `"tool":"echo"`, `"tool":"echo","zzz":1`), CodeInvalidMember},
		{"case-folded member", mutated(t, a, `"tool":"echo"`, `"Tool":"echo"`), CodeInvalidMember},
		{"empty optional present", mutated(t, a, `"tool":"echo"`, `"retry_of":"","tool":"echo"`), CodeInvalidMember},
		{"false optional present", mutated(t, a, `"complete":true`, `"complete":true,"list_changed_since":false`), CodeInvalidMember},
		{"null for string", mutated(t, a, `"tool":"echo"`, `"tool":null`), CodeInvalidMember},
		{"wrong type", mutated(t, a, `"tool":"echo"`, `"tool":7`), CodeInvalidMember},
		{"retry without basis", attempt(func(a *Attempt) { a.RetryOf = "a0" }), CodeInvalidMember},
		{"bad basis", withEdit(a, func() { a.RetryOf, a.RetryBasis = "a0", "guessed" }), CodeInvalidMember},
		{"self retry", attempt(func(a *Attempt) { a.RetryOf, a.RetryBasis = "a1", BasisCallerDeclared }), CodeInvalidMember},
		{"tool and tool_invalid", attempt(func(a *Attempt) { a.ToolInvalid = toolAbsent }), CodeInvalidMember},
		{"absent id with text", attempt(func(a *Attempt) { a.RPCID.Present = false }), CodeInvalidMember},
		{"id text and digest", attempt(func(a *Attempt) { a.RPCID.Digest = dig1 }), CodeInvalidMember},
		{"id text over limit", attempt(func(a *Attempt) { a.RPCID.Text = strings.Repeat("1", MaxRPCIDTextBytes+1) }), CodeInvalidMember},
		{"proto value when absent", attempt(func(a *Attempt) { a.Protocol.State = ProtoAbsent }), CodeInvalidMember},
		{"snapshot none with binding", attempt(func(a *Attempt) { a.Snapshot.NoneReason = NoneNoSnapshot }), CodeInvalidMember},
		{"invalid correlation with value", attempt(func(a *Attempt) { a.Correlation.CorrelationID = &CorrValue{Value: "x", Reason: CorrBadShape} }), CodeInvalidMember},
		{"valid correlation of bad shape", attempt(func(a *Attempt) { a.Correlation.CorrelationID = &CorrValue{Valid: true, Value: "a b"} }), CodeInvalidMember},
		{"other scope id chars", attempt(func(a *Attempt) { a.AttemptID = "a 1" }), CodeInvalidMember},
		{"bad digest", mutated(t, obs, dig2, "sha256:ABC"), CodeInvalidMember},
		{"response kind without payload", mutated(t, obs, `"kind":"response"`, `"kind":"timeout"`), CodeInvalidMember},
		{"header format", withEdit(h, func() { h.Format = "tracectl.transcript/v5" }), CodeUnsupportedFormat},
		{"v3 with an argv digest", withEdit(h, func() { h.Format, h.Server.ArgsDigest = Format, dig2 }), CodeInvalidMember},
		{"v1 with frames", withEdit(h, func() { h.Format, h.FramesCommitted = formatV1, true }), CodeInvalidMember},
		{"attempt at seq 0", mustLine(t, sampleAttempt(0, "a1")), CodeInvalidMember},
		{"seal counts", mustLine(t, &Seal{Type: typeSeal, Seq: 3, Attempts: 2, Responses: 1}), CodeInvalidMember},
		{"recovery torn without file", mustLine(t, &Recovery{Type: typeRecovery, Seq: 3, TornDigest: dig1, TornLength: 3, Detail: "x"}), CodeInvalidMember},
		{"batch interval in strict", func() []byte { x := sampleHeader(); x.Limits.BatchIntervalMs = 5; return mustLine(t, x) }(), CodeInvalidMember},
		{"too long", append(mustLine(t, sampleAttempt(1, "a1")), bytes.Repeat([]byte(" "), MaxLineBytes)...), CodeTooLong},
	}
	// Entries whose edit needs its own value.
	tests[16].line = func() []byte { x := sampleAttempt(1, "a1"); x.RetryOf = "a0"; return mustLine(t, x) }()
	tests[18].line = func() []byte {
		x := sampleAttempt(1, "a1")
		x.RetryOf, x.RetryBasis = "a1", BasisCallerDeclared
		return mustLine(t, x)
	}()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeLine(tt.line)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("DecodeLine(%.80s) = %v, want a *LineError", tt.line, err)
			}
			if le.Code != tt.code {
				t.Errorf("code %s (%s), want %s", le.Code, le.Detail, tt.code)
			}
		})
	}
}

func TestDecodeLineLengthLimit(t *testing.T) {
	// A line of exactly MaxLineBytes is accepted, one byte more is not.
	mk := func(n int) []byte {
		r := &Recovery{Type: typeRecovery, Seq: 1, Detail: "x"}
		base := len(mustLine(t, r))
		var pad []byte
		for len(pad) < n-base {
			pad = append(pad, 'a')
		}
		r.Detail = "x" + string(pad)
		return mustLine(t, r)
	}
	at := mk(MaxLineBytes)
	if len(at) != MaxLineBytes {
		t.Fatalf("built %d bytes", len(at))
	}
	// The detail is over maxDetailBytes: invalid_member, not too_long.
	if _, err := DecodeLine(at); codeOf(err) != CodeInvalidMember {
		t.Errorf("MaxLineBytes: %v, want invalid_member (too long a detail)", err)
	}
	if _, err := DecodeLine(mk(MaxLineBytes + 1)); codeOf(err) != CodeTooLong {
		t.Errorf("MaxLineBytes+1: %v, want too_long", err)
	}
}

func codeOf(err error) string {
	var le *LineError
	if errors.As(err, &le) {
		return le.Code
	}
	return ""
}

func TestJSONRPCIDsRoundTripExactly(t *testing.T) {
	for _, text := range []string{"9007199254740993", "-0", "1.5", `""`, "null", `"` + strings.Repeat("x", 1024) + `"`, "1e400", `"\u0041"`} {
		a := sampleAttempt(1, "a1")
		a.RPCID = JSONRPCID{Present: true, Kind: IDNumber, Text: text}
		got, err := DecodeLine(mustLine(t, a))
		if err != nil {
			t.Errorf("id %s: %v", text, err)
			continue
		}
		if g := got.(*Attempt).RPCID.Text; g != text {
			t.Errorf("id text %q came back as %q", text, g)
		}
	}
}
