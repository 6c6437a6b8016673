// Package inspect builds a per-bundle model of what a tracectl bundle
// holds: its header, its protocol observations, its snapshots, and one
// entry per tools/call attempt with its outcome, timing, retry link and
// linked observations and notifications. tracectl show, export and report
// share it.
//
// The model is read through transcript.Reader (the same line checks the
// verifier applies one line at a time) and never judges the evidence: a
// verdict comes only from package verify, whose Report a caller may attach
// (Options.Verifier). A transcript that stops early (a torn or malformed
// line) yields the model of the lines before it and Bundle.Problem says why.
//
// Everything in the model is evidence as recorded, so hostile: callers
// escape it for the medium they write to.
package inspect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// MaxAttempts bounds the attempts held in memory: a model is for reading,
// and a transcript of more attempts is shown to this many and marked
// truncated (verify streams any number).
const MaxAttempts = 1 << 20

// MaxLinked bounds the observations, notifications and frames linked to one
// attempt; more are counted, not kept.
const MaxLinked = 256

// Outcome kinds (Outcome.Kind).
const (
	OutcomeResult           = "result"            // a result (isError false)
	OutcomeToolError        = "tool_error"        // a result with isError true
	OutcomeJSONRPCError     = "jsonrpc_error"     // a JSON-RPC error response
	OutcomeTransportFailure = "transport_failure" // the transport failed with the call in flight
	OutcomeTimeout          = "timeout"           // unknown: no response within the call timeout
	OutcomeCancelled        = "cancelled"         // unknown: the client cancelled
	OutcomeUnknown          = "unknown"           // unknown: resolved at seal or recovery
	OutcomeInFlight         = "in_flight"         // no terminal observation (an unsealed bundle)
	OutcomeDenied           = "denied"            // denied by the policy or lock: never forwarded (spec/policy.md)
)

// Outcome classes (Outcome.Class): the one count model. The seal line's
// counts, verify's Counts, show, export, the report and the OTLP spans all
// count attempts by it: response when any response was recorded (a late one
// too: the server answered), else transport_failure when the transport
// failed with the call in flight (after a timeout or cancellation too),
// else denied when the policy or lock denied it (never forwarded), else
// unknown.
const (
	ClassResponse         = "response"
	ClassTransportFailure = "transport_failure"
	ClassUnknown          = "unknown"
	ClassDenied           = "denied"
)

// Class is the outcome's class in the one count model.
func (o Outcome) Class() string {
	switch {
	case o.Late != "", o.Kind == OutcomeResult, o.Kind == OutcomeToolError, o.Kind == OutcomeJSONRPCError:
		return ClassResponse
	case o.Kind == OutcomeTransportFailure:
		return ClassTransportFailure
	case o.Kind == OutcomeDenied:
		return ClassDenied
	}
	return ClassUnknown
}

// Outcome is what was observed about an attempt. Unknown outcomes (timeout,
// cancelled, unknown, in_flight) stay unknown when a late response follows:
// Late records the response beside them.
type Outcome struct {
	Kind       string `json:"kind"`
	ResultType string `json:"result_type,omitempty"`
	ErrorCode  *int64 `json:"error_code,omitempty"`
	Reason     string `json:"reason,omitempty"` // resolution reason, or observation detail
	// Late is the late response after a timeout or cancellation: result,
	// tool_error or jsonrpc_error.
	Late          string `json:"late_response,omitempty"`
	LateErrorCode *int64 `json:"late_error_code,omitempty"`
}

// Known reports whether the outcome says what the server did.
func (o Outcome) Known() bool {
	switch o.Kind {
	case OutcomeResult, OutcomeToolError, OutcomeJSONRPCError:
		return true
	}
	return false
}

// Attempt is one tools/call attempt with what is linked to it.
type Attempt struct {
	*transcript.Attempt
	LineDigest    string                     `json:"line_digest"` // sha256:<hex> of the attempt line's exact bytes
	Outcome       Outcome                    `json:"outcome"`
	EndMs         int64                      `json:"end_ms"` // the time of the terminal observation; 0 when none
	Response      *transcript.Payload        `json:"response,omitempty"`
	Observations  []*transcript.Observation  `json:"observations"`
	Resolution    *transcript.Resolution     `json:"resolution,omitempty"`
	Notifications []*transcript.Notification `json:"notifications,omitempty"` // notifications naming this attempt (cancelled)
	Frames        []*transcript.Frame        `json:"frames,omitempty"`        // frames the protocol ties to it (progress)
	RetriedBy     []string                   `json:"retried_by,omitempty"`
	LinkedOmitted int64                      `json:"linked_omitted,omitempty"`
}

