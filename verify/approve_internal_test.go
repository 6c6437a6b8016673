package verify

import (
	"strings"
	"testing"

	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/internal/policy"
	"github.com/tracectl/tracectl/transcript"
)

// Every way an approval can fail to fit its attempt, and the ways it fits,
// in enforce and audit mode: the observations of one attempt decided
// approve (or allow), in order, and the approval_mismatch they give.
func TestApprovalOutcome(t *testing.T) {
	const argsD = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const otherD = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	appr := func(outcome, digest string) *transcript.Observation {
		return &transcript.Observation{Kind: approval.Kind, Approval: &approval.Evidence{Outcome: outcome, By: "x", ArgsDigest: digest, Via: approval.ViaCommand}}
	}
	obs := func(kind string) *transcript.Observation { return &transcript.Observation{Kind: kind} }
	for _, tc := range []struct {
		name     string
		mode     string
		action   string
		seq      []*transcript.Observation
		mismatch string // "" when it fits
	}{
		{"approved, answered", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Approved, argsD), obs(transcript.ObsResponse)}, ""},
		{"refused, denied", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Refused, argsD), obs(transcript.ObsDenied)}, ""},
		{"timeout, denied", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Timeout, argsD), obs(transcript.ObsDenied)}, ""},
		{"approved, timed out, late", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Approved, argsD), obs(transcript.ObsTimeout), obs(transcript.ObsLateResponse)}, ""},
		{"audit: refused, answered", policy.ModeAudit, policy.Approve, []*transcript.Observation{appr(approval.Refused, argsD), obs(transcript.ObsResponse)}, ""},
		{"forwarded unasked", policy.ModeEnforce, policy.Approve, []*transcript.Observation{obs(transcript.ObsResponse)}, "no approval before it"},
		{"audit: forwarded unasked", policy.ModeAudit, policy.Approve, []*transcript.Observation{obs(transcript.ObsTransportFailure)}, "no approval before it"},
		{"refused, answered", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Refused, argsD), obs(transcript.ObsResponse)}, "its approval says refused"},
		{"failed, cancelled", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Failed, argsD), obs(transcript.ObsCancelSent)}, "its approval says failed"},
		{"approved, denied", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Approved, argsD), obs(transcript.ObsDenied)}, "although its approval approved it"},
		{"denied unasked", policy.ModeEnforce, policy.Approve, []*transcript.Observation{obs(transcript.ObsDenied)}, "without an approval"},
		{"other arguments", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Approved, otherD)}, "binds arguments " + otherD},
		{"twice", policy.ModeEnforce, policy.Approve, []*transcript.Observation{appr(approval.Refused, argsD), appr(approval.Approved, argsD)}, "a second approval"},
		{"after the outcome", policy.ModeEnforce, policy.Approve, []*transcript.Observation{obs(transcript.ObsTimeout), appr(approval.Approved, argsD)}, "after the call was forwarded or settled"},
		{"not an approve decision", policy.ModeEnforce, policy.Allow, []*transcript.Observation{appr(approval.Approved, argsD)}, "its decision is not approve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bundleCheck{r: &Report{}}
			b.pol.ref = &transcript.PolicyRef{Mode: tc.mode, PolicyDigest: argsD}
			a := &transcript.Attempt{AttemptID: "a1", ArgsDigest: argsD}
			if tc.action == policy.Approve {
				b.noteApprove(a)
			}
			for i, o := range tc.seq {
				o.AttemptID, o.Seq = "a1", int64(i+2)
				b.approvalOutcome(o)
			}
			var got []string
			for _, f := range b.r.Findings {
				if f.Code == CodeApprovalMismatch && f.Status == StatusFail {
					got = append(got, f.Detail)
				}
			}
			switch {
			case tc.mismatch == "" && len(got) != 0:
				t.Fatalf("approval_mismatch %q, want none", got)
			case tc.mismatch != "" && (len(got) == 0 || !strings.Contains(got[len(got)-1], tc.mismatch)):
				t.Fatalf("approval_mismatch %q, want the last saying %q", got, tc.mismatch)
			case tc.mismatch != "" && b.pol.bad != int64(len(got)):
				t.Fatalf("bad %d: decisions_verified would still be reported", b.pol.bad)
			}
		})
	}
}

// A client frame is withheld only when it answers the recorder's own
// elicitation request (an approval asked of the client): a response under
// an id of its namespace. Any other client frame marked withheld (a
// response under another id, hidden from the server's record) is
// frame_misrecorded.
func TestWithheldClientFrame(t *testing.T) {
	for _, tc := range []struct {
		kind, id string
		bad      bool
	}{
		{transcript.FrameResponse, `"tracectl-approval-0123abcd-a1"`, false},
		{transcript.FrameResponse, `"\u0074racectl-approval-0123abcd-a1"`, false}, // the producer reads it decoded
		{transcript.FrameResponse, `7`, true},
		{transcript.FrameResponse, `"approval-a1"`, true},
		{transcript.FrameRequest, `"tracectl-approval-0123abcd-a1"`, true},
	} {
		b := &bundleCheck{r: &Report{}}
		f := &transcript.Frame{Direction: transcript.ClientToServer, Disposition: transcript.FrameWithheld, Kind: tc.kind, RPCID: &transcript.JSONRPCID{Present: true, Kind: "string", Text: tc.id}}
		b.frameRules(f, tc.kind, "", "frame client_to_server 3")
		if got := b.fr.bad > 0; got != tc.bad {
			t.Errorf("%s %s: misrecorded %v, want %v: %+v", tc.kind, tc.id, got, tc.bad, b.r.Findings)
		}
	}
}
