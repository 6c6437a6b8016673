package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/tracectl/tracectl/canon"
)

// Reuse returns the manifest of a cached snapshot reused under policy: the
// same pages, tools and collection facts as original, with cache provenance
// "reused" naming the original capture (its capture id and manifest digest)
// and the freshness policy. A list_changed seen before the original's
// dispatch does not carry over; the caller records any seen before this
// reuse's dispatch with markListChangedBeforeDispatch.
func Reuse(original *Manifest, policy FreshnessPolicy) (*Manifest, error) {
	if policy.Name == "" {
		return nil, errors.New("reuse: freshness policy needs a name")
	}
	digest, err := original.Digest()
	if err != nil {
		return nil, fmt.Errorf("reuse: %w", err)
	}
	m := *original
	m.Pages = slices.Clone(original.Pages)
	m.Tools = slices.Clone(original.Tools)
	m.Collection.DuplicateToolNames = slices.Clone(original.Collection.DuplicateToolNames)
	m.Collection.ListChangedBeforeDispatch = false
	orig := original.CaptureID
	if original.Cache.Original != nil {
		// A reuse of a reuse still names the capture that fetched the pages.
		orig = original.Cache.Original.CaptureID
	}
	m.Cache = Cache{Provenance: ProvenanceReused, Original: &Original{CaptureID: orig, ManifestDigest: digest, FreshnessPolicy: policy}}
	finish(&m)
	if _, err := m.Encode(); err != nil {
		return nil, fmt.Errorf("reuse: %w", err)
	}
	return &m, nil
}

// markListChangedBeforeDispatch returns a copy of m recording that a
// tools/list_changed notification arrived after collection and before a
// dispatch: the copy is incomplete with that reason and has its own digest.
func markListChangedBeforeDispatch(m *Manifest) *Manifest {
	c := *m
	c.Collection.ListChangedBeforeDispatch = true
	finish(&c)
	return &c
}

// LoadFunc returns the exact bytes committed to by a "sha256:<hex>" digest.
// It returns an error wrapping fs.ErrNotExist (or any error) when the bytes
// are not available.
type LoadFunc func(digest string) ([]byte, error)

// Problem kinds: unavailable evidence is never a mismatch, and a mismatch is
// never reported as merely unavailable.
const (
	ProblemUnavailable = "unavailable" // bytes the manifest commits to could not be loaded
	ProblemMismatch    = "mismatch"    // bytes loaded, but they or what they say differ from the manifest
)

// Problem is one discrepancy between a manifest and its page bytes.
type Problem struct {
	Kind    string // ProblemUnavailable | ProblemMismatch
	Pointer string // RFC 6901 pointer into the manifest, e.g. /pages/2/response or /tools/17/declaration
	Detail  string
}

func (p Problem) String() string { return p.Kind + " at " + p.Pointer + ": " + p.Detail }

// VerifyPages recomputes, from the retained page bytes, everything the
// manifest says about its pages and tools: each blob's SHA-256 and length,
// the request cursor, the page outcome, nextCursor, ttlMs, cacheScope,
// resultType, the tool count, and each tool's name and declaration digest.
// It returns no problems when they all agree. Pages whose bytes cannot be
// loaded are reported unavailable and their tools are left unchecked.
func VerifyPages(m *Manifest, load LoadFunc) []Problem {
	var out []Problem
	tool := 0
	for i := range m.Pages {
		p := &m.Pages[i]
		ptr := "/pages/" + strconv.Itoa(i)
		req, reqProb := loadBlob(load, p.Request, ptr+"/request")
		resp, respProb := loadBlob(load, p.Response, ptr+"/response")
		out = appendIf(out, reqProb)
		out = appendIf(out, respProb)
		first := tool
		tool += int(p.Tools)
		var reqID []byte
		if req != nil {
			r, err := parseRequest(req, CeilingMaxPageBytes)
			if err != nil {
				out = append(out, Problem{ProblemMismatch, ptr + "/request", "retained request is not a tools/list request: " + err.Error()})
				continue
			}
			if !sameJSON(r.cursor, p.Cursor) {
				out = append(out, Problem{ProblemMismatch, ptr + "/cursor", "request cursor differs from the manifest"})
			}
			reqID = r.id
		}
		if resp == nil {
			continue
		}
		if req == nil && p.Invalid == invalidIDMismatch {
			continue // without the request, the id comparison cannot be redone
		}
		f := analyzeResponse(resp, reqID, int64(i), CeilingMaxPageBytes)
		got := f.page
		got.Request, got.Response, got.Cursor = p.Request, p.Response, p.Cursor
		out = append(out, diffMembers(ptr, got, *p)...)
		if int64(len(f.tools)) != p.Tools || first+len(f.tools) > len(m.Tools) {
			continue // the tool count mismatch is already reported
		}
		for j, t := range f.tools {
			mt := m.Tools[first+j]
			tptr := "/tools/" + strconv.Itoa(first+j)
			out = append(out, diffMembers(tptr, t, mt)...)
		}
	}
	return out
}

func appendIf(out []Problem, p *Problem) []Problem {
	if p != nil {
		return append(out, *p)
	}
	return out
}

// loadBlob loads and checks one blob. It returns the bytes only when they
// match the commitment.
func loadBlob(load LoadFunc, b Blob, ptr string) ([]byte, *Problem) {
	data, err := load(b.Digest)
	if err != nil || data == nil {
		detail := "bytes of " + b.Digest + " not available"
		if err != nil {
			detail += ": " + err.Error()
		}
		return nil, &Problem{ProblemUnavailable, ptr, detail}
	}
	if got := canon.SHA256(data); got != b.Digest {
		return nil, &Problem{ProblemMismatch, ptr, "bytes loaded for " + b.Digest + " hash to " + got}
	}
	if int64(len(data)) != b.Length {
		return nil, &Problem{ProblemMismatch, ptr, fmt.Sprintf("length %d, manifest says %d", len(data), b.Length)}
	}
	return data, nil
}

// diffMembers compares two values member by member through their JSON form
// and reports each member that differs.
func diffMembers(ptr string, got, want any) []Problem {
	g, w := members(got), members(want)
	var out []Problem
	names := make([]string, 0, len(g)+len(w))
	for k := range g {
		names = append(names, k)
	}
	for k := range w {
		if _, ok := g[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		if !bytes.Equal(g[k], w[k]) {
			out = append(out, Problem{ProblemMismatch, ptr + "/" + k,
				fmt.Sprintf("page bytes give %s, manifest says %s", orAbsent(g[k]), orAbsent(w[k]))})
		}
	}
	return out
}

func members(v any) map[string]json.RawMessage {
	b, _ := json.Marshal(v)
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(b, &m)
	return m
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func orAbsent(b json.RawMessage) string {
	if b == nil {
		return "(absent)"
	}
	const max = 120
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
