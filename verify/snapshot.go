package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// onSnapshot checks a snapshot event: its manifest bytes against the
// committed digest, the manifest against itself and the event, and every
// page against the manifest (snapshot.VerifyPages).
func (b *bundleCheck) onSnapshot(e *transcript.SnapshotEvent) {
	b.r.Counts.Snapshots++
	subject := "snapshot " + e.SnapshotID
	if prev, dup := b.snap.snapshots[e.SnapshotID]; dup {
		b.conflict(CodeIdentityConflict, subject, fmt.Sprintf("snapshot id reused: first at seq %d, again at seq %d", prev.seq, e.Seq))
		return
	}
	st := &snapState{seq: e.Seq, atMs: e.AtMs, digest: e.ManifestDigest, complete: e.Complete, reasons: e.IncompleteReason, staleAt: -1}
	b.snap.snapshots[e.SnapshotID] = st
	if b.partial && !b.disc.disclosed {
		b.disc.undisclosed++
		return
	}
	m := b.manifest(e, subject)
	if m == nil {
		return
	}
	st.usable = true
	st.complete = m.Complete
	if !m.Complete {
		st.reasons = fmt.Sprint(m.IncompleteReasons)
	} else {
		st.tools = make(map[string]struct{}, len(m.Tools))
		for _, t := range m.Tools {
			if t.Name != nil {
				st.tools[*t.Name] = struct{}{}
				b.declaration(*t.Name, t.Declaration.Digest, e)
			}
		}
	}
	bad := false
	mismatch := func(detail string) {
		bad = true
		b.r.add(CodeSnapshotMismatch, checkSnapshot, StatusFail, subject, detail)
	}
	// The line's incomplete_reason is every reason joined (what the proxy
	// writes, snapshot.ReasonText) or, as earlier producers wrote it, the
	// first one; both are the manifest's facts.
	if reason := e.IncompleteReason; e.Complete != m.Complete || (reason != snapshot.ReasonText(m) && reason != m.IncompleteReason()) {
		mismatch(fmt.Sprintf("the transcript says complete=%v (%q), the manifest complete=%v (%q)", e.Complete, e.IncompleteReason, m.Complete, snapshot.ReasonText(m)))
	}
	if e.Tools != int64(len(m.Tools)) || e.Pages != int64(len(m.Pages)) {
		mismatch(fmt.Sprintf("the transcript says %d tools on %d pages, the manifest %d on %d", e.Tools, e.Pages, len(m.Tools), len(m.Pages)))
	}
	if reused := m.Cache.Provenance == snapshot.ProvenanceReused; e.Reuse != reused {
		mismatch(fmt.Sprintf("the transcript says reuse=%v, the manifest's cache provenance is %s", e.Reuse, m.Cache.Provenance))
	}
	load := func(d string) ([]byte, error) {
		data, where, err := b.readPayload(d, snapshot.CeilingMaxPageBytes)
		b.refused(where, checkSnapshot, subject, err)
		return data, err
	}
	for _, p := range snapshot.VerifyPages(m, load) {
		bad = true
		if p.Kind == snapshot.ProblemUnavailable {
			b.r.add(CodeEvidenceUnavailable, checkSnapshot, StatusUnavailable, subject+" "+p.Pointer, p.Detail)
		} else {
			b.r.add(CodeSnapshotMismatch, checkSnapshot, StatusFail, subject+" "+p.Pointer, p.Detail)
		}
	}
	for i, t := range m.Tools {
		if t.Declaration.Status == snapshot.DeclUnsupported {
			ptr := ""
			if t.Declaration.Pointer != nil {
				ptr = *t.Declaration.Pointer
			}
			b.r.add(CodeValueUnsupported, checkSnapshot, StatusUnsupported, fmt.Sprintf("%s /tools/%d", subject, i),
				fmt.Sprintf("declaration %s cannot be canonicalized under %s (%s at %s): its page bytes are committed, its declaration digest is not", toolName(t), canon.PolicyMCPDeclID, t.Declaration.Code, pointer(ptr)))
		}
	}
	if !bad {
		detail := fmt.Sprintf("manifest and %d pages match their commitments; %d tool declarations re-derived", len(m.Pages), len(m.Tools))
		if !m.Complete {
			detail += "; an incomplete collection (" + strings.Join(m.IncompleteReasons, ", ") + ")"
		}
		if m.Cache.Original != nil {
			o := m.Cache.Original
			detail += fmt.Sprintf("; reused from capture %s (%s) under freshness policy %q", o.CaptureID, o.ManifestDigest, o.FreshnessPolicy.Name)
		}
		b.r.add(CodeSnapshotVerified, checkSnapshot, StatusPass, subject, detail)
	}
	if m.Cache.Original != nil {
		b.referenceOriginal(m.Cache.Original.ManifestDigest)
	}
}

