package inspect_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/tracectl/tracectl/internal/inspect"
)

// TestRecordJSONMembers pins the export's member names and order: Record's
// embedded groups must encode as members of the record itself, where the
// flat struct had them.
func TestRecordJSONMembers(t *testing.T) {
	n := int64(1)
	r := inspect.Record{
		AttemptID: "a1", Seq: 1, Start: "s", End: "e", DurationMs: &n, Tool: "t", ToolInvalid: "ti",
		RecordOutcome: inspect.RecordOutcome{Outcome: "o", OutcomeLabel: "ol", ResultType: "rt", ErrorCode: &n, Detail: "d", LateResponse: "lr"},
		RetryOf:       "ro", RetryBasis: "rb", RetriedBy: []string{"a2"}, SnapshotID: "s1", SnapshotComplete: true,
		CorrelationID: "c", Traceparent: "tp", Tracestate: "ts", JSONRPCID: "1", JSONRPCIDKind: "number",
		ProtocolEra: "pe", ProtocolVersion: "pv", ExecutionScope: "es",
		RecordEvidence: inspect.RecordEvidence{LineDigest: "ld", RequestDigest: "qd", RequestLength: 1, ResponseDigest: "sd", ResponseLength: 1, ArgumentsDigest: "ad"},
		RecordPayloads: inspect.RecordPayloads{Arguments: json.RawMessage(`{}`), Result: json.RawMessage(`{}`), PayloadProblem: "pp"},
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var got []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"attempt_id", "seq", "start", "end", "duration_ms", "tool", "tool_invalid",
		"outcome", "outcome_class", "outcome_label", "result_type", "error_code", "detail", "late_response",
		"retry_of", "retry_basis", "retried_by", "snapshot_id", "snapshot_complete",
		"correlation_id", "traceparent", "tracestate", "jsonrpc_id", "jsonrpc_id_kind",
		"protocol_era", "protocol_version", "execution_scope",
		"line_digest", "request_digest", "request_length", "response_digest", "response_length", "arguments_digest",
		"arguments", "result", "payload_problem"}
	if !slices.Equal(got, want) {
		t.Errorf("members:\ngot  %q\nwant %q", got, want)
	}
	var back inspect.Record
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(back); !bytes.Equal(again, data) {
		t.Errorf("decode then encode:\ngot  %s\nwant %s", again, data)
	}
}
