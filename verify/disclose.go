package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/tracectl/tracectl/internal/anchor"
	"github.com/tracectl/tracectl/internal/anchor/rekor"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// maxDisclosureBytes bounds a disclosed bundle's proof file.
const maxDisclosureBytes = 64 << 20

// isDisclosure says whether fsys is a disclosed bundle: an inclusion proof
// beside the record, and no transcript.
func (v *Verifier) isDisclosure(fsys fs.FS) bool {
	if _, err := fs.Stat(fsys, transcript.TranscriptFile); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, err := fs.Stat(fsys, transcript.DisclosureFile)
	return err == nil
}

// disclosure verifies a disclosed bundle (tracectl disclose): the record,
// the inclusion of the disclosed lines in the transcript it signs, those
// lines against each other, and every payload and snapshot they commit to
// against the bundle's pack, salts included. What the bundle does not
// disclose is stated as the scope (proof_scope_limited), never as missing.
func (v *Verifier) disclosure(ctx context.Context, fsys fs.FS, record []byte) (*Report, error) {
	r := newReport(kindDisclosure, v.o.At)
	rec := v.checkRecord(r, record)
	b := newBundleCheck(v, r, fsys, rec)
	if err := b.scanTree(ctx); err != nil {
		return nil, err
	}
	data, err := readFile(fsys, transcript.DisclosureFile, maxDisclosureBytes)
	if err != nil {
		if !b.refused(transcript.DisclosureFile, checkProof, transcript.DisclosureFile, err) {
			r.add(CodeInclusionProofFailed, checkProof, StatusFail, transcript.DisclosureFile, err.Error())
		}
		return result(r)
	}
	p, err := transcript.ParseProof(data)
	if err != nil {
		r.add(CodeInclusionProofFailed, checkProof, StatusFail, transcript.DisclosureFile, err.Error())
		return result(r)
	}
	b.disc.disclosed = true
	defer b.closePack()
	if err := b.proofLines(ctx, p); err != nil {
		return nil, err
	}
	// The disclosed record is anchored like a bundle's: with a log key
	// its receipt, with a Rekor trusted root its entry, is required
	// (Disclose keeps both). Checkpoints are not disclosed, so none is
	// wanted.
	v.checkAnchors(r, fsys, record, nil)
	return result(r)
}

// Disclosure is a disclosed bundle's files (tracectl disclose).
type Disclosure struct {
	Files    map[string][]byte // transcript.RecordFile, DisclosureFile, PackFile; anchor.RecordFile and rekor.EntryFile for a record anchored in Rekor
	Lines    int               // disclosed lines
	TreeSize int64             // lines of the transcript
	Payloads int               // disclosed payloads of those lines (snapshot pages and manifests aside)
}