// referenceOriginal notes the original capture a reuse names, when the
// bundle retains it: its manifest and pages are referenced (the reuse
// manifest commits to its digest), not checked (the reuse's own pages
// are).
func (b *bundleCheck) referenceOriginal(digest string) {
	data, _, err := b.readPayload(digest, snapshot.MaxManifestBytes)
	if err != nil || canon.SHA256(data) != digest {
		return
	}
	om, err := snapshot.ParseManifest(data)
	if err != nil {
		return
	}
	for _, p := range om.Pages {
		b.packEntry(p.Request.Digest)
		b.packEntry(p.Response.Digest)
	}
}

func toolName(t snapshot.Tool) string {
	if t.Name != nil {
		return fmt.Sprintf("of tool %q", *t.Name)
	}
	return "of an unnamed tool"
}

// manifest loads and parses a snapshot's manifest, reporting why it cannot
// be used: missing (unavailable), different bytes (mismatch), a reuse
// without its original capture and freshness policy (wrong snapshot), a
// format this verifier does not know (unsupported), or invalid.
func (b *bundleCheck) manifest(e *transcript.SnapshotEvent, subject string) *snapshot.Manifest {
	data, path, err := b.readPayload(e.ManifestDigest, snapshot.MaxManifestBytes)
	switch {
	case b.refused(path, checkSnapshot, subject, err):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		b.r.add(CodeEvidenceUnavailable, checkSnapshot, StatusUnavailable, subject, "the manifest "+e.ManifestDigest+" is missing from the bundle")
		return nil
	case errors.Is(err, ErrTooLarge):
		b.r.add(CodeSnapshotMismatch, checkSnapshot, StatusFail, subject, path+" is larger than any manifest ("+err.Error()+")")
		return nil
	case err != nil:
		b.r.add(CodeEvidenceUnavailable, checkSnapshot, StatusUnavailable, subject, "the manifest cannot be read: "+err.Error())
		return nil
	}
	if got := canon.SHA256(data); got != e.ManifestDigest {
		b.r.add(CodeSnapshotMismatch, checkSnapshot, StatusFail, subject, fmt.Sprintf("the manifest bytes hash to %s, the transcript commits to %s", got, e.ManifestDigest))
		return nil
	}
	m, err := snapshot.ParseManifest(data)
	if err == nil {
		return m
	}
	// The bytes are the committed ones but unusable: say why as precisely
	// as the raw document allows.
	doc, perr := canon.Parse(data, canon.ParseOptions{})
	if perr == nil {
		root := doc.Root()
		if f, ok := root.Get("format"); ok {
			if s, _ := f.Str(); s != snapshot.ManifestFormat {
				b.r.add(CodeFormatUnsupported, checkSnapshot, StatusUnsupported, subject, fmt.Sprintf("manifest format %q, this verifier reads %q", s, snapshot.ManifestFormat))
				return nil
			}
		}
		if reuseWithoutOrigin(root) {
			b.r.add(CodeSnapshotWrong, checkSnapshot, StatusFail, subject,
				"a reused snapshot that does not name its original capture and the freshness policy it was reused under")
			return nil
		}
	}
	b.r.add(CodeSnapshotMismatch, checkSnapshot, StatusFail, subject, "the committed manifest is not valid: "+err.Error())
	return nil
}

