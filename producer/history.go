package producer

import (
	"slices"
	"strconv"
)

// history is the recorder's account of its attempts: what a seal counts and
// resolves, kept as counters and the set of attempts still in flight, never
// a record of every attempt ever made (a recorder that runs for a million
// calls holds the open ones only). Live recording and crash replay update it
// the same way. It also holds the indices by which a new attempt finds the
// earlier one it retries, and a notifications/cancelled the attempt it
// names; only live recording fills them, and all but byCorr and byUse
// forget an attempt once it no longer applies (they keep every attempt
// that carried a correlation or tool-use id). Guarded by Recorder.mu.
type history struct {
	attempts int64
	byStatus [stDenied + 1]int64
	open     map[*attemptState]struct{}

	byCorr  map[string]*attemptState // correlation id -> the attempt that carried it (caller_declared retries)
	byUse   map[string]*attemptState // agent host's tool-use id -> the latest attempt that carried it (caller_tool_use_id retries)
	byRPCID map[string]*attemptState // exact id text -> the latest attempt under it still without a response or transport failure
	infer   map[string]*attemptState // argsKey -> an attempt whose outcome is unknown or a transport failure
	cont    map[string]*attemptState // tool -> an attempt answered input_required
}

func newHistory() history {
	return history{open: map[*attemptState]struct{}{},
		byCorr: map[string]*attemptState{}, byUse: map[string]*attemptState{}, byRPCID: map[string]*attemptState{},
		infer: map[string]*attemptState{}, cont: map[string]*attemptState{}}
}

// add counts a new attempt, in flight.
func (h *history) add(st *attemptState) {
	h.attempts++
	st.status = stInFlight
	h.byStatus[stInFlight]++
	h.open[st] = struct{}{}
}

// set moves an attempt to status.
func (h *history) set(st *attemptState, status int) {
	h.byStatus[st.status]--
	h.byStatus[status]++
	if status != stInFlight {
		delete(h.open, st)
	}
	st.status = status
}

// inFlight returns the attempts without a terminal observation, in attempt
// order.
func (h *history) inFlight() []*attemptState {
	out := make([]*attemptState, 0, len(h.open))
	for st := range h.open {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *attemptState) int { return cmpID(a.id, b.id) })
	return out
}

// cmpID orders attempt ids "a<n>" by n (ids of other shapes, from a
// replayed transcript, by length then bytes: the same order for "a<n>").
func cmpID(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	if na, err := strconv.ParseInt(a[min(1, len(a)):], 10, 64); err == nil {
		if nb, err := strconv.ParseInt(b[min(1, len(b)):], 10, 64); err == nil {
			return int(na - nb)
		}
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