// Disclose builds the disclosed bundle of one attempt of the bundle in
// fsys: its record, the inclusion proof of the attempt's lines
// (ProveAttempt), and a pack holding only the payloads those lines commit
// to, with their salts, the bound snapshot's manifest and pages, and the
// policy and lock the header commits to.
// Payloads the bundle does not hold stay out (the lines say they are not
// retained, or the disclosure verifies incomplete, as the bundle would).
func Disclose(fsys fs.FS, attemptID string) (*Disclosure, error) {
	f, err := openRegular(fsys, transcript.TranscriptFile)
	if err != nil {
		return nil, err
	}
	p, err := ProveAttempt(f, attemptID)
	f.Close()
	if err != nil {
		return nil, err
	}
	record, err := readFile(fsys, transcript.RecordFile, sign.MaxRecordBytes)
	if err != nil {
		return nil, err
	}
	proof, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	payloads, err := transcript.OpenPayloads(fsys)
	if err != nil {
		return nil, err
	}
	defer payloads.Close()
	d := &Disclosure{Lines: len(p.Entries), TreeSize: p.TreeSize}
	var pack []byte
	seen := map[string]bool{}
	add := func(digest string) ([]byte, error) {
		if seen[digest] {
			return nil, nil
		}
		seen[digest] = true
		e, b, err := payloads.Entry(digest, DefaultMaxPayloadBytes)
		if errors.Is(err, transcript.ErrPayloadMissing) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("payload %s: %w", digest, err)
		}
		pack = transcript.AppendPackHeader(pack, e.Digest, e.Length, e.Salt)
		pack = append(append(pack, b...), '\n')
		return b, nil
	}
	for _, entry := range p.Entries {
		ev, err := transcript.DecodeLine([]byte(entry.Line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", entry.Index, err)
		}
		var ps []*transcript.Payload
		switch e := ev.(type) {
		case *transcript.Header:
			// The policy and lock the decisions were made under: a
			// verifier re-derives a disclosed attempt's decision from
			// them, as it would the bundle's.
			if pr := e.Policy; pr != nil {
				for _, dg := range []string{pr.PolicyDigest, pr.LockDigest} {
					if dg == "" {
						continue
					}
					if _, err := add(dg); err != nil {
						return nil, fmt.Errorf("policy: %w", err)
					}
				}
			}
		case *transcript.Attempt:
			ps = append(ps, &e.Request)
		case *transcript.Observation:
			ps = append(ps, e.Response)
		case *transcript.Notification:
			ps = append(ps, &e.Payload)
		case *transcript.Protocol:
			ps = append(ps, e.Payload)
		case *transcript.Frame:
			ps = append(ps, &e.Payload)
		case *transcript.SnapshotEvent:
			m, err := add(e.ManifestDigest)
			if err != nil || m == nil {
				if err != nil {
					return nil, fmt.Errorf("snapshot %s: %w", e.SnapshotID, err)
				}
				continue
			}
			man, err := snapshot.ParseManifest(m)
			if err != nil {
				return nil, fmt.Errorf("snapshot %s: %w", e.SnapshotID, err)
			}
			for _, pg := range man.Pages {
				for _, dg := range []string{pg.Request.Digest, pg.Response.Digest} {
					if _, err := add(dg); err != nil {
						return nil, fmt.Errorf("snapshot %s: %w", e.SnapshotID, err)
					}
				}
			}
		}
		for _, pl := range ps {
			if pl != nil && pl.Retained {
				b, err := add(pl.Digest)
				if err != nil {
					return nil, err
				}
				if b != nil {
					d.Payloads++
				}
			}
		}
	}
	d.Files = map[string][]byte{transcript.RecordFile: record, transcript.DisclosureFile: proof, transcript.PackFile: pack}
	// The record's receipt from a C2SP log, if any, goes with it and the
	// anchored record: verify --log-key requires it of a disclosure as
	// of a bundle. The checkpoints' receipts stay behind (no checkpoint is
	// disclosed).
	if name, receipt, ok := recordReceipt(fsys); ok {
		anchored, err := readFile(fsys, anchor.RecordFile, sign.MaxRecordBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", anchor.RecordFile, err)
		}
		d.Files[anchor.RecordFile], d.Files[name] = anchored, receipt
	}
	// The record's Rekor anchoring, if any, goes with it: verify
	// --rekor-root requires it of a disclosure as of a bundle.
	if entry, err := readFile(fsys, rekor.EntryFile, rekor.MaxEntryBytes); err == nil {
		anchored, err := readFile(fsys, anchor.RecordFile, sign.MaxRecordBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", anchor.RecordFile, err)
		}
		d.Files[anchor.RecordFile], d.Files[rekor.EntryFile] = anchored, entry
	}
	return d, nil
}

// recordReceipt finds the receipt in anchors/ that names the sealed
// record (anchors/record.json), if one parses.
func recordReceipt(fsys fs.FS) (name string, data []byte, ok bool) {
	seqs, _, over := listReceipts(fsys)
	if over {
		return "", nil, false
	}
	for _, seq := range seqs {
		name := anchor.Dir + "/" + strconv.Itoa(seq) + ".json"
		data, err := readFile(fsys, name, anchor.MaxReceiptBytes)
		if err != nil {
			continue
		}
		if rc, err := anchor.ParseReceipt(data); err == nil && rc.Statement == anchor.RecordFile {
			return name, data, true
		}
	}
	return "", nil, false
}
