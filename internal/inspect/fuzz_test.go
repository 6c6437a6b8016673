package inspect_test

import (
	"context"
	"testing"

	"github.com/tracectl/tracectl/internal/inspect"
	"github.com/tracectl/tracectl/transcript"
)

// FuzzLoad feeds arbitrary transcripts to the model: it never panics, every
// attempt it lists can be found by id, its outcome is one of the kinds, and
// its linked lists stay within MaxLinked. Seeds: testdata/fuzz/FuzzLoad (outcomes
// is the transcript outcomesBundle records).
func FuzzLoad(f *testing.F) {
	kinds := map[string]bool{inspect.OutcomeResult: true, inspect.OutcomeToolError: true, inspect.OutcomeJSONRPCError: true,
		inspect.OutcomeTransportFailure: true, inspect.OutcomeTimeout: true, inspect.OutcomeCancelled: true,
		inspect.OutcomeUnknown: true, inspect.OutcomeInFlight: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := inspect.Load(context.Background(), memFS{transcript.TranscriptFile: data}, inspect.Options{})
		if err != nil {
			return
		}
		for _, a := range b.Attempts {
			if b.Attempt(a.AttemptID) != a || !kinds[a.Outcome.Kind] || len(a.Observations) > inspect.MaxLinked {
				t.Fatalf("attempt %q: %+v", a.AttemptID, a.Outcome)
			}
			_ = a.Outcome.Label()
		}
		_ = b.Records()
	})
}