// reuseWithoutOrigin reports a manifest whose cache provenance is "reused"
// but which lacks the original capture id, its digest or the freshness
// policy name.
func reuseWithoutOrigin(root canon.Value) bool {
	cache, _ := root.Get("cache")
	prov, _ := cache.Get("provenance")
	if s, _ := prov.Str(); s != snapshot.ProvenanceReused {
		return false
	}
	orig, ok := cache.Get("original")
	if !ok {
		return true
	}
	id, _ := orig.Get("capture_id")
	dg, _ := orig.Get("manifest_digest")
	pol, _ := orig.Get("freshness_policy")
	name, _ := pol.Get("name")
	ids, _ := id.Str()
	dgs, _ := dg.Str()
	names, _ := name.Str()
	return ids == "" || dgs == "" || names == ""
}

// bindSnapshot checks an attempt's snapshot binding against the snapshot
// events before it.
func (b *bundleCheck) bindSnapshot(a *transcript.Attempt) {
	ref := a.Snapshot
	subject := "attempt " + a.AttemptID
	if ref.NoneReason != "" {
		// One summary finding per reason at the end (unboundFindings):
		// a session that never listed its tools is one fact, not one per call.
		u := b.snap.unbound[ref.NoneReason]
		if u.count == 0 {
			if b.snap.unbound == nil {
				b.snap.unbound = map[string]unboundCount{}
				b.snap.unboundOrder = nil
			}
			b.snap.unboundOrder = append(b.snap.unboundOrder, ref.NoneReason)
			u.first = a.AttemptID
		}
		u.count++
		b.snap.unbound[ref.NoneReason] = u
		return
	}
	s, ok := b.snap.snapshots[ref.SnapshotID]
	if !ok {
		b.snap.pending = append(b.snap.pending, pendingRef{attempt: a.AttemptID, seq: a.Seq, snapshot: ref.SnapshotID})
		return
	}
	if ref.ManifestDigest != s.digest {
		b.r.add(CodeBindingFailure, checkSnapshot, StatusFail, subject,
			fmt.Sprintf("binds snapshot %s as %s, the transcript records it as %s", ref.SnapshotID, ref.ManifestDigest, s.digest))
		return
	}
	if ref.Complete != s.complete {
		b.r.add(CodeSnapshotMismatch, checkSnapshot, StatusFail, subject,
			fmt.Sprintf("binds snapshot %s as complete=%v, the snapshot is complete=%v", ref.SnapshotID, ref.Complete, s.complete))
	}
	if s.atMs > a.AtMs {
		b.r.add(CodeSnapshotWrong, checkSnapshot, StatusFail, subject,
			fmt.Sprintf("bound to snapshot %s captured at %d ms, after the attempt's dispatch at %d ms", ref.SnapshotID, s.atMs, a.AtMs))
	}
	if !s.complete && !s.reported {
		s.reported = true
		b.r.add(CodeSnapshotIncomplete, checkSnapshot, StatusUnavailable, "snapshot "+ref.SnapshotID,
			fmt.Sprintf("an incomplete collection %s, used by attempt %s (and possibly later ones): declarations outside it are not in evidence", s.reasons, a.AttemptID))
	}
	changed := b.snap.lastChanged > s.seq
	if changed && !ref.ListChangedSince {
		b.malformed(a.Seq, "list_changed_since", fmt.Sprintf("tools/list_changed was recorded at seq %d, after snapshot %s and before this attempt, but the binding does not say so", b.snap.lastChanged, ref.SnapshotID))
	}
	if s.tools != nil && !changed && !ref.ListChangedSince && a.ToolInvalid == "" {
		if _, ok := s.tools[a.Tool]; !ok {
			// Judged when the outcome is known (undeclaredOutcome): a result
			// means the server ran a tool the committed declarations do not
			// hold; an error (an agent's hallucinated tool name, refused)
			// contradicts nothing.
			if b.snap.undeclared == nil {
				b.snap.undeclared = map[string]string{}
			}
			b.snap.undeclared[a.AttemptID] = fmt.Sprintf("calls tool %s, which the complete snapshot %s it is bound to does not declare (%d tools)", quote(a.Tool), ref.SnapshotID, len(s.tools))
		}
	}
	if (changed || ref.ListChangedSince) && s.staleAt != b.snap.lastChanged {
		s.staleAt = b.snap.lastChanged
		b.r.add(CodeSnapshotIncomplete, checkSnapshot, StatusUnavailable, "snapshot "+ref.SnapshotID,
			fmt.Sprintf("a tools/list_changed notification came after the capture and before attempt %s: the declarations may have changed", a.AttemptID))
	}
}

