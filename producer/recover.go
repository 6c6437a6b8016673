package producer

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tracectl/tracectl/internal/approval"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// maxTornBytes bounds the torn tail recovery quarantines. A crash tears at
// most one group-commit write: the pending lines of the concurrent callers,
// each at most transcript.MaxLineBytes. A longer tail is not a torn write.
const maxTornBytes = 64 << 20

// RecoveryReport says what Recover found and appended.
type RecoveryReport struct {
	Lines         int64      // valid lines found in the journal
	Torn          []TornLine // quarantined bytes, each named by a recovery event appended now
	Resolved      []string   // attempts resolved unknown (producer_crashed), in attempt order
	PackTorn      int64      // bytes of a torn final pack entry cut (its line was never appended: the line follows the entry)
	TempBlobs     int        // bundles from before the pack: temporary blob files removed (never a blob)
	Migrated      int        // bundles from before the pack: payloads moved from the spool into the pack
	AlreadySealed bool       // the journal already ended in its seal line: nothing was appended
}

// TornLine is a quarantined torn line.
type TornLine struct {
	File   string // bundle-relative, transcript.QuarantinePath(Digest)
	Digest string
	Length int64
}

// Reopen opens an unsealed bundle to seal it as it is: the journal is
// validated line by line and locked; attempts without a terminal
// observation will be resolved sealed_in_flight by Seal. A journal ending
// in a torn line needs Recover (ErrNeedsRecovery); a bundle with a
// record.json is sealed (ErrSealed). Only Options.Clock and Options.FS are
// used. The Recorder records nothing new (ErrSealOnly): call Seal or Close.
func Reopen(dir string, opts Options) (*Recorder, error) { return openExisting(dir, opts, false) }

// Recover opens an unsealed bundle after a crash (tracectl seal --recover).
// It validates the journal; quarantines a torn final line under
// quarantine/ (exact bytes, named by digest) before truncating it away, so
// it is kept, never silently discarded; removes temporary blob files; and
// appends, never rewrites: a recovery event per quarantined line, a
// recovery event summarizing the recovery, and an unknown resolution
// (producer_crashed) for each attempt without a terminal observation. Then
// call Seal. Corruption before the last line fails closed (ErrCorrupt):
// recovery never guesses.
func Recover(dir string, opts Options) (*Recorder, error) { return openExisting(dir, opts, true) }

// Recovery returns what Recover did, or nil for a recorder from Open or
// Reopen.
func (r *Recorder) Recovery() *RecoveryReport { return r.replayed.recovery }

func openExisting(dir string, opts Options, recover bool) (*Recorder, error) {
	opts = opts.withDefaults()
	if err := opts.check(false); err != nil {
		return nil, err
	}
	fsys := opts.FS
	if _, err := fsys.Stat(filepath.Join(dir, transcript.RecordFile)); err == nil {
		return nil, fmt.Errorf("open bundle %q: %w", dir, ErrSealed)
	}
	path := filepath.Join(dir, transcript.TranscriptFile)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	if err := f.Lock(); err != nil {
		f.Close()
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	r, err := replay(dir, opts, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open bundle %q: %w", dir, err)
	}
	if recover {
		if err := r.recover(); err != nil {
			r.j.close(false)
			if r.pack != nil {
				r.pack.close(false)
			}
			return nil, fmt.Errorf("recover bundle %q: %w", dir, err)
		}
	} else if r.replayed.torn != nil {
		f.Close()
		return nil, fmt.Errorf("open bundle %q: %w (%d bytes after line %d)", dir, ErrNeedsRecovery, len(r.replayed.torn), r.j.lines()-1)
	} else {
		pack, _, err := openPack(fsys, dir, false)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open bundle %q: %w", dir, err)
		}
		r.setPack(pack)
		if _, err := r.migrateSpool(); err != nil {
			r.j.close(false)
			pack.close(false)
			return nil, fmt.Errorf("open bundle %q: %w", dir, err)
		}
	}
	return r, nil
}