// Start returns the attempt's recorded time.
func (a *Attempt) Start() time.Time { return time.UnixMilli(a.AtMs).UTC() }

// Duration returns the time from the attempt to its terminal observation,
// or -1 when it has none.
func (a *Attempt) Duration() time.Duration {
	if a.EndMs == 0 {
		return -1
	}
	return time.Duration(a.EndMs-a.AtMs) * time.Millisecond
}

// Snapshot is a recorded tools/list snapshot.
type Snapshot struct {
	*transcript.SnapshotEvent
	Attempts int64 `json:"attempts_bound"` // attempts bound to it
}

// Bundle is the model of one bundle.
type Bundle struct {
	Header        *transcript.Header         `json:"header"`
	Protocols     []*transcript.Protocol     `json:"protocols"`
	Snapshots     []*Snapshot                `json:"snapshots"`
	Attempts      []*Attempt                 `json:"attempts"`
	Notifications []*transcript.Notification `json:"notifications"`
	Recoveries    []*transcript.Recovery     `json:"recoveries,omitempty"`
	Sessions      []*transcript.SessionEvent `json:"sessions,omitempty"`
	Seal          *transcript.Seal           `json:"seal,omitempty"`
	Lines         int64                      `json:"lines"`
	Frames        int64                      `json:"frames"`
	FirstMs       int64                      `json:"first_ms"`
	LastMs        int64                      `json:"last_ms"`
	Truncated     bool                       `json:"truncated,omitempty"` // more than MaxAttempts attempts
	// Problem is why the transcript could not be read to its end, if so.
	Problem string `json:"problem,omitempty"`
	// Report is the verification report when the bundle was verified.
	Report *verify.Report `json:"verification,omitempty"`

	byID map[string]*Attempt
}

// Attempt returns the attempt with the given id, or nil.
func (b *Bundle) Attempt(id string) *Attempt { return b.byID[id] }

// Protocol returns the last protocol observation, or nil.
func (b *Bundle) Protocol() *transcript.Protocol {
	if len(b.Protocols) == 0 {
		return nil
	}
	return b.Protocols[len(b.Protocols)-1]
}

// Options configure Load.
type Options struct {
	// Verifier, when set, verifies the bundle (Verifier.Bundle) and attaches
	// the Report. Without it the model is not verified.
	Verifier *verify.Verifier
}

// Load reads the model of the bundle in fsys (verify.DirFS of a bundle
// directory). It fails only when the transcript cannot be opened or its
// header read, or the verifier cannot read the record; every later problem
// is Bundle.Problem.
func Load(ctx context.Context, fsys fs.FS, o Options) (*Bundle, error) {
	f, err := fsys.Open(transcript.TranscriptFile)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", transcript.TranscriptFile, err)
	}
	defer f.Close()
	b, err := read(ctx, f)
	if err != nil {
		return nil, err
	}
	if o.Verifier != nil {
		rep, err := o.Verifier.Bundle(ctx, fsys)
		if rep == nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		b.Report = rep
	}
	return b, nil
}

