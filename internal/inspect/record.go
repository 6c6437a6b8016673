package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// Record is one attempt flattened for export (JSON Lines, CSV,
// OpenTelemetry). Arguments and Result are set only by WithPayloads: tool
// arguments and results may hold secrets, so exporting them is opt-in.
//
// The embedded structs group its fields; their fields are promoted, and
// encode in JSON as members of the record itself, in this order.
type Record struct {
	AttemptID   string `json:"attempt_id"`
	Seq         int64  `json:"seq"`
	Start       string `json:"start"`         // RFC 3339 UTC, milliseconds
	End         string `json:"end,omitempty"` // the terminal observation's time
	DurationMs  *int64 `json:"duration_ms,omitempty"`
	Tool        string `json:"tool"`
	ToolInvalid string `json:"tool_invalid,omitempty"`
	RecordOutcome
	RetryOf          string   `json:"retry_of,omitempty"`
	RetryBasis       string   `json:"retry_basis,omitempty"`
	RetriedBy        []string `json:"retried_by,omitempty"`
	SnapshotID       string   `json:"snapshot_id,omitempty"`
	SnapshotComplete bool     `json:"snapshot_complete"`
	CorrelationID    string   `json:"correlation_id,omitempty"`
	Traceparent      string   `json:"traceparent,omitempty"`
	Tracestate       string   `json:"tracestate,omitempty"`
	JSONRPCID        string   `json:"jsonrpc_id,omitempty"` // the exact JSON text of the id
	JSONRPCIDKind    string   `json:"jsonrpc_id_kind,omitempty"`
	ProtocolEra      string   `json:"protocol_era"`
	ProtocolVersion  string   `json:"protocol_version,omitempty"`
	ExecutionScope   string   `json:"execution_scope"`
	// ToolUseID is the agent host's own id of the tool use behind the
	// call (correlation.tool_use_id), to join its transcript.
	ToolUseID string `json:"tool_use_id,omitempty"`
	RecordDecision
	RecordEvidence
	RecordPayloads
}

// RecordDecision is the policy decision made before the call was
// forwarded, when a policy or lock was in force (spec/policy.md).
type RecordDecision struct {
	Decision       string `json:"decision,omitempty"` // allow | deny
	DecisionRule   string `json:"decision_rule,omitempty"`
	DecisionReason string `json:"decision_reason,omitempty"`
}

// RecordOutcome is a Record's outcome (spec/export.md).
type RecordOutcome struct {
	Outcome      string `json:"outcome"`       // an Outcome kind
	OutcomeClass string `json:"outcome_class"` // response, transport_failure, denied or unknown: the one count model (Outcome.Class)
	OutcomeLabel string `json:"outcome_label"`
	ResultType   string `json:"result_type,omitempty"`
	ErrorCode    *int64 `json:"error_code,omitempty"`
	Detail       string `json:"detail,omitempty"`
	LateResponse string `json:"late_response,omitempty"`
}

// RecordEvidence is what ties a Record to the committed evidence: the
// attempt line's digest and the digests and lengths of its payloads.
type RecordEvidence struct {
	LineDigest      string `json:"line_digest"`
	RequestDigest   string `json:"request_digest"`
	RequestLength   int64  `json:"request_length"`
	ResponseDigest  string `json:"response_digest,omitempty"`
	ResponseLength  int64  `json:"response_length,omitempty"`
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
}

// RecordPayloads is the opt-in part of a Record, set by WithPayloads.
type RecordPayloads struct {
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	PayloadProblem string          `json:"payload_problem,omitempty"` // why Arguments or Result are absent, with WithPayloads
}

