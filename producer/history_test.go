package producer

import (
	"slices"
	"testing"
)

// TestHistoryCountsAndOrder: the history counts every status change and
// returns the attempts still in flight in attempt order (a10 after a9).
func TestHistoryCountsAndOrder(t *testing.T) {
	h := newHistory()
	var sts []*attemptState
	for _, id := range []string{"a1", "a2", "a9", "a10", "a11"} {
		st := &attemptState{id: id}
		h.add(st)
		sts = append(sts, st)
	}
	h.set(sts[0], stResponse)
	h.set(sts[1], stUnknown)
	h.set(sts[1], stResponse) // a late response
	h.set(sts[4], stTransport)
	var got []string
	for _, st := range h.inFlight() {
		got = append(got, st.id)
	}
	if want := []string{"a9", "a10"}; !slices.Equal(got, want) {
		t.Errorf("in flight %v, want %v", got, want)
	}
	if h.attempts != 5 || h.byStatus[stResponse] != 2 || h.byStatus[stTransport] != 1 || h.byStatus[stInFlight] != 2 || h.byStatus[stUnknown] != 0 {
		t.Errorf("counts: attempts %d, by status %v", h.attempts, h.byStatus)
	}
}