func read(ctx context.Context, r io.Reader) (*Bundle, error) {
	b := &Bundle{Protocols: []*transcript.Protocol{}, Snapshots: []*Snapshot{}, Attempts: []*Attempt{},
		Notifications: []*transcript.Notification{}, byID: map[string]*Attempt{}}
	snaps := map[string]*Snapshot{}
	tr := transcript.NewReader(r)
	for {
		if tr.Lines()%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		raw, ev, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if b.Header == nil {
				return nil, fmt.Errorf("read %s: %w", transcript.TranscriptFile, err)
			}
			b.Problem = err.Error()
			break
		}
		b.Lines = tr.Lines()
		at := atMs(ev)
		if at > 0 && (b.FirstMs == 0 || at < b.FirstMs) {
			b.FirstMs = at
		}
		b.LastMs = max(b.LastMs, at)
		switch e := ev.(type) {
		case *transcript.Header:
			b.Header = e
			if e.StartedAtMs > 0 {
				b.FirstMs = e.StartedAtMs
			}
		case *transcript.Protocol:
			b.Protocols = append(b.Protocols, e)
		case *transcript.SnapshotEvent:
			s := &Snapshot{SnapshotEvent: e}
			b.Snapshots = append(b.Snapshots, s)
			snaps[e.SnapshotID] = s
		case *transcript.Attempt:
			if len(b.Attempts) >= MaxAttempts {
				b.Truncated = true
				continue
			}
			if b.byID[e.AttemptID] != nil {
				continue // a reused id: verify reports identity_conflict; the first stays
			}
			sum := sha256.Sum256(raw)
			a := &Attempt{Attempt: e, LineDigest: "sha256:" + hex.EncodeToString(sum[:]),
				Outcome: Outcome{Kind: OutcomeInFlight}, Observations: []*transcript.Observation{}}
			b.Attempts = append(b.Attempts, a)
			b.byID[e.AttemptID] = a
			if s := snaps[e.Snapshot.SnapshotID]; s != nil {
				s.Attempts++
			}
			if p := b.byID[e.RetryOf]; p != nil && len(p.RetriedBy) < MaxLinked {
				p.RetriedBy = append(p.RetriedBy, e.AttemptID)
			}
		case *transcript.Observation:
			if a := b.byID[e.AttemptID]; a != nil {
				if link(a, len(a.Observations)) {
					a.Observations = append(a.Observations, e)
				}
				observe(a, e)
			}
		case *transcript.Resolution:
			if a := b.byID[e.AttemptID]; a != nil {
				a.Resolution = e
				if a.Outcome.Kind == OutcomeInFlight {
					a.Outcome = Outcome{Kind: OutcomeUnknown, Reason: e.Reason}
					a.EndMs = e.AtMs
				}
			}
		case *transcript.Notification:
			if len(b.Notifications) < MaxAttempts {
				b.Notifications = append(b.Notifications, e)
			}
			if a := b.byID[e.AttemptID]; a != nil && link(a, len(a.Notifications)) {
				a.Notifications = append(a.Notifications, e)
			}
		case *transcript.Frame:
			b.Frames++
			if a := b.byID[e.AttemptID]; a != nil && link(a, len(a.Frames)) {
				a.Frames = append(a.Frames, e)
			}
		case *transcript.Recovery:
			if len(b.Recoveries) < MaxLinked {
				b.Recoveries = append(b.Recoveries, e)
			}
		case *transcript.SessionEvent:
			if len(b.Sessions) < MaxLinked {
				b.Sessions = append(b.Sessions, e)
			}
		case *transcript.Seal:
			b.Seal = e
		}
	}
	return b, nil
}

// link reports whether one more linked line fits, counting it otherwise.
func link(a *Attempt, n int) bool {
	if n < MaxLinked {
		return true
	}
	a.LinkedOmitted++
	return false
}

