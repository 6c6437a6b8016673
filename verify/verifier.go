package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// Verifier checks evidence under one set of validated Options. It holds no
// state between calls and is safe for concurrent use.
type Verifier struct {
	o    Options
	keys *anchor.Keys // Options.LogKey parsed: anchors are checked (anchor.go)
	// rekorRoot is Options.RekorRoot parsed: Rekor entries are checked.
	rekorRoot *root.TrustedRoot
}

// New validates the options together and returns a Verifier. Every
// problem is reported at once, wrapped in ErrOptions.
func New(o Options) (*Verifier, error) {
	o, err := o.validate()
	if err != nil {
		return nil, err
	}
	v := &Verifier{o: o}
	if o.LogKey != "" {
		k, err := anchor.ParseKeys(o.LogKey, o.WitnessKeys, o.WitnessThreshold)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
		v.keys = &k
	} else if len(o.WitnessKeys) > 0 || o.WitnessThreshold != 0 {
		return nil, fmt.Errorf("%w: witness keys and a threshold need LogKey", ErrOptions)
	}
	if o.RekorRoot != nil {
		tr, err := rekor.ParseTrustedRoot(o.RekorRoot)
		if err != nil {
			return nil, fmt.Errorf("%w: Rekor %w", ErrOptions, err)
		}
		v.rekorRoot = tr
	}
	return v, nil
}

// Record verifies a Trust Record alone (the exact bytes of record.json):
// profile, shape, canonicalization, signature, trust and freshness. A
// record that commits to a transcript is at best Incomplete here: the
// transcript was not given, so the calls it commits to were not checked.
//
// The error is nil iff the verdict is Verified; otherwise it is a
// *VerdictError carrying the same Report.
func (v *Verifier) Record(ctx context.Context, record []byte) (*Report, error) {
	r := newReport(kindRecord, v.o.At)
	rec := v.checkRecord(r, record)
	if rec != nil && rec.ToolTranscript != nil {
		r.add(CodeEvidenceUnavailable, checkTranscript, StatusUnavailable, transcript.TranscriptFile,
			"the record commits to a transcript ("+rec.ToolTranscript.Hash+") that was not given: verify the bundle directory to check the calls")
	}
	v.noRekorEntry(r)
	return result(r)
}

// Bundle verifies a bundle: fsys holds record.json, transcript.jsonl and
// blobs/ (DirFS of a bundle directory: os.DirFS follows symbolic links
// and blocks on FIFOs). Only regular files are read, whatever fsys is; a
// bundle file that is not one is the finding file_refused. The transcript is streamed: memory
// depends on the number of distinct attempt and snapshot identities, never
// on payload sizes or the number of lines held at once.
//
// A bundle whose record cannot be read at all (absent, unreadable, not a
// regular file: ErrNotRegular, or larger than sign.MaxRecordBytes:
// ErrTooLarge) returns a nil Report and an error wrapping the cause: there
// is nothing to verify against. The exception is a bundle without
// record.json that holds signed checkpoints (its producer stopped before
// sealing): it is verified by its last valid checkpoint, and the lines
// after it are reported unsigned (tail_unsigned; spec/checkpoints.md). Every other problem is a finding. The error is nil iff the verdict is Verified; otherwise it is a
// *VerdictError carrying the same Report, or ctx.Err().
func (v *Verifier) Bundle(ctx context.Context, fsys fs.FS) (*Report, error) {
	// One byte past the limit is enough for ParseRecord to refuse an
	// oversized record as a finding.
	data, err := readFile(fsys, transcript.RecordFile, sign.MaxRecordBytes)
	if err == nil && v.isDisclosure(fsys) {
		return v.disclosure(ctx, fsys, data)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if rep, ok, cerr := v.unsealedBundle(ctx, fsys); ok {
				return rep, cerr // checkpoints sign a prefix (checkpoint.go)
			}
		}
		return nil, fmt.Errorf("read %s: %w", transcript.RecordFile, err)
	}
	r := newReport(kindBundle, v.o.At)
	rec := v.checkRecord(r, data)
	b := newBundleCheck(v, r, fsys, rec)
	b.ck = v.readCheckpoints(r, fsys)
	if err := b.scanTree(ctx); err != nil {
		return nil, err
	}
	if err := b.run(ctx); err != nil {
		return nil, err
	}
	v.checkAnchors(r, fsys, data, b.ck.files())
	return result(r)
}

// ErrTooLarge reports a file beyond the limit its reader allows.
var ErrTooLarge = errors.New("file exceeds its size limit")

// readFile reads a whole file of at most max bytes.
func readFile(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, err := openRegular(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return b, nil
}
