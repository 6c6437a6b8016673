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

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// RecordSigner builds and signs the Trust Record that commits to a sealed
// transcript: tool_transcript.hash = root, call_count = callCount. The sign
// package provides one; producer does not depend on it.
type RecordSigner interface {
	SignTranscript(ctx context.Context, root string, callCount int64) (recordJSON []byte, err error)
}

// Sealed describes a sealed bundle.
type Sealed struct {
	Root   string          // the transcript commitment (tool_transcript.hash)
	Lines  int64           // transcript lines, the seal line included
	Seal   transcript.Seal // the counts; Seal.Attempts is the call count
	Signed bool            // record.json was written
}

// recordTmp is where record.json is written before it is linked into place.
const recordTmp = ".record.json.tmp"

// Seal closes the recorder and seals the bundle: every attempt without a
// terminal observation gets an unknown resolution (sealed_in_flight), the
// seal line is appended, the journal and the pack are made durable
// whatever the durability mode, the commitment is computed from the bytes
// on disk, and, if signer is not nil, record.json is written exclusively
// and atomically. The recorder is closed even when Seal fails; a bundle
// whose seal line is durable but whose record is missing can be signed
// later through Reopen.
func (r *Recorder) Seal(ctx context.Context, signer RecordSigner) (*Sealed, error) {
	r.ckpt.Load().stop()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.closed = true
	r.mu.Unlock()
	r.ops.Wait()
	closed := false
	defer func() {
		if !closed {
			r.j.close(false)
			r.pack.close(false)
		}
	}()

	r.wb.stop()
	seal, err := r.appendSeal(transcript.ReasonSealedInFlight)
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", r.dir, err)
	}
	// Every line is in the file: the commitment is read back from it while
	// the journal and the pack are fsynced (reading needs the bytes, not
	// their durability), and signed only once both are durable.
	if err := r.j.flush(false); err != nil {
		return nil, fmt.Errorf("seal %s: %w", r.dir, err)
	}
	type commit struct {
		root  string
		lines int64
		err   error
	}
	cc := make(chan commit, 1)
	go func() {
		root, lines, err := r.commitment()
		cc <- commit{root, lines, err}
	}()
	err = r.j.flush(true)
	if err == nil {
		if perr := r.pack.sync(); perr != nil {
			err = fmt.Errorf("%w: %w", ErrAuditUnavailable, perr)
		}
	}
	c := <-cc
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", r.dir, err)
	}
	if c.err != nil {
		return nil, fmt.Errorf("seal %s: %w", r.dir, c.err)
	}
	root, lines := c.root, c.lines
	out := &Sealed{Root: root, Lines: lines, Seal: *seal}
	if signer != nil {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rec, err := signer.SignTranscript(ctx, root, seal.Attempts)
		if err != nil {
			return out, fmt.Errorf("seal %s: sign: %w", r.dir, err)
		}
		if _, err := canon.Parse(rec, canon.ParseOptions{}); err != nil || len(rec) == 0 {
			return out, fmt.Errorf("seal %s: the signer returned no JSON record: %v", r.dir, err)
		}
		if err := writeRecord(r.fsys, r.dir, rec); err != nil {
			return out, fmt.Errorf("seal %s: %w", r.dir, err)
		}
		out.Signed = true
	}
	closed = true
	err = r.j.close(true)
	if perr := r.pack.close(true); err == nil {
		err = perr
	}
	if err != nil {
		return out, fmt.Errorf("seal %s: %w", r.dir, err)
	}
	return out, nil
}

// appendSeal resolves attempts without a terminal observation and appends
// the seal line, unless the journal is sealed already. It returns the seal.
func (r *Recorder) appendSeal(reason string) (*transcript.Seal, error) {
	r.mu.Lock()
	if r.sealed {
		s := r.sealLine
		r.mu.Unlock()
		return s, nil
	}
	open := r.hist.inFlight()
	r.mu.Unlock()
	if err := r.resolve(open, reason); err != nil {
		return nil, err
	}
	r.mu.Lock()
	h := &r.hist
	s := &transcript.Seal{Attempts: h.attempts, Recovered: r.replayed.recovered,
		Responses: h.byStatus[stResponse], TransportFailures: h.byStatus[stTransport], Denied: h.byStatus[stDenied]}
	s.Unknown = s.Attempts - s.Responses - s.TransportFailures - s.Denied
	r.mu.Unlock()
	if _, err := r.j.append(r.lineOf(func(q, at int64) { s.Seq, s.AtMs = q, at }, s)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sealed, r.sealLine = true, s
	r.mu.Unlock()
	return s, nil
}

// resolve appends an unknown resolution for each attempt.
func (r *Recorder) resolve(open []*attemptState, reason string) error {
	for _, st := range open {
		ev := &transcript.Resolution{AttemptID: st.id, Outcome: transcript.OutcomeUnknown, Reason: reason}
		if _, err := r.j.append(r.lineOf(func(q, at int64) { ev.Seq, ev.AtMs = q, at }, ev)); err != nil {
			return err
		}
		r.mu.Lock()
		st.resolved = true
		r.hist.set(st, stResolved)
		r.mu.Unlock()
	}
	return nil
}

// commitment reads the journal back from disk and computes the root over
// the bytes that are there: what gets signed is what a verifier will read.
// It checks the framing (every line LF-terminated, bounded) and the count,
// not each line's contents, which this recorder wrote or replayed.
func (r *Recorder) commitment() (string, int64, error) {
	f, err := r.fsys.OpenFile(filepath.Join(r.dir, transcript.TranscriptFile), os.O_RDONLY, 0)
	if err != nil {
		return "", 0, fmt.Errorf("read back %s: %w", transcript.TranscriptFile, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, transcript.MaxLineBytes+1)
	var c transcript.Committer
	for {
		line, err := br.ReadSlice('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil {
			return "", 0, fmt.Errorf("read back %s line %d: %w", transcript.TranscriptFile, c.Count(), err)
		}
		c.Add(line[:len(line)-1])
	}
	if want := r.j.lines(); c.Count() != want {
		return "", 0, fmt.Errorf("read back %s: %d lines on disk, %d appended", transcript.TranscriptFile, c.Count(), want)
	}
	return c.Root(), c.Count(), nil
}

// writeRecord creates record.json exclusively and atomically: written and
// fsynced under a temporary name, then hard-linked into place (which fails
// if a record exists), then the directory is fsynced.
func writeRecord(fsys FS, dir string, rec []byte) error {
	final := filepath.Join(dir, transcript.RecordFile)
	if _, err := fsys.Stat(final); err == nil {
		return fmt.Errorf("%w: %s exists", ErrSealed, transcript.RecordFile)
	}
	err := linkInPlace(fsys, filepath.Join(dir, recordTmp), final, rec)
	if errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("%w: %s exists", ErrSealed, transcript.RecordFile)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", transcript.RecordFile, err)
	}
	return nil
}

// linkInPlace creates final exclusively and atomically with data: written
// and fsynced under tmp (a leftover tmp from a crash is never a final
// file, and is removed first), hard-linked into place (which fails with
// fs.ErrExist if final exists), then the directory is fsynced.
func linkInPlace(fsys FS, tmp, final string, data []byte) error {
	_ = fsys.Remove(tmp)
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Link(tmp, final)
	}
	_ = fsys.Remove(tmp)
	if err != nil {
		return err
	}
	if err := syncDir(fsys, filepath.Dir(final)); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}