// Records returns one Record per attempt, in transcript order.
func (b *Bundle) Records() []Record {
	out := make([]Record, 0, len(b.Attempts))
	for _, a := range b.Attempts {
		r := Record{
			AttemptID: a.AttemptID, Seq: a.Seq, Start: stamp(a.AtMs), Tool: a.Tool, ToolInvalid: a.ToolInvalid,
			RecordOutcome: RecordOutcome{
				Outcome: a.Outcome.Kind, OutcomeClass: a.Outcome.Class(), OutcomeLabel: a.Outcome.Label(), ResultType: a.Outcome.ResultType,
				ErrorCode: a.Outcome.ErrorCode, Detail: a.Outcome.Reason, LateResponse: a.Outcome.Late,
			},
			RetryOf: a.RetryOf, RetryBasis: a.RetryBasis, RetriedBy: a.RetriedBy,
			SnapshotID: a.Snapshot.SnapshotID, SnapshotComplete: a.Snapshot.Complete,
			JSONRPCIDKind: a.RPCID.Kind, ProtocolEra: string(a.Protocol.Era), ProtocolVersion: a.Protocol.Value,
			ExecutionScope: a.ExecutionScope,
			RecordEvidence: RecordEvidence{LineDigest: a.LineDigest,
				RequestDigest: a.Request.Digest, RequestLength: a.Request.Length, ArgumentsDigest: a.ArgsDigest},
		}
		if a.RPCID.Present {
			r.JSONRPCID = a.RPCID.Text
			if a.RPCID.Digest != "" {
				r.JSONRPCID = a.RPCID.Digest
			}
		}
		if a.EndMs > 0 {
			r.End = stamp(a.EndMs)
			d := a.EndMs - a.AtMs
			r.DurationMs = &d
		}
		if a.Response != nil {
			r.ResponseDigest, r.ResponseLength = a.Response.Digest, a.Response.Length
		}
		c := a.Correlation
		if c.CorrelationID != nil && c.CorrelationID.Valid {
			r.CorrelationID = c.CorrelationID.Value
		}
		if c.Traceparent != nil && c.Traceparent.Valid {
			r.Traceparent = c.Traceparent.Value
		}
		if c.Tracestate != nil && c.Tracestate.Valid {
			r.Tracestate = c.Tracestate.Value
		}
		if c.ToolUseID != nil && c.ToolUseID.Valid {
			r.ToolUseID = c.ToolUseID.Value
		}
		if d := a.Decision; d != nil {
			r.RecordDecision = RecordDecision{Decision: d.Action, DecisionRule: d.Rule, DecisionReason: d.Reason}
		}
		out = append(out, r)
	}
	return out
}

func stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// MaxExportPayloadBytes bounds the request or response bytes WithPayloads
// reads for one attempt.
const MaxExportPayloadBytes = 4 << 20

// WithPayloads sets r.Arguments (params.arguments of the request) and
// r.Result (the response's result, or its error object) from the payload
// bytes in fsys, exactly as recorded. What cannot be read is named in
// PayloadProblem; the record is still exported.
func (b *Bundle) WithPayloads(fsys fs.FS, r *Record) {
	a := b.Attempt(r.AttemptID)
	if a == nil {
		return
	}
	var problems []error
	if raw, err := member(fsys, &a.Request, "params", "arguments"); err != nil {
		problems = append(problems, fmt.Errorf("request: %w", err))
	} else {
		r.Arguments = raw
	}
	if a.Response != nil {
		name := "result"
		if a.Outcome.Kind == OutcomeJSONRPCError || a.Outcome.Late == OutcomeJSONRPCError {
			name = "error"
		}
		if raw, err := member(fsys, a.Response, name); err != nil {
			problems = append(problems, fmt.Errorf("response: %w", err))
		} else {
			r.Result = raw
		}
	}
	if err := errors.Join(problems...); err != nil {
		r.PayloadProblem = err.Error()
	}
}

// member returns the raw JSON at path in the payload's bytes.
func member(fsys fs.FS, p *transcript.Payload, path ...string) (json.RawMessage, error) {
	if !p.Retained {
		return nil, fmt.Errorf("%w: not retained", ErrUnavailable)
	}
	data, err := PayloadBytes(fsys, p.Digest, MaxExportPayloadBytes)
	if err != nil {
		return nil, err
	}
	var cur json.RawMessage = data
	for _, name := range path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return nil, fmt.Errorf("not a JSON object at %s: %w", strconv.Quote(name), err)
		}
		v, ok := obj[name]
		if !ok {
			return nil, nil // absent: nothing to export
		}
		cur = v
	}
	return cur, nil
}
