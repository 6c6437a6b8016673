// Package snapdiff compares two declaration snapshots tool by tool, for
// tracectl diff and the drift section of tracectl export (spec/snapshot.md,
// section 6).
package snapdiff

import (
	"bytes"
	"slices"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/snapshot"
)

// Changes a tool can show between two snapshots.
const (
	ChangeAdded         = "added"
	ChangeRemoved       = "removed"
	ChangeChanged       = "changed"
	ChangeUnchanged     = "unchanged"
	ChangeCannotCompare = "cannot_compare"
)

// Why a tool cannot be compared (ToolDiff.Reason).
const (
	cannotOldUnsupported = "old_unsupported" // the old declaration cannot be canonicalized
	cannotNewUnsupported = "new_unsupported"
	cannotOldIncomplete  = "old_incomplete" // absent from an incomplete old snapshot: maybe never collected
	cannotNewIncomplete  = "new_incomplete" // absent from an incomplete new snapshot: not proof of removal
	cannotAmbiguousName  = "ambiguous_name" // the name occurs more than once on a side
)

// Diff verdicts.
const (
	VerdictIdentical  = "identical"
	VerdictDrifted    = "drifted"
	VerdictIncomplete = "incomplete" // no drift found, but something could not be compared
)

// maxChangedMembers bounds the member pointers reported for one tool; a
// rewrite of a whole schema is reported at its first maxChangedMembers
// places and marked truncated.
const maxChangedMembers = 64

// Input is one side of a comparison: a manifest and, optionally, a way
// to load its page bytes (needed to name the changed members; without it a
// change is still found from the declaration digests).
type Input struct {
	Manifest *snapshot.Manifest
	Load     snapshot.LoadFunc
}

// ToolDiff is the comparison of one tool name.
type ToolDiff struct {
	Name      string   `json:"name"`
	Change    string   `json:"change"`
	Members   []string `json:"members,omitempty"`   // JSON Pointers (relative to the tool) that differ, for changed
	Truncated bool     `json:"truncated,omitempty"` // more than 64 members differ
	Reason    string   `json:"reason,omitempty"`    // for cannot_compare; for changed without members: why members are unknown
}

// Result is the comparison of two snapshots.
type Result struct {
	Verdict string     `json:"verdict"`
	Old     Side       `json:"old"`
	New     Side       `json:"new"`
	Tools   []ToolDiff `json:"tools"`
}

// Side summarises one snapshot.
type Side struct {
	CaptureID         string   `json:"capture_id"`
	Complete          bool     `json:"complete"`
	IncompleteReasons []string `json:"incomplete_reasons"`
	Tools             int      `json:"tools"`
}

