package producer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// CheckpointDir is the bundle directory holding signed checkpoints
// (spec/checkpoints.md): checkpoints/<N>.json is a Trust Record whose
// tool_transcript commits to the first N lines of transcript.jsonl.
const CheckpointDir = "checkpoints"

// CheckpointPath returns the bundle-relative path of the checkpoint over
// the first lines lines.
func CheckpointPath(lines int64) string {
	return CheckpointDir + "/" + strconv.FormatInt(lines, 10) + ".json"
}

// checkpointTmpPrefix marks a checkpoint being written; recovery removes
// leftovers (never a checkpoint: one exists only once linked into place).
const checkpointTmpPrefix = ".tmp-"

// Checkpoint describes a signed checkpoint written into the bundle.
type Checkpoint struct {
	File     string // bundle-relative: CheckpointPath(Lines)
	Lines    int64  // the prefix it covers: lines [0, Lines)
	Root     string // the prefix's commitment (tool_transcript.hash)
	Attempts int64  // attempt lines in the prefix (tool_transcript.call_count)
}

// CheckpointPolicy says when StartCheckpoints signs a checkpoint.
type CheckpointPolicy struct {
	// EveryAttempts: after every this many committed tools/call attempts
	// (0: never on a count).
	EveryAttempts int64
	// Every: on a timer of this period (0: never on a timer).
	Every time.Duration
	// Ticker makes the timer (nil: time.NewTicker). Tests inject one and
	// send on its channel.
	Ticker func(time.Duration) (c <-chan time.Time, stop func())
	// Done, if set, is called after every checkpoint attempt with what was
	// written (nil when there was nothing new to sign) or the error. A
	// failed checkpoint does not stop the recording: it is reported here,
	// and the next trigger tries again.
	Done func(*Checkpoint, error)
}

// checkpoints is a recorder's checkpoint state: the commitment over the
// lines read back so far, so each checkpoint reads only the new lines.
type checkpoints struct {
	r      *Recorder
	signer RecordSigner
	policy CheckpointPolicy

	mu       sync.Mutex // serializes checkpoints
	c        transcript.Committer
	off      int64 // bytes of the journal read back
	attempts int64 // attempt lines among them
	last     int64 // lines covered by the last checkpoint written

	due     chan struct{} // an attempt-count trigger, buffered 1
	stopped chan struct{}
	done    chan struct{}
	once    sync.Once

	cmu   sync.Mutex // guards count
	count int64      // attempts committed since the last trigger
}

// StartCheckpoints signs a checkpoint of the durable transcript prefix as
// the policy says, until Seal or Close (which wait for a checkpoint in
// progress). Call it once, before recording; signer is the one Seal will
// use. A checkpoint is written only after the prefix it covers and the
// payloads that prefix commits to are durable, whatever the durability
// mode.
func (r *Recorder) StartCheckpoints(signer RecordSigner, p CheckpointPolicy) error {
	switch {
	case signer == nil:
		return fmt.Errorf("%w: checkpoints need a signer", ErrInvalidOptions)
	case p.EveryAttempts < 0 || p.Every < 0:
		return fmt.Errorf("%w: negative checkpoint interval", ErrInvalidOptions)
	case p.EveryAttempts == 0 && p.Every == 0:
		return fmt.Errorf("%w: a checkpoint policy needs a count or a period", ErrInvalidOptions)
	}
	if err := r.begin(true); err != nil {
		return err
	}
	defer r.ops.Done()
	k := &checkpoints{r: r, signer: signer, policy: p, due: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	if !r.ckpt.CompareAndSwap(nil, k) {
		return fmt.Errorf("%w: checkpoints already started", ErrInvalidOptions)
	}
	var tick <-chan time.Time
	stopTick := func() {}
	if p.Every > 0 {
		mk := p.Ticker
		if mk == nil {
			mk = func(d time.Duration) (<-chan time.Time, func()) {
				t := time.NewTicker(d)
				return t.C, t.Stop
			}
		}
		tick, stopTick = mk(p.Every)
	}
	go func() {
		defer close(k.done)
		defer stopTick()
		for {
			select {
			case <-k.stopped:
				return
			case <-tick:
			case <-k.due:
			}
			cp, err := r.checkpoint(context.Background(), k)
			if errors.Is(err, ErrClosed) {
				return
			}
			if p.Done != nil {
				p.Done(cp, err)
			}
		}
	}()
	return nil
}

// noteAttempt counts a committed attempt toward the next checkpoint. Nil
// safe: a recorder without checkpoints has none.
func (k *checkpoints) noteAttempt() {
	if k == nil || k.policy.EveryAttempts == 0 {
		return
	}
	k.cmu.Lock()
	k.count++
	fire := k.count >= k.policy.EveryAttempts
	if fire {
		k.count = 0
	}
	k.cmu.Unlock()
	if fire {
		select {
		case k.due <- struct{}{}:
		default: // one is pending already: it will cover this attempt too
		}
	}
}

// stop ends the checkpoint loop and waits for a checkpoint in progress.
// Nil safe.
func (k *checkpoints) stop() {
	if k == nil {
		return
	}
	k.once.Do(func() { close(k.stopped) })
	<-k.done
}

// Checkpoint signs a checkpoint now, over every line appended so far (made
// durable first). It returns nil and no error when the last checkpoint
// already covers every line. StartCheckpoints must have been called.
func (r *Recorder) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	k := r.ckpt.Load()
	if k == nil {
		return nil, fmt.Errorf("%w: checkpoints were not started", ErrInvalidOptions)
	}
	return r.checkpoint(ctx, k)
}