// replay reads the journal and rebuilds the recorder's state from it.
func replay(dir string, opts Options, f File) (*Recorder, error) {
	rf, err := opts.FS.OpenFile(filepath.Join(dir, transcript.TranscriptFile), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	tr := transcript.NewReader(rf)
	var r *Recorder
	for {
		_, ev, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var le *transcript.LineError
			if !errors.As(err, &le) {
				return nil, fmt.Errorf("read %s: %w", transcript.TranscriptFile, err)
			}
			if le.Code != transcript.CodeTornLine && le.Code != transcript.CodeTooLong {
				return nil, fmt.Errorf("%w: %w", ErrCorrupt, le)
			}
			if r == nil {
				return nil, fmt.Errorf("%w: the header line is torn: nothing was recorded", ErrCorrupt)
			}
			if r.replayed.torn, err = readTail(opts.FS, filepath.Join(dir, transcript.TranscriptFile), tr.Offset()); err != nil {
				return nil, err
			}
			if r.sealed {
				return nil, fmt.Errorf("%w: bytes after the seal line", ErrCorrupt)
			}
			break
		}
		if h, ok := ev.(*transcript.Header); ok {
			d, err := serverDigest(h.Server)
			if err != nil {
				return nil, err
			}
			o := opts
			o.Durability, o.Retention = h.Durability, h.Retention
			r = newRecorder(dir, o, h.ExecutionScope, d)
			r.sealOnly = true
			continue
		}
		if err := r.apply(ev); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrCorrupt, tr.Lines()-1, err)
		}
	}
	if r == nil {
		return nil, fmt.Errorf("%w: empty journal", ErrCorrupt)
	}
	// Later lines (resolutions, recovery events, the seal) are made durable
	// together by Seal's final fsync.
	r.j = newJournal(f, transcript.DurabilityNone, tr.Lines(), tr.Offset())
	r.replayed.scanned = tr.Lines()
	return r, nil
}

// apply replays one event. It checks what the state makes checkable: ids
// unique, observations naming recorded attempts.
func (r *Recorder) apply(ev transcript.Event) error {
	switch e := ev.(type) {
	case *transcript.Protocol:
		if e.Era == mcpwire.EraLegacy {
			r.proto.era, r.proto.legacyVer = e.Era, e.Version
		} else if e.Era == mcpwire.EraModern {
			r.proto.era = e.Era
		}
	case *transcript.SnapshotEvent:
		if r.bind.snapshots[e.SnapshotID] != nil {
			return fmt.Errorf("snapshot id %s recorded twice", e.SnapshotID)
		}
		r.bind.snapshots[e.SnapshotID], r.bind.current = e, e
	case *transcript.Notification:
		if e.Method == mcpwire.NotifyToolsListChanged {
			r.bind.lastChanged = e.Seq
		}
	case *transcript.Attempt:
		if r.replayed.attempts[e.AttemptID] != nil {
			return fmt.Errorf("attempt id %s reused", e.AttemptID)
		}
		st := &attemptState{id: e.AttemptID, seq: e.Seq, tool: e.Tool}
		r.replayed.attempts[st.id] = st
		r.hist.add(st)
	case *transcript.Observation:
		st := r.replayed.attempts[e.AttemptID]
		if st == nil {
			return fmt.Errorf("observation of unrecorded attempt %s", e.AttemptID)
		}
		switch e.Kind {
		case transcript.ObsResponse, transcript.ObsLateResponse:
			r.hist.set(st, stResponse)
		case transcript.ObsTransportFailure:
			if st.status != stResponse {
				r.hist.set(st, stTransport)
			}
		case transcript.ObsDenied:
			r.hist.set(st, stDenied)
		case approval.Kind:
			// Not an outcome: the call was still to be forwarded or denied.
		default:
			if st.status == stInFlight {
				r.hist.set(st, stUnknown)
			}
		}
	case *transcript.Resolution:
		st := r.replayed.attempts[e.AttemptID]
		if st == nil {
			return fmt.Errorf("resolution of unrecorded attempt %s", e.AttemptID)
		}
		st.resolved = true
		if st.status == stInFlight {
			r.hist.set(st, stResolved)
		}
	case *transcript.Recovery:
		r.replayed.recovered = true
		if e.TornFile != "" {
			if r.replayed.quarantined == nil {
				r.replayed.quarantined = map[string]bool{}
			}
			r.replayed.quarantined[e.TornFile] = true
		}
	case *transcript.Seal:
		r.sealed, r.sealLine = true, e
	}
	return nil
}

// readTail returns the bytes of path from off to the end.
func readTail(fsys FS, path string, off int64) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := io.CopyN(io.Discard, f, off); err != nil {
		return nil, fmt.Errorf("read torn tail: %w", err)
	}
	tail, err := io.ReadAll(io.LimitReader(f, maxTornBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read torn tail: %w", err)
	}
	if len(tail) > maxTornBytes {
		return nil, fmt.Errorf("%w: more than %d bytes after the last valid line", ErrCorrupt, maxTornBytes)
	}
	if bytes.IndexByte(tail, '\n') >= 0 {
		return nil, fmt.Errorf("%w: an invalid complete line at byte %d", ErrCorrupt, off)
	}
	return tail, nil
}