// Diff compares the tool declarations of two snapshots by name. A tool is
// changed when its declaration digests differ (every member counts:
// description, schemas, annotations, _meta, unknown members); the changed
// members are named when page bytes are available. A tool absent from an
// incomplete snapshot is cannot_compare, never added or removed.
func Diff(old, new Input) *Result {
	r := &Result{Old: side(old.Manifest), New: side(new.Manifest), Tools: []ToolDiff{}}
	oi, ni := index(old.Manifest), index(new.Manifest)
	names := make([]string, 0, len(oi)+len(ni))
	for n := range oi {
		names = append(names, n)
	}
	for n := range ni {
		if _, ok := oi[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var oldDocs, newDocs pageCache
	drift, incomplete := false, !old.Manifest.Complete || !new.Manifest.Complete
	for _, name := range names {
		o, n := oi[name], ni[name]
		d := ToolDiff{Name: name}
		switch {
		case len(o) > 1 || len(n) > 1:
			d.Change, d.Reason = ChangeCannotCompare, cannotAmbiguousName
		case len(o) == 0:
			d.Change = ChangeAdded
			if !old.Manifest.Complete {
				d.Change, d.Reason = ChangeCannotCompare, cannotOldIncomplete
			}
		case len(n) == 0:
			d.Change = ChangeRemoved
			if !new.Manifest.Complete {
				d.Change, d.Reason = ChangeCannotCompare, cannotNewIncomplete
			}
		case o[0].Declaration.Status != snapshot.DeclOK:
			d.Change, d.Reason = ChangeCannotCompare, cannotOldUnsupported
		case n[0].Declaration.Status != snapshot.DeclOK:
			d.Change, d.Reason = ChangeCannotCompare, cannotNewUnsupported
		case o[0].Declaration.Digest == n[0].Declaration.Digest:
			d.Change = ChangeUnchanged
		default:
			d.Change = ChangeChanged
			ov, oerr := oldDocs.tool(old, o[0])
			nv, nerr := newDocs.tool(new, n[0])
			if oerr != "" || nerr != "" {
				d.Reason = "members unknown: " + oerr + nerr
				break
			}
			var ms []string
			d.Truncated = !diffValues(ov, nv, "", &ms)
			d.Members = ms
		}
		switch d.Change {
		case ChangeAdded, ChangeRemoved, ChangeChanged:
			drift = true
		case ChangeCannotCompare:
			incomplete = true
		}
		r.Tools = append(r.Tools, d)
	}
	switch {
	case drift:
		r.Verdict = VerdictDrifted
	case incomplete:
		r.Verdict = VerdictIncomplete
	default:
		r.Verdict = VerdictIdentical
	}
	return r
}

func side(m *snapshot.Manifest) Side {
	return Side{CaptureID: m.CaptureID, Complete: m.Complete, IncompleteReasons: m.IncompleteReasons, Tools: len(m.Tools)}
}

func index(m *snapshot.Manifest) map[string][]snapshot.Tool {
	out := make(map[string][]snapshot.Tool, len(m.Tools))
	for _, t := range m.Tools {
		if t.Name != nil {
			out[*t.Name] = append(out[*t.Name], t)
		}
	}
	return out
}

// pageCache parses each page at most once per side.
type pageCache map[int64]*canon.Doc

func (c *pageCache) tool(in Input, t snapshot.Tool) (canon.Value, string) {
	if in.Load == nil {
		return canon.Value{}, "page bytes not given"
	}
	if *c == nil {
		*c = pageCache{}
	}
	doc, ok := (*c)[t.Page]
	if !ok {
		p := in.Manifest.Pages[t.Page]
		data, err := in.Load(p.Response.Digest)
		if err != nil || canon.SHA256(data) != p.Response.Digest {
			return canon.Value{}, "page " + p.Response.Digest + " unavailable or not matching"
		}
		doc, err = canon.Parse(data, canon.ParseOptions{AllowDuplicateKeys: true, Limits: canon.Limits{MaxBytes: snapshot.CeilingMaxPageBytes}})
		if err != nil {
			return canon.Value{}, "page " + p.Response.Digest + " unreadable"
		}
		(*c)[t.Page] = doc
	}
	// Get reads an ambiguous member as absent, as the collector does.
	res, _ := doc.Root().Get("result")
	tools, _ := res.Get("tools")
	el := tools.Elems()
	if int(t.Index) >= len(el) {
		return canon.Value{}, "tool not in its page"
	}
	return el[t.Index], ""
}

// diffValues appends the pointers (relative to the tool) of the places
// where a and b differ, descending into objects and same-length arrays. It
// returns false when it stopped at maxChangedMembers.
func diffValues(a, b canon.Value, ptr string, out *[]string) bool {
	ca, erra := a.Canonical(canon.PolicyMCPDecl)
	cb, errb := b.Canonical(canon.PolicyMCPDecl)
	if erra == nil && errb == nil && bytes.Equal(ca, cb) {
		return true
	}
	add := func(p string) bool {
		if len(*out) >= maxChangedMembers {
			return false
		}
		*out = append(*out, p)
		return true
	}
	switch {
	case a.Kind() == canon.KindObject && b.Kind() == canon.KindObject:
		am, bm := map[string]canon.Value{}, map[string]canon.Value{}
		for _, m := range a.Members() {
			am[m.Name] = m.Value
		}
		for _, m := range b.Members() {
			bm[m.Name] = m.Value
		}
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := ptr + "/" + escapePointer(k)
			av, aok := am[k]
			bv, bok := bm[k]
			if !aok || !bok {
				if !add(p) {
					return false
				}
				continue
			}
			if !diffValues(av, bv, p, out) {
				return false
			}
		}
		return true
	case a.Kind() == canon.KindArray && b.Kind() == canon.KindArray && a.Len() == b.Len():
		ae, be := a.Elems(), b.Elems()
		for i := range ae {
			if !diffValues(ae[i], be[i], ptr+"/"+itoa(i), out) {
				return false
			}
		}
		return true
	}
	return add(ptr)
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