// declaration notes a tool's declaration in a complete snapshot and warns
// (declaration_changed, once per tool) when it differs from the one an
// earlier complete snapshot of the session committed: the server changed
// what a tool is while the session ran.
func (b *bundleCheck) declaration(name, digest string, e *transcript.SnapshotEvent) {
	if digest == "" {
		return // an unsupported declaration has no digest to compare
	}
	if b.snap.decls == nil {
		b.snap.decls = map[string]declSeen{}
	}
	prev, seen := b.snap.decls[name]
	b.snap.decls[name] = declSeen{digest: digest, snapshot: e.SnapshotID, seq: e.Seq}
	if !seen || prev.digest == digest || b.snap.changed[name] {
		return
	}
	if b.snap.changed == nil {
		b.snap.changed = map[string]bool{}
	}
	b.snap.changed[name] = true
	b.r.add(CodeDeclarationChanged, checkSnapshot, StatusWarning, "snapshot "+e.SnapshotID,
		fmt.Sprintf("tool %s is declared as %s here and as %s in snapshot %s (seq %d): its declaration changed during the session", quote(name), digest, prev.digest, prev.snapshot, prev.seq))
}

// undeclaredOutcome reports a call to an undeclared tool once its response
// is known. It is a warning whatever the answer: the evidence is sound, and
// what it shows is behaviour. A JSON-RPC error or an isError result is a
// server refusing a name it never declared (an agent's invented tool name);
// a successful result is a server running a tool its committed, complete
// declarations do not hold: a hidden tool, the loudest of the three.
func (b *bundleCheck) undeclaredOutcome(o *transcript.Observation) {
	what, ok := b.snap.undeclared[o.AttemptID]
	if !ok {
		return
	}
	delete(b.snap.undeclared, o.AttemptID)
	at := " (" + o.Kind + " at seq " + fmt.Sprint(o.Seq) + ")"
	var detail string
	switch {
	case o.ResultType == transcript.ResultTypeError:
		code := ""
		if o.ErrorCode != nil {
			code = fmt.Sprintf(" %d", *o.ErrorCode)
		}
		detail = what + "; the server refused it with JSON-RPC error" + code + at + ": a name outside the declared catalog (an invented tool name)"
	case o.IsError:
		detail = what + "; the server answered with an isError result" + at + ": a name outside the declared catalog (an invented tool name), reported by the server as a tool error"
	default:
		detail = what + "; the server answered it with a successful result" + at + ": a hidden tool ran that the declarations in evidence do not hold"
	}
	b.r.add(CodeToolNotDeclared, checkSnapshot, StatusWarning, "attempt "+o.AttemptID, detail)
}

// undeclaredInfo reports, at the end, calls to undeclared tools that got
// no response at all.
func (b *bundleCheck) undeclaredInfo() {
	if len(b.snap.undeclared) == 0 {
		return
	}
	b.attempts.each(func(id string, _ attemptState) {
		if what, ok := b.snap.undeclared[id]; ok {
			b.r.add(CodeToolNotDeclared, checkSnapshot, StatusWarning, "attempt "+id,
				what+"; no response was recorded for it: the call was outside the declared catalog")
		}
	})
}

// unboundCount counts the attempts that bind no snapshot for one reason.
type unboundCount struct {
	count int64
	first string
}

// unboundFindings reports the attempts that bind no declaration snapshot,
// one finding per reason with the count and the first attempt.
func (b *bundleCheck) unboundFindings() {
	for _, reason := range b.snap.unboundOrder {
		u := b.snap.unbound[reason]
		subject := "attempt " + u.first
		detail := "no declaration snapshot is bound (" + reason + "): the declarations the call was selected from are not in evidence"
		if u.count > 1 {
			subject = fmt.Sprintf("%d attempts", u.count)
			detail = fmt.Sprintf("%d attempts bind no declaration snapshot (%s; first: attempt %s): the declarations those calls were selected from are not in evidence", u.count, reason, u.first)
		}
		b.r.add(CodeEvidenceUnavailable, checkSnapshot, StatusUnavailable, subject, detail)
	}
}