// recover quarantines the torn tail, records what it did, and resolves the
// attempts left in flight.
func (r *Recorder) recover() error {
	rep := &RecoveryReport{Lines: r.replayed.scanned}
	r.replayed.recovery = rep
	qdir := filepath.Join(r.dir, transcript.QuarantineDir)
	current := ""
	if r.replayed.torn != nil {
		if r.sealed {
			return fmt.Errorf("%w: bytes after the seal line", ErrCorrupt)
		}
		d := canon.SHA256(r.replayed.torn)
		if err := writeQuarantine(r.fsys, r.dir, d, r.replayed.torn); err != nil {
			return err
		}
		// This tear gets its own event even if identical bytes were
		// quarantined before: every tear is named.
		current = transcript.QuarantinePath(d)
		rep.Torn = append(rep.Torn, TornLine{File: current, Digest: d, Length: int64(len(r.replayed.torn))})
		// Only now that the bytes are durable elsewhere does the journal lose them.
		if err := r.j.f.Truncate(r.j.size); err != nil {
			return fmt.Errorf("truncate torn tail: %w", err)
		}
		if err := r.j.f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", transcript.TranscriptFile, err)
		}
		r.replayed.torn = nil
	}
	// Quarantined bytes no recovery event names yet: this recovery's, or one
	// that crashed between truncating and appending its event.
	ents, err := r.fsys.ReadDir(qdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", transcript.QuarantineDir, err)
	}
	for _, e := range ents {
		rel := transcript.QuarantineDir + "/" + e.Name()
		if rel == current || r.replayed.quarantined[rel] || transcript.QuarantinePath("sha256:"+e.Name()) != rel {
			continue // named already, or not a quarantine file of ours
		}
		b, err := readBounded(r.fsys, filepath.Join(qdir, e.Name()), maxTornBytes)
		if err != nil {
			return err
		}
		if canon.SHA256(b) != "sha256:"+e.Name() {
			return fmt.Errorf("%w: quarantine file %s does not hold the bytes its name says", ErrCorrupt, e.Name())
		}
		rep.Torn = append(rep.Torn, TornLine{File: rel, Digest: "sha256:" + e.Name(), Length: int64(len(b))})
	}
	pack, torn, err := openPack(r.fsys, r.dir, true)
	if err != nil {
		return err
	}
	r.setPack(pack)
	rep.PackTorn = torn
	if rep.TempBlobs, err = removeTempBlobs(r.fsys, filepath.Join(r.dir, filepath.FromSlash(transcript.BlobDir))); err != nil {
		return fmt.Errorf("remove temporary blobs: %w", err)
	}
	if err := removeCheckpointTemps(r.fsys, r.dir); err != nil {
		return err
	}
	if rep.Migrated, err = r.migrateSpool(); err != nil {
		return err
	}
	if r.sealed {
		rep.AlreadySealed = true
		return nil
	}
	open := r.hist.inFlight()
	for _, st := range open {
		rep.Resolved = append(rep.Resolved, st.id)
	}
	for _, t := range rep.Torn {
		ev := &transcript.Recovery{TornDigest: t.Digest, TornLength: t.Length, TornFile: t.File,
			Detail: "a line torn by a crash mid-write; its exact bytes are kept in the quarantine file, unparsed; the call it may have held was never acknowledged"}
		if _, err := r.j.append(r.lineOf(func(q, at int64) { ev.Seq, ev.AtMs = q, at }, ev)); err != nil {
			return err
		}
	}
	summary := fmt.Sprintf("recovered after the producer stopped without sealing: %d valid lines, %d torn lines quarantined, %d attempts without a terminal observation resolved unknown",
		rep.Lines, len(rep.Torn), len(open))
	ev := &transcript.Recovery{Detail: summary}
	if _, err := r.j.append(r.lineOf(func(q, at int64) { ev.Seq, ev.AtMs = q, at }, ev)); err != nil {
		return err
	}
	r.replayed.recovered = true
	if err := r.resolve(open, transcript.ReasonProducerCrashed); err != nil {
		return err
	}
	return r.j.flush(true)
}

func writeQuarantine(fsys FS, dir, digest string, b []byte) error {
	qdir := filepath.Join(dir, transcript.QuarantineDir)
	if err := fsys.Mkdir(qdir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", transcript.QuarantineDir, err)
	}
	name := filepath.Join(dir, filepath.FromSlash(transcript.QuarantinePath(digest)))
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil // the same digest: the same bytes, kept by an earlier attempt at recovery
	}
	if err != nil {
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(fsys, qdir)
	}
	if err == nil {
		err = syncDir(fsys, dir)
	}
	if err != nil {
		_ = fsys.Remove(name)
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	return nil
}

func readBounded(fsys FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: longer than %d bytes", name, limit)
	}
	return b, nil
}
