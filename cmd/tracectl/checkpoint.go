package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
)

// checkpointEvery is --checkpoint-every: N committed tools/call attempts,
// or a duration.
type checkpointEvery struct {
	calls int64
	every time.Duration
}

func (c *checkpointEvery) String() string {
	switch {
	case c.calls > 0:
		return strconv.FormatInt(c.calls, 10)
	case c.every > 0:
		return c.every.String()
	}
	return ""
}

func (c *checkpointEvery) Type() string { return "DUR|N" }

func (c *checkpointEvery) Set(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return errors.New("a number of calls must be positive")
		}
		*c = checkpointEvery{calls: n}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want a number of tools/call attempts (100) or a duration (5m)")
	}
	if d <= 0 {
		return errors.New("a duration must be positive")
	}
	*c = checkpointEvery{every: d}
	return nil
}

func (c *checkpointEvery) set() bool { return c.calls > 0 || c.every > 0 }

// startCheckpoints signs checkpoints of rec's transcript as --checkpoint-every
// says, with the signer that signs record.json at seal. Each one written is
// announced on stderr; a failed one is reported there and the recording goes
// on (the final record still covers everything).
func startCheckpoints(rec *producer.Recorder, c checkpointEvery, signer sign.Signer, id recordIdentity, stderr io.Writer) error {
	if !c.set() {
		return nil
	}
	if signer == nil {
		return usageErr(errors.New("--checkpoint-every needs --key or --signer: a checkpoint is signed"), "")
	}
	return startCheckpointsWith(rec, c, trustRecordSigner{signer: checkpointSigner(signer), identity: id, now: time.Now}, stderr, nil)
}

// startCheckpointsWith starts checkpoints signed by rs; written, when set,
// is called with each one written (anchoring queues it). Without
// --checkpoint-every (c unset) only explicit checkpoints are taken
// (Recorder.Checkpoint): the count trigger is out of reach.
func startCheckpointsWith(rec *producer.Recorder, c checkpointEvery, rs producer.RecordSigner, stderr io.Writer, written func(*producer.Checkpoint)) error {
	calls := c.calls
	if !c.set() {
		calls = math.MaxInt64
	}
	return rec.StartCheckpoints(rs, producer.CheckpointPolicy{
		EveryAttempts: calls, Every: c.every,
		Done: func(cp *producer.Checkpoint, err error) {
			switch {
			case err != nil:
				fmt.Fprintln(stderr, "tracectl: checkpoint failed: "+escapeTerminal(err.Error()))
			case cp != nil:
				fmt.Fprintf(stderr, "tracectl: checkpoint %s: %d lines, %d attempts signed\n", cp.File, cp.Lines, cp.Attempts)
				if written != nil {
					written(cp)
				}
			}
		},
	})
}
