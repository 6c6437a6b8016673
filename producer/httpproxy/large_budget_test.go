package httpproxy

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// A JSON answer to the exchange's own call may be longer than the gate
// holds: read on up to 256 MiB, its buffer charged to the in-flight
// budget. Under the default budget (256 MiB) with nothing else in flight,
// a 140 MiB answer of known length is read into one buffer, charged once;
// the same answer of unknown length needs its doubling buffers charged
// together (128 MiB and 256 MiB while one is copied to the other), which
// the default budget refuses: spec/http.md says so (found by review: the
// spec promised 256 MiB either way).
func TestLargeAnswerBudget(t *testing.T) {
	const size = 140 << 20
	head := bytes.Repeat([]byte("z"), maxBody+1)
	p := &Proxy{budget: budget{max: defaultMaxInflightBytes}}
	data, release, err := p.readLarge(io.LimitReader(zeros{}, size-int64(len(head))), head, size)
	if err != nil || len(data) != size {
		t.Fatalf("a %d-byte answer of known length under the default budget: %d bytes, %v", size, len(data), err)
	}
	if got := p.budget.inUse(); got != size+1 {
		t.Errorf("charged %d bytes for it, want %d (one buffer)", got, size+1)
	}
	release()
	if got := p.budget.inUse(); got != 0 {
		t.Errorf("%d bytes still charged after release", got)
	}
	// A body longer than its Content-Length said is read to one byte past it.
	if data, release, err := p.readLarge(io.LimitReader(zeros{}, size), head, size); err != nil || len(data) != size+1 {
		t.Fatalf("a body longer than its length: %d bytes, %v; want %d (one past, so the caller sees it is longer)", len(data), err, size+1)
	} else {
		release()
	}
	// Unknown length: the doubling needs more than the default budget.
	if _, release, err := p.readLarge(io.LimitReader(zeros{}, size-int64(len(head))), head, -1); !errors.Is(err, errOverBudget) {
		t.Fatalf("a %d-byte answer of unknown length under the default budget: %v, want errOverBudget", size, err)
	} else {
		release()
	}
	if got := p.budget.inUse(); got != 0 {
		t.Errorf("%d bytes still charged after a refusal", got)
	}
	// With budget for both buffers, it is read.
	big := &Proxy{budget: budget{max: 3 * maxLargeBody}}
	data, release, err = big.readLarge(io.LimitReader(zeros{}, size-int64(len(head))), head, -1)
	if err != nil || len(data) != size {
		t.Fatalf("unknown length with a larger budget: %d bytes, %v", len(data), err)
	}
	release()
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'z'
	}
	return len(b), nil
}