func (r *Recorder) checkpoint(ctx context.Context, k *checkpoints) (*Checkpoint, error) {
	if err := r.begin(true); err != nil {
		return nil, err
	}
	defer r.ops.Done()
	k.mu.Lock()
	defer k.mu.Unlock()
	n, err := r.j.durablePrefix()
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", r.dir, err)
	}
	if n <= k.last {
		return nil, nil
	}
	// The prefix's payloads are durable with it: each was appended to the
	// pack before its line, and the pack is fsynced with every journal
	// fsync (journal.preSync).
	if err := k.readBack(n); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", r.dir, err)
	}
	cp := &Checkpoint{File: CheckpointPath(n), Lines: n, Root: k.c.Root(), Attempts: k.attempts}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec, err := k.signer.SignTranscript(ctx, cp.Root, cp.Attempts)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: sign: %w", r.dir, err)
	}
	if _, err := canon.Parse(rec, canon.ParseOptions{}); err != nil || len(rec) == 0 {
		return nil, fmt.Errorf("checkpoint %s: the signer returned no JSON record: %v", r.dir, err)
	}
	if err := writeCheckpoint(r.fsys, r.dir, n, rec); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", r.dir, err)
	}
	k.last = n
	return cp, nil
}

// readBack extends the commitment to the first n lines, reading the bytes
// on disk (what is signed is what a verifier will read). Called with k.mu
// held.
func (k *checkpoints) readBack(n int64) error {
	f, err := k.r.fsys.OpenFile(filepath.Join(k.r.dir, transcript.TranscriptFile), os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("read back %s: %w", transcript.TranscriptFile, err)
	}
	defer f.Close()
	if _, err := io.CopyN(io.Discard, f, k.off); err != nil {
		return fmt.Errorf("read back %s: %w", transcript.TranscriptFile, err)
	}
	br := bufio.NewReaderSize(f, transcript.MaxLineBytes+1)
	for k.c.Count() < n {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("read back %s line %d: %w", transcript.TranscriptFile, k.c.Count(), err)
		}
		body := line[:len(line)-1]
		ev, err := transcript.DecodeLine(body)
		if err != nil {
			return fmt.Errorf("read back %s line %d: %w", transcript.TranscriptFile, k.c.Count(), err)
		}
		if _, ok := ev.(*transcript.Attempt); ok {
			k.attempts++
		}
		k.c.Add(body)
		k.off += int64(len(line))
	}
	return nil
}

// durablePrefix makes every line appended so far durable and returns how
// many there are.
func (j *journal) durablePrefix() (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := j.next
	if err := j.waitFor(n, true); err != nil {
		return 0, err
	}
	return n, nil
}

// writeCheckpoint creates checkpoints/<n>.json exclusively and atomically,
// as writeRecord does record.json: written and fsynced under a temporary
// name, hard-linked into place (which fails if it exists), the directory
// fsynced.
func writeCheckpoint(fsys FS, dir string, n int64, rec []byte) error {
	cdir := filepath.Join(dir, CheckpointDir)
	switch err := fsys.Mkdir(cdir, 0o700); {
	case err == nil:
		if err := syncDir(fsys, dir); err != nil {
			return fmt.Errorf("create %s: fsync directory: %w", CheckpointDir, err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("create %s: %w", CheckpointDir, err)
	}
	name := strconv.FormatInt(n, 10) + ".json"
	final := filepath.Join(cdir, name)
	if err := linkInPlace(fsys, filepath.Join(cdir, checkpointTmpPrefix+name), final, rec); err != nil {
		return fmt.Errorf("write %s: %w", CheckpointPath(n), err)
	}
	return nil
}

// removeCheckpointTemps removes checkpoints a crash left half-written
// (never a checkpoint: one exists only once linked into place). Recovery
// keeps every checkpoint.
func removeCheckpointTemps(fsys FS, dir string) error {
	cdir := filepath.Join(dir, CheckpointDir)
	ents, err := fsys.ReadDir(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", CheckpointDir, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), checkpointTmpPrefix) && e.Type().IsRegular() {
			if err := fsys.Remove(filepath.Join(cdir, e.Name())); err != nil {
				return fmt.Errorf("remove %s/%s: %w", CheckpointDir, e.Name(), err)
			}
		}
	}
	return nil
}
