package producer

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// journal is transcript.jsonl opened for appending. Lines get their seq in
// the order they are appended. Group commit, in two independent halves: a
// write leader writes every pending line in one write while the others
// wait, and a sync leader fsyncs everything written when it starts (in
// strict mode, or when a caller waits for durability). The two run
// concurrently, so lines keep being written (in seq order: file order is
// seq order) while an fsync is under way, and the next fsync covers all of
// them: callers that wait for durability share fsyncs however many are in
// flight.
//
// Any failure is sticky: after a failed write (rolled back by truncation,
// so the file stays a valid prefix) or a failed fsync (after which the page
// cache can no longer be trusted) every append fails with
// ErrAuditUnavailable.
type journal struct {
	f    File
	mode string

	mu      sync.Mutex
	cond    sync.Cond
	next    int64  // seq of the next line appended
	buf     []byte // lines [written, next) encoded, not yet written
	spare   []byte
	written int64 // lines [0, written) are in the file
	durable int64 // lines [0, durable) are fsynced
	size    int64 // file length after the written lines
	writing bool  // a leader is writing
	syncing bool  // a leader is fsyncing
	err     error

	// Gathering (strict mode). waiters counts callers waiting for
	// durability; lastGroup is how many the last fsync found waiting. When
	// that was more than one (calls are concurrent), the next leader waits
	// gather before it fsyncs, so lines written meanwhile share the fsync;
	// a lone caller never waits. sleep is time.Sleep, injectable.
	waiters   int
	lastGroup int
	gather    time.Duration
	sleep     func(time.Duration)

	syncs atomic.Int64 // fsyncs of the journal, for Stats
	wb    *writeback   // none and batch: starts writeback as lines are written
	// preSync, if set, runs with each fsync of the journal (outside its
	// lock, concurrently): the payload pack is made durable with it, so a
	// line acknowledged durable has its payload durable too. Its failure
	// fails the journal.
	preSync func() error

	stop chan struct{} // batch flusher
	done chan struct{}

	// tap, when set (Options.Lines), is sent a copy of each line as it is
	// appended, under mu so the copies keep file order; never waited for.
	tap chan<- []byte
}

// tapLine offers a copy of a line to the tap, dropping it when the tap
// has no room. Called with mu held (or before the journal is shared).
func (j *journal) tapLine(line []byte) {
	if j.tap == nil {
		return
	}
	if len(j.tap) == cap(j.tap) {
		return // full: no copy made only to be dropped
	}
	select {
	case j.tap <- bytes.Clone(line):
	default:
	}
}

func newJournal(f File, mode string, lines, size int64) *journal {
	j := &journal{f: f, mode: mode, next: lines, written: lines, durable: lines, size: size, gather: gatherDelay, sleep: time.Sleep}
	j.cond.L = &j.mu
	return j
}

// startFlusher runs the batch mode's periodic fsync. Its ticker only
// schedules work: no time it reads enters the evidence.
func (j *journal) startFlusher(every time.Duration) {
	j.stop, j.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(j.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-j.stop:
				return
			case <-t.C:
				j.syncWritten()
			}
		}
	}()
}

// syncWritten fsyncs what is written but not yet durable, unless an fsync
// is under way already.
func (j *journal) syncWritten() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil || j.written == j.durable || j.syncing {
		return
	}
	j.leadSync()
}

// syncBoth fsyncs the pack (preSync) and the journal at once, so the
// file system can commit them together: a call waits for both, never one
// after the other. Called without the lock.
func (j *journal) syncBoth() error {
	if j.preSync == nil {
		j.syncs.Add(1)
		return j.f.Sync()
	}
	pre := make(chan error, 1)
	go func() { pre <- j.preSync() }()
	err := j.f.Sync()
	j.syncs.Add(1)
	if perr := <-pre; err == nil {
		err = perr
	}
	return err
}

func (j *journal) fail(err error) {
	if j.err == nil {
		j.err = fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
	}
	j.cond.Broadcast()
}

// lineBuilder appends the line numbered seq (without its LF) to dst, and
// returns the extended buffer; on error what it appended is dropped.
type lineBuilder func(dst []byte, seq int64) ([]byte, error)

// append encodes a line with the next seq and returns once the line is in
// the file, and in strict mode durable. build runs under the journal lock,
// so seq order is file order.
func (j *journal) append(build lineBuilder) (int64, error) {
	seq, err := j.appendWritten(build)
	if err == nil {
		err = j.settle(seq)
	}
	if err != nil {
		return -1, err
	}
	return seq, nil
}