// observe folds one observation into the attempt's outcome. A terminal
// outcome is never replaced; a late response is recorded beside the
// unknown it follows.
func observe(a *Attempt, o *transcript.Observation) {
	answered := func() (string, *int64) {
		switch {
		case o.ResultType == transcript.ResultTypeError:
			return OutcomeJSONRPCError, o.ErrorCode
		case o.IsError:
			return OutcomeToolError, nil
		}
		return OutcomeResult, nil
	}
	switch o.Kind {
	case transcript.ObsResponse:
		if a.Outcome.Kind != OutcomeInFlight {
			return
		}
		k, code := answered()
		a.Outcome = Outcome{Kind: k, ErrorCode: code, ResultType: o.ResultType}
		a.EndMs, a.Response = o.AtMs, o.Response
	case transcript.ObsLateResponse:
		if a.Outcome.Late == "" {
			a.Outcome.Late, a.Outcome.LateErrorCode = answered()
			if a.Response == nil {
				a.Response = o.Response
			}
		}
	case transcript.ObsDenied:
		if a.Outcome.Kind == OutcomeInFlight {
			a.Outcome = Outcome{Kind: OutcomeDenied}
			if d := a.Decision; d != nil {
				a.Outcome.Reason = "rule " + d.Rule
				if d.Reason != "" {
					a.Outcome.Reason += ": " + d.Reason
				}
				a.Outcome.Reason += approvalOf(a)
			}
			a.EndMs = o.AtMs
		}
	case transcript.ObsTransportFailure, transcript.ObsTimeout, transcript.ObsCancelSent:
		if o.Kind == transcript.ObsTransportFailure && a.Outcome.Late == "" &&
			(a.Outcome.Kind == OutcomeTimeout || a.Outcome.Kind == OutcomeCancelled) {
			// The call was still in flight as far as anyone knew: the
			// transport failing with it is its outcome class (as the seal
			// and verify count it), after the timeout or cancellation.
			a.Outcome = Outcome{Kind: OutcomeTransportFailure, Reason: "after " + a.Outcome.Kind + ": " + o.Detail}
			a.EndMs = o.AtMs
			return
		}
		if a.Outcome.Kind != OutcomeInFlight {
			return
		}
		k := map[string]string{transcript.ObsTransportFailure: OutcomeTransportFailure,
			transcript.ObsTimeout: OutcomeTimeout, transcript.ObsCancelSent: OutcomeCancelled}[o.Kind]
		a.Outcome = Outcome{Kind: k, Reason: o.Detail}
		a.EndMs = o.AtMs
	}
}

// atMs returns a line's time, 0 for the header (whose time is
// started_at_ms).
func atMs(ev any) int64 {
	switch e := ev.(type) {
	case *transcript.Protocol:
		return e.AtMs
	case *transcript.SnapshotEvent:
		return e.AtMs
	case *transcript.Notification:
		return e.AtMs
	case *transcript.Attempt:
		return e.AtMs
	case *transcript.Observation:
		return e.AtMs
	case *transcript.Resolution:
		return e.AtMs
	case *transcript.Recovery:
		return e.AtMs
	case *transcript.Seal:
		return e.AtMs
	case *transcript.Frame:
		return e.AtMs
	case *transcript.SessionEvent:
		return e.AtMs
	}
	return 0
}

// Label is a short human label of an outcome: "result", "isError",
// "error -32602", "transport failure", "unknown (timeout)", with "; late
// result" when a late response followed.
func (o Outcome) Label() string {
	label := func(kind string, code *int64) string {
		switch kind {
		case OutcomeResult:
			return "result"
		case OutcomeToolError:
			return "isError"
		case OutcomeJSONRPCError:
			if code != nil {
				return fmt.Sprintf("error %d", *code)
			}
			return "error"
		case OutcomeTransportFailure:
			return "transport failure"
		case OutcomeTimeout:
			return "unknown (timeout)"
		case OutcomeCancelled:
			return "unknown (cancelled)"
		case OutcomeInFlight:
			return "unknown (in flight, unsealed)"
		case OutcomeDenied:
			return "denied"
		}
		return "unknown"
	}
	s := label(o.Kind, o.ErrorCode)
	if o.Kind == OutcomeTransportFailure {
		if after, _, ok := strings.Cut(o.Reason, ": "); ok && strings.HasPrefix(after, "after ") {
			s += " (" + after + ")"
		}
	}
	if o.Kind == OutcomeDenied && o.Reason != "" {
		s += " (" + o.Reason + ")"
	}
	if o.Kind == OutcomeUnknown && o.Reason != "" {
		s = "unknown (" + o.Reason + ")"
	}
	if o.Kind == OutcomeResult && o.ResultType != "" && o.ResultType != "complete" {
		s += " (" + o.ResultType + ")"
	}
	if o.Late != "" {
		// Answered after all: the class is response, so the label says
		// the answer first and what came before it second.
		before := strings.TrimPrefix(strings.TrimSuffix(s, ")"), "unknown (")
		return "late " + label(o.Late, o.LateErrorCode) + " (after " + before + ")"
	}
	return s
}

// approvalOf is ": approval OUTCOME" for an attempt denied after an
// approval that was not given (its approval observation), else "".
func approvalOf(a *Attempt) string {
	for _, o := range a.Observations {
		if o.Approval != nil {
			return ": approval " + o.Approval.Outcome
		}
	}
	return ""
}