// appendWritten is append without the fsync wait: the line is in the file
// (and so ordered before anything forwarded after it) when it returns, and
// becomes durable with the next group commit. Frames that are not tools/call
// attempts or their responses take this path (spec/transcript.md,
// "Durability"); so does a pipelined attempt or response, whose caller then
// waits with waitDurable before forwarding it.
func (j *journal) appendWritten(build lineBuilder) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return -1, j.err
	}
	seq := j.next
	n0 := len(j.buf)
	buf, err := build(j.buf, seq)
	if err == nil && len(buf)-n0 > transcript.MaxLineBytes {
		err = fmt.Errorf("%d bytes, over transcript.MaxLineBytes", len(buf)-n0)
	}
	if err != nil {
		// A line the recorder cannot encode is a bug, not bad input (inputs
		// are checked before): fail closed rather than leave a gap.
		j.buf = buf[:n0]
		j.fail(fmt.Errorf("encode line %d: %w", seq, err))
		return -1, j.err
	}
	j.tapLine(buf[n0:])
	j.buf = append(buf, '\n')
	j.next++
	if err := j.waitFor(seq+1, false); err != nil {
		return -1, err
	}
	return seq, nil
}

// waitDurable returns once line seq is durable (it and the pack entries
// appended before it fsynced), leading a group fsync if none is under way;
// or once the journal failed first. The line must have been appended.
func (j *journal) waitDurable(seq int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.waitFor(seq+1, true)
}

// settle makes line seq, appended, as durable as the mode promises before
// its frame is forwarded: waitDurable in strict mode; nothing otherwise (the
// line is written already).
func (j *journal) settle(seq int64) error {
	if j.mode != transcript.DurabilityStrict {
		return nil
	}
	return j.waitDurable(seq)
}

// durableWait is settle deferred, for a caller that forwards from another
// goroutine.
func (j *journal) durableWait(seq int64) func() error {
	return func() error { return j.settle(seq) }
}

// waitFor returns once lines [0, n) are written (and durable if sync), or
// the journal failed first. Called with mu held. A caller whose lines are
// pending leads a write if none runs; one whose lines are written leads an
// fsync if none runs: an fsync never waits for a write, nor a write for an
// fsync.
func (j *journal) waitFor(n int64, sync bool) error {
	if sync {
		j.waiters++
		defer func() { j.waiters-- }()
	}
	for {
		if j.written >= n && (!sync || j.durable >= n) {
			return nil
		}
		if j.err != nil {
			return j.err
		}
		switch {
		case j.written < n && !j.writing:
			j.leadWrite()
		case j.written >= n && !j.syncing:
			j.leadSync()
		default:
			j.cond.Wait()
		}
	}
}

// gatherDelay is how long a sync leader waits for concurrent callers'
// lines before it fsyncs (journal.gather).
var gatherDelay = 1 * time.Millisecond

// leadWrite writes every pending line. Called with mu held; releases it
// during the write.
func (j *journal) leadWrite() {
	j.writing = true
	buf, end := j.buf, j.next
	j.buf = j.spare[:0]
	j.mu.Unlock()
	_, werr := j.f.Write(buf)
	j.mu.Lock()
	j.writing = false
	j.spare = buf[:0]
	defer j.cond.Broadcast()
	if werr != nil {
		// Roll a partial write back so the file stays a valid transcript.
		if terr := j.f.Truncate(j.size); terr != nil {
			j.fail(fmt.Errorf("write %s: %w (and the torn tail could not be truncated: %v; recovery will quarantine it)", transcript.TranscriptFile, werr, terr))
			return
		}
		j.fail(fmt.Errorf("write %s: %w", transcript.TranscriptFile, werr))
		return
	}
	j.size += int64(len(buf))
	j.written = end
	j.wb.note(len(buf))
}

// leadSync fsyncs the pack and every line written so far. Called with mu
// held; releases it during the fsync, while later lines may be written.
// Only lines written before the fsync began are marked durable.
func (j *journal) leadSync() {
	j.syncing = true
	if j.mode == transcript.DurabilityStrict && j.gather > 0 && j.lastGroup > 1 {
		j.mu.Unlock()
		j.sleep(j.gather)
		j.mu.Lock()
	}
	j.lastGroup = j.waiters
	w := j.written
	j.mu.Unlock()
	err := j.syncBoth()
	j.mu.Lock()
	j.syncing = false
	defer j.cond.Broadcast()
	if err != nil {
		j.fail(fmt.Errorf("fsync %s: %w", transcript.TranscriptFile, err))
		return
	}
	j.durable = max(j.durable, w)
}

// flush writes every pending line and, if sync, fsyncs them.
func (j *journal) flush(sync bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.waitFor(j.next, sync)
}

// lines returns the number of lines appended so far.
func (j *journal) lines() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next
}

// close stops the flusher, flushes (fsyncing if sync) and closes the file,
// which releases the lock.
func (j *journal) close(sync bool) error {
	if j.stop != nil {
		close(j.stop)
		<-j.done
		j.stop = nil
	}
	err := j.flush(sync)
	if cerr := j.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", transcript.TranscriptFile, cerr)
	}
	return err
}
