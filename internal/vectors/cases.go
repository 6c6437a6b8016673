package vectors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// The server's catalog: three tools with everything a snapshot must keep
// (input and output schemas with non-integer values, annotations, _meta
// extensions, an unknown member). The bytes are as served.
const (
	toolWeather = `{"name":"get_weather","title":"Current weather","description":"Current conditions for a city.",` +
		`"inputSchema":{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["metric","imperial"],"default":"metric"}},"required":["city"]},` +
		`"outputSchema":{"type":"object","properties":{"temperature":{"type":"number","minimum":-89.2,"maximum":56.7},"conditions":{"type":"string"}},"required":["temperature","conditions"]},` +
		`"annotations":{"readOnlyHint":true,"openWorldHint":true}}`
	toolEmail = `{"name":"send_email","description":"Send an email on the user's behalf.",` +
		`"inputSchema":{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]},` +
		`"annotations":{"destructiveHint":false,"idempotentHint":false,"openWorldHint":true}}`
	toolSearch = `{"name":"search_docs","description":"Search the team's documents.",` +
		`"inputSchema":{"type":"object","properties":{"query":{"type":"string","maxLength":256},"limit":{"type":"integer","minimum":1,"maximum":50,"default":10}},"required":["query"]},` +
		`"_meta":{"com.example/ui":{"icon":"search","rank":0.75}},"x-example-cost":{"unit":"credits","perCall":0.5}}`
)

// standardPages is the catalog on two pages: get_weather and send_email,
// then search_docs.
func standardPages() []page {
	return []page{
		{tools: []string{toolWeather, toolEmail}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolSearch}},
	}
}

const weatherArgs = `{"city":"Lisbon","units":"metric"}`

// Code lists shared by the expectations.
var (
	// verifiedBase: what every verified bundle reports.
	verifiedBase = []verify.Code{verify.CodeSignatureValid, verify.CodeTrustedKeyMatch, verify.CodeRecordFresh, verify.CodeTranscriptBound}
	// signedOK: a faulted bundle that is still validly signed by the trusted
	// key over its transcript must fail for its own reason, never these.
	signedOK = []verify.Code{verify.CodeSignatureInvalid, verify.CodeSignatureMalformed, verify.CodeSignatureMissing,
		verify.CodeCnfKeyMismatch, verify.CodeRecordStale, verify.CodeRecordInFuture, verify.CodeSchemaInvalid}
	// bound: ... and its transcript is the signed one.
	bound = append(slices.Clone(signedOK), verify.CodeBindingFailure)
)

// codes merges code lists into a sorted, distinct list of strings.
func codes(lists ...[]verify.Code) []string {
	out := []string{}
	for _, l := range lists {
		for _, c := range l {
			out = append(out, string(c))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func cs(c ...verify.Code) []verify.Code { return c }

// vec is one generated vector: its manifest and files.
type vec struct {
	m     Manifest
	files map[string][]byte
}

// bundleVec makes a bundle vector from a bundle's files.
func (g *generator) bundleVec(id string, row int64, kase, checks, verdict string, required, forbidden []string, b *bundle) *vec {
	_, _, distinction, _ := Row(row)
	files := map[string][]byte{TrustedKeyFile: g.keyPEM}
	for k, v := range b.files {
		files[k] = v
	}
	return &vec{m: Manifest{
		Format: Format, ID: id, Kind: KindBundle, Row: row, RowName: distinction, Case: kase, Checks: checks,
		Bundle: &BundleOptions{At: ReferenceTime.Format("2006-01-02T15:04:05Z"), TrustedKey: TrustedKeyFile},
		Expect: Expect{Verdict: verdict, Required: required, Forbidden: forbidden},
	}, files: files}
}

// basic records the common session: discover, a complete snapshot of the
// standard catalog, one get_weather call with its response.
func (g *generator) basic(id string, edit func(*producer.Options)) (*session, *snapshot.Snapshot, error) {
	return g.basicArgs(id, edit, weatherArgs)
}

// basicArgs is basic with the call's arguments.
func (g *generator) basicArgs(id string, edit func(*producer.Options), args string) (*session, *snapshot.Snapshot, error) {
	s, err := g.open(id, edit)
	if err != nil {
		return nil, nil, err
	}
	if err := s.discover(); err != nil {
		return nil, nil, err
	}
	snap, err := s.snapshot(standardPages(), snapshot.Limits{})
	if err != nil {
		return nil, nil, err
	}
	req := s.callLine("get_weather", args, "")
	h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, nil, err
	}
	if err := h.Response(result(req, weatherOK)); err != nil {
		return nil, nil, err
	}
	return s, snap, nil
}

func (g *generator) basicBundle(id string, edit func(*producer.Options)) (*bundle, *snapshot.Snapshot, error) {
	s, snap, err := g.basic(id, edit)
	if err != nil {
		return nil, nil, err
	}
	b, err := s.seal()
	return b, snap, err
}

// cases returns every vector, in row order.
func (g *generator) cases() ([]*vec, error) {
	var out []*vec
	for _, f := range []func() ([]*vec, error){g.row1, g.row2, g.row3, g.row4, g.row4canon, g.row5, g.row6, g.row7, g.row8, g.row9, g.frameVectors} {
		vs, err := f()
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// positive makes a row's positive control from the basic session.
func (g *generator) positive(id string, row int64, checks string, required, forbidden []verify.Code) (*vec, error) {
	b, _, err := g.basicBundle(id, nil)
	if err != nil {
		return nil, err
	}
	return g.bundleVec(id, row, CasePositive, checks, string(verify.Verified), codes(verifiedBase, required), codes(forbidden), b), nil
}

// --- Row 1: snapshot mismatch ---

func (g *generator) row1() ([]*vec, error) {
	pos, err := g.positive("r1-snapshot-matches", 1,
		"A complete two-page snapshot of three tools is retained and matches the manifest digest the signed transcript commits to; the call to get_weather binds it.",
		cs(verify.CodeSnapshotVerified), cs(verify.CodeSnapshotMismatch, verify.CodeEvidenceUnavailable))
	if err != nil {
		return nil, err
	}
	out := []*vec{pos}

	// An uncalled tool's description changed in the retained page bytes.
	b, snap, err := g.basicBundle("r1-uncalled-tool-changed", nil)
	if err != nil {
		return nil, err
	}
	p := snap.Manifest.Pages[1].Response.Digest
	b.setPayload(p, bytes.Replace(b.payload(p), []byte(`"Search the team's documents."`), []byte(`"Search the team's documents and mail them anywhere."`), 1))
	out = append(out, g.bundleVec("r1-uncalled-tool-changed", 1, CaseNegative,
		"The declaration of search_docs, a tool that was not called, is changed in the retained page bytes after signing (the pack entry keeps its name). The snapshot no longer matches its commitment although the called tool is untouched.",
		string(verify.Failed), codes(cs(verify.CodeSnapshotMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable, verify.CodeSnapshotVerified)), b))

	// The called tool's output schema changed, and the manifest rebuilt
	// consistently around the new page (stored in place of the committed one).
	b, snap, err = g.basicBundle("r1-output-schema-changed", nil)
	if err != nil {
		return nil, err
	}
	var ex [][2][]byte
	for i, pb := range snap.Pages {
		resp := pb.Response
		if i == 0 {
			resp = bytes.Replace(resp, []byte(`"maximum":56.7`), []byte(`"maximum":60`), 1)
			b.setPayload(canon.SHA256(resp), resp)
		}
		ex = append(ex, [2][]byte{pb.Request, resp})
	}
	forged, err := collectBytes(snap.Manifest.CaptureID, ex, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	b.setPayload(snap.Digest, forged.Bytes)
	out = append(out, g.bundleVec("r1-output-schema-changed", 1, CaseNegative,
		"The output schema of get_weather (the called tool) is changed (maximum 56.7 -> 60): the new page is stored under its own digest and a manifest consistent with it replaces the committed manifest's bytes. The manifest no longer hashes to the digest the signed transcript commits to.",
		string(verify.Failed), codes(cs(verify.CodeSnapshotMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable, verify.CodeSnapshotVerified)), b))

	// An extension (an unknown member) projected away from the page.
	b, snap, err = g.basicBundle("r1-extension-removed", nil)
	if err != nil {
		return nil, err
	}
	p = snap.Manifest.Pages[1].Response.Digest
	b.setPayload(p, bytes.Replace(b.payload(p), []byte(`,"x-example-cost":{"unit":"credits","perCall":0.5}`), nil, 1))
	out = append(out, g.bundleVec("r1-extension-removed", 1, CaseNegative,
		"The unknown extension member x-example-cost of search_docs is removed from the retained page, as a catalog projection that keeps only known fields would do. Every member is part of the declaration, so the snapshot no longer matches.",
		string(verify.Failed), codes(cs(verify.CodeSnapshotMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable, verify.CodeSnapshotVerified)), b))
	return out, nil
}

// --- Row 2: incomplete evidence ---

// pagedBundle records a session whose snapshot is collected from pages
// under lim, then one get_weather call with its response.
func (g *generator) pagedBundle(id string, pages []page, lim snapshot.Limits) (*bundle, *snapshot.Snapshot, error) {
	s, err := g.open(id, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := s.discover(); err != nil {
		return nil, nil, err
	}
	snap, err := s.snapshot(pages, lim)
	if err != nil {
		return nil, nil, err
	}
	req := s.callLine("get_weather", weatherArgs, "")
	h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, nil, err
	}
	if err := h.Response(result(req, weatherOK)); err != nil {
		return nil, nil, err
	}
	b, err := s.seal()
	return b, snap, err
}

func (g *generator) row2() ([]*vec, error) {
	var out []*vec
	b, _, err := g.pagedBundle("r2-all-pages-retained", []page{
		{tools: []string{toolWeather}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolEmail}, next: str("")},
		{cursor: str(""), tools: []string{toolSearch}},
	}, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r2-all-pages-retained", 2, CasePositive,
		"Three pages are retained through the terminal page (one without nextCursor). The second page's nextCursor is the empty string, which is a real cursor, not the end.",
		string(verify.Verified), codes(verifiedBase, cs(verify.CodeSnapshotVerified)), codes(cs(verify.CodeSnapshotIncomplete, verify.CodeEvidenceUnavailable, verify.CodeSnapshotMismatch)), b))

	b, snap, err := g.basicBundle("r2-page-bytes-missing", nil)
	if err != nil {
		return nil, err
	}
	b.dropPayload(snap.Manifest.Pages[1].Response.Digest)
	out = append(out, g.bundleVec("r2-page-bytes-missing", 2, CaseNegative,
		"The retained bytes of the second (last) tools/list page are missing from the bundle. The page is unavailable evidence: not a pass, and not a mismatch.",
		string(verify.Incomplete), codes(cs(verify.CodeEvidenceUnavailable)), codes(bound, cs(verify.CodeSnapshotMismatch, verify.CodeEvidenceMismatch, verify.CodeSnapshotVerified)), b))

	b, _, err = g.pagedBundle("r2-terminal-not-reached", []page{
		{tools: []string{toolWeather}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolEmail}, next: str("page-3")},
	}, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r2-terminal-not-reached", 2, CaseNegative,
		"The client stopped paging after the second page, which still offered a nextCursor: a page is missing from the collection. The snapshot is recorded as incomplete (terminal_not_reached) and the attempt that used it has incomplete evidence.",
		string(verify.Incomplete), codes(cs(verify.CodeSnapshotIncomplete)), codes(bound, cs(verify.CodeSnapshotMismatch)), b))

	b, _, err = g.pagedBundle("r2-repeated-cursor", []page{
		{tools: []string{toolWeather}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolEmail}, next: str("page-2")},
	}, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r2-repeated-cursor", 2, CaseNegative,
		"The second page's nextCursor repeats the cursor that requested it: a pagination cycle. Collection stops (repeated_cursor) and the snapshot is incomplete.",
		string(verify.Incomplete), codes(cs(verify.CodeSnapshotIncomplete)), codes(bound, cs(verify.CodeSnapshotMismatch)), b))

	b, _, err = g.pagedBundle("r2-page-limit-reached", []page{
		{tools: []string{toolWeather}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolEmail}, next: str("page-3")},
		{cursor: str("page-3"), tools: []string{toolSearch}},
	}, snapshot.Limits{MaxPages: 2})
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r2-page-limit-reached", 2, CaseBoundary,
		"The collector's page limit is 2 and the second page offers a third: collection stops at the resource limit (page_limit) and the snapshot is incomplete, never complete.",
		string(verify.Incomplete), codes(cs(verify.CodeSnapshotIncomplete)), codes(bound, cs(verify.CodeSnapshotMismatch)), b))

	// An incomplete collection re-labelled complete, inside a validly
	// signed transcript.
	b, snap, err = g.pagedBundle("r2-incomplete-labelled-complete", []page{
		{tools: []string{toolWeather}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolEmail}, next: str("page-2")},
	}, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	forged, err := editJSON(snap.Bytes, func(m map[string]any) {
		m["complete"] = true
		m["incomplete_reasons"] = []any{}
	})
	if err != nil {
		return nil, err
	}
	d := canon.SHA256(forged)
	b.dropPayload(snap.Digest)
	b.setPayload(d, forged)
	if err := b.editWhere(is("snapshot"), func(e event) {
		e["manifest_digest"], e["complete"] = d, true
		delete(e, "incomplete_reason")
	}); err != nil {
		return nil, err
	}
	if err := b.editWhere(is("attempt"), func(e event) {
		ref := e["snapshot"].(map[string]any)
		ref["manifest_digest"], ref["complete"] = d, true
	}); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r2-incomplete-labelled-complete", 2, CaseNegative,
		"A collection stopped by a repeated cursor is labelled complete: the manifest says complete with no reasons, and the signed transcript's snapshot line and binding agree with it. The manifest's own collection facts contradict the label, so it is not a valid snapshot.",
		string(verify.Failed), codes(cs(verify.CodeSnapshotMismatch)), codes(bound, cs(verify.CodeSnapshotVerified)), b))
	return out, nil
}

// editJSON decodes a JSON object (numbers exact), edits it and returns its
// canonical bytes.
func editJSON(data []byte, f func(map[string]any)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	f(m)
	return canon.Marshal(m)
}

// --- Row 3: wrong snapshot ---

// reuseBundle records a session that reuses a cached capture under a
// freshness policy; edit may change the reuse manifest before it is
// recorded (then it is recorded as given, digest and all).
func (g *generator) reuseBundle(id string, edit func(map[string]any)) (*bundle, error) {
	s, err := g.open(id, nil)
	if err != nil {
		return nil, err
	}
	if err := s.discover(); err != nil {
		return nil, err
	}
	orig, err := s.collect(standardPages(), snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	maxAge, age := int64(300000), int64(120000)
	m, err := snapshot.Reuse(orig.Manifest, snapshot.FreshnessPolicy{Name: "ttl_ms_as_served", MaxAgeMs: &maxAge, AgeMs: &age})
	if err != nil {
		return nil, err
	}
	mb, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if edit != nil {
		if mb, err = editJSON(mb, edit); err != nil {
			return nil, err
		}
	}
	reuse := &snapshot.Snapshot{Manifest: m, Bytes: mb, Digest: canon.SHA256(mb), Pages: orig.Pages}
	if _, err := s.record(reuse); err != nil {
		return nil, err
	}
	req := s.callLine("get_weather", weatherArgs, "")
	h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, err
	}
	if err := h.Response(result(req, weatherOK)); err != nil {
		return nil, err
	}
	b, err := s.seal()
	if err != nil {
		return nil, err
	}
	// The original capture's manifest is retained beside the reuse.
	b.setPayload(orig.Digest, orig.Bytes)
	return b, nil
}

func (g *generator) row3() ([]*vec, error) {
	var out []*vec
	b, err := g.reuseBundle("r3-cached-capture-retained", nil)
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r3-cached-capture-retained", 3, CasePositive,
		"The attempt binds a cached snapshot reused under the freshness policy ttl_ms_as_served (max_age_ms 300000, age_ms 120000). The reuse manifest names the original capture id and manifest digest; the original manifest and its pages are retained.",
		string(verify.Verified), codes(verifiedBase, cs(verify.CodeSnapshotVerified)), codes(cs(verify.CodeSnapshotWrong, verify.CodeSnapshotMismatch)), b))

	// The snapshot the call used is replaced by a fetch made after the call.
	s, _, err := g.basic("r3-post-call-fetch", nil)
	if err != nil {
		return nil, err
	}
	if _, err := s.snapshot([]page{
		{tools: []string{toolWeather}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolSearch}},
	}, snapshot.Limits{}); err != nil {
		return nil, err
	}
	b, err = s.seal()
	if err != nil {
		return nil, err
	}
	i := b.find(is("snapshot", "snapshot_id", "s2"))
	lines := b.lines()
	later, err := decodeEvent(lines[i])
	if err != nil {
		return nil, err
	}
	if err := b.editWhere(is("attempt"), func(e event) {
		e["snapshot"] = map[string]any{"snapshot_id": "s2", "manifest_digest": later["manifest_digest"], "complete": true}
	}); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r3-post-call-fetch", 3, CaseNegative,
		"After the call, a new tools/list fetch (in which send_email is gone) is recorded as s2, and the attempt's binding is rewritten to name s2 instead of s1, the snapshot it was selected from. The record is re-signed over the rewritten transcript, so the binding is signed; it names a snapshot captured after the dispatch.",
		string(verify.Failed), codes(cs(verify.CodeSnapshotWrong)), codes(bound, cs(verify.CodeSnapshotMismatch)), b))

	b, err = g.reuseBundle("r3-reuse-without-policy", func(m map[string]any) {
		delete(m["cache"].(map[string]any)["original"].(map[string]any), "freshness_policy")
	})
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r3-reuse-without-policy", 3, CaseNegative,
		"The attempt binds a reused snapshot whose manifest names the original capture but not the freshness policy it was reused under. A reuse that does not identify its original capture and policy is the wrong snapshot.",
		string(verify.Failed), codes(cs(verify.CodeSnapshotWrong)), codes(bound, cs(verify.CodeSnapshotVerified)), b))

	// The call is to a tool the complete snapshot it is bound to does not
	// declare, and the server answers it: a warning on sound evidence.
	b, err = g.pagedBundleB("r3-tool-not-declared", []page{
		{tools: []string{toolEmail}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolSearch}},
	})
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r3-tool-not-declared", 3, CaseBoundary,
		"The attempt calls get_weather and is bound to a complete snapshot (two pages, terminal page reached, no list_changed) that declares only send_email and search_docs, and the server answers with a result. The evidence is sound and says so: a call outside the declared catalog, answered, is behaviour worth a warning (tool_not_declared), not a false bundle.",
		string(verify.Verified), codes(cs(verify.CodeToolNotDeclared, verify.CodeSnapshotVerified)), codes(bound), b))
	return out, nil
}

// --- Row 4: canonical values (bundles) ---

// extraToolBundle records the basic session with a fourth tool on page 2.
func (g *generator) extraToolBundle(id, tool string) (*bundle, error) {
	return g.pagedBundleB(id, []page{
		{tools: []string{toolWeather, toolEmail}, next: str("page-2")},
		{cursor: str("page-2"), tools: []string{toolSearch, tool}},
	})
}

func (g *generator) pagedBundleB(id string, pages []page) (*bundle, error) {
	b, _, err := g.pagedBundle(id, pages, snapshot.Limits{})
	return b, err
}

func (g *generator) row4() ([]*vec, error) {
	var out []*vec
	b, err := g.extraToolBundle("r4-declaration-values-roundtrip",
		`{"name":"convert_units","description":"Unit conversion \u00e9\u00e8 \ud83c\udf21","inputSchema":{"type":"object","properties":{"value":{"type":"number","multipleOf":0.05,"minimum":-1e3,"maximum":1.5e3},"ratio":{"type":"number","exclusiveMinimum":0,"default":0.1},"precision":{"type":"integer","default":2.0}}},"annotations":{"readOnlyHint":true}}`)
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r4-declaration-values-roundtrip", 4, CasePositive,
		"A tool declaration holds non-integer schema values (0.05, 0.1, 1.5e3), an integer written 2.0, exponent forms and escaped non-ASCII text. Under the declaration policy tracectl/jcs-mcp-decl-exact-binary64 each has an exact canonical form, so every declaration digest is re-derived from the page bytes; the transcript and record stay under the v0.2 integer boundary.",
		string(verify.Verified), codes(verifiedBase, cs(verify.CodeSnapshotVerified)), codes(cs(verify.CodeValueUnsupported, verify.CodeSnapshotMismatch)), b))

	b, err = g.extraToolBundle("r4-declaration-unsupported-number",
		`{"name":"convert_units","inputSchema":{"type":"object","properties":{"ratio":{"type":"number","maximum":0.10000000000000000555}}}}`)
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r4-declaration-unsupported-number", 4, CaseNegative,
		"An uncalled tool's schema holds 0.10000000000000000555, which binary64 would round to 0.1. The manifest marks that declaration unsupported (unsupported_number) instead of coercing it; its page bytes are still committed. The verifier reports the value as unsupported, not as a pass and not as a mismatch.",
		string(verify.Incomplete), codes(cs(verify.CodeValueUnsupported)), codes(bound, cs(verify.CodeSnapshotMismatch)), b))

	b, err = g.extraToolBundle("r4-declaration-duplicate-key",
		`{"name":"convert_units","inputSchema":{"type":"object","properties":{"value":{"type":"number"},"value":{"type":"string"}}}}`)
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r4-declaration-duplicate-key", 4, CaseNegative,
		"An uncalled tool's input schema names the property value twice (number, then string). The declaration is ambiguous: the manifest marks it unsupported (duplicate_key) rather than keep one of the two; the verifier reports it unsupported.",
		string(verify.Incomplete), codes(cs(verify.CodeValueUnsupported)), codes(bound, cs(verify.CodeSnapshotMismatch)), b))

	// A committed transcript line with a member name twice.
	b, _, err = g.basicBundle("r4-line-duplicate-key", nil)
	if err != nil {
		return nil, err
	}
	lines := b.lines()
	i := b.find(is("observation", "kind", transcript.ObsResponse))
	lines[i] = bytes.Replace(lines[i], []byte(`"kind":"response"`), []byte(`"kind":"response","kind":"timeout"`), 1)
	b.setLines(lines)
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r4-line-duplicate-key", 4, CaseNegative,
		`The response observation line says "kind" twice ("response", then "timeout") and the record is signed over it. An ambiguous object in committed evidence is rejected; no reading of it is chosen.`,
		string(verify.Failed), codes(cs(verify.CodeDuplicateKey)), codes(bound), b))

	// A committed transcript line with an integer beyond 2^53-1.
	b, _, err = g.basicBundle("r4-line-unsupported-number", nil)
	if err != nil {
		return nil, err
	}
	lines = b.lines()
	i = b.find(is("observation", "kind", transcript.ObsResponse))
	e, err := decodeEvent(lines[i])
	if err != nil {
		return nil, err
	}
	old := []byte(`"at_ms":` + e["at_ms"].(json.Number).String())
	lines[i] = bytes.Replace(lines[i], old, []byte(`"at_ms":9007199254740993`), 1)
	b.setLines(lines)
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r4-line-unsupported-number", 4, CaseBoundary,
		"The response observation's at_ms is 9007199254740993, one above the v0.2 boundary 2^53+1, which some JCS libraries silently round to 9007199254740992. The line's policy cannot hold it: the value is reported unsupported, never coerced.",
		string(verify.Failed), codes(cs(verify.CodeValueUnsupported)), codes(bound), b))
	return out, nil
}

// --- Row 4: canonical values (single values) ---

func (g *generator) canonVec(id, kase, checks, policy, input, verdict, code string) (*vec, error) {
	p, err := canon.ParsePolicy(policy)
	if err != nil {
		return nil, err
	}
	_, _, distinction, _ := Row(4)
	v := &vec{m: Manifest{
		Format: Format, ID: id, Kind: KindCanon, Row: 4, RowName: distinction, Case: kase, Checks: checks,
		Canon:  &CanonOptions{Input: "input.json", Policy: p.ID()},
		Expect: Expect{Verdict: verdict, Required: []string{}, Forbidden: []string{}},
	}, files: map[string][]byte{"input.json": []byte(input)}}
	out, cerr := canon.Canonicalize([]byte(input), p)
	switch verdict {
	case OutcomeCanonical:
		if cerr != nil {
			return nil, fmt.Errorf("%s: %w", id, cerr)
		}
		v.files["canonical.json"] = out
		v.m.Expect.Canonical = "canonical.json"
		v.m.Expect.Forbidden = []string{string(canon.CodeDuplicateKey), string(canon.CodeUnsupportedNumber)}
	default:
		if cerr == nil {
			return nil, fmt.Errorf("%s: canonicalized, want %s", id, code)
		}
		v.m.Expect.Required = []string{code}
	}
	return v, nil
}

func (g *generator) row4canon() ([]*vec, error) {
	type c struct{ id, kase, checks, policy, input, verdict, code string }
	var out []*vec
	for _, x := range []c{
		{"r4-canon-roundtrip-v02", CasePositive,
			"Integers decided by value (1.0, 1e3, -0, 10E-1, 2^53-1), minimal string escapes, and member order by UTF-16 code units (U+1F600 sorts before U+FB00, unlike code point order) under the TRACE v0.2 policy.",
			canon.PolicyV02ID, `{"z":[1.0,1e3,-0,10E-1,9007199254740991],"\ufb00":"ligature","\ud83d\ude00":"smile","a":"tab\there \u00e9\/\u001f"}`, OutcomeCanonical, ""},
		{"r4-canon-roundtrip-mcp-decl", CasePositive,
			"Non-integer schema values whose exact decimal value survives the binary64 round trip (0.5, 0.1, 4.50, 2e-3, 1424953923781206.2, 5e-324) under the declaration policy, written as ECMAScript writes them.",
			canon.PolicyMCPDeclID, `{"minimum":0.5,"default":0.1,"maximum":4.50,"multipleOf":2e-3,"big":1424953923781206.2,"tiny":5e-324}`, OutcomeCanonical, ""},
		{"r4-canon-duplicate-key", CaseNegative,
			`The member name "a" appears twice, once escaped as \u0061: names are compared after unescaping, and a repeated name is rejected, never resolved to one of its values.`,
			canon.PolicyV02ID, `{"a":1,"\u0061":2}`, OutcomeRejected, string(canon.CodeDuplicateKey)},
		{"r4-canon-duplicate-key-nested", CaseNegative,
			"A tool declaration whose input schema says type twice (object, then array), deep inside a tools/list result: rejected at any depth.",
			canon.PolicyMCPDeclID, `{"tools":[{"name":"t","inputSchema":{"type":"object","type":"array"}}]}`, OutcomeRejected, string(canon.CodeDuplicateKey)},
		{"r4-canon-integer-beyond-2-53", CaseBoundary,
			"9007199254740993 (2^53+1) is an integer outside the v0.2 boundary. Libraries that parse through binary64 turn it into 9007199254740992; the contract reports it unsupported instead.",
			canon.PolicyV02ID, `{"n":9007199254740993}`, OutcomeUnsupported, string(canon.CodeUnsupportedNumber)},
		{"r4-canon-nonint-under-v02", CaseBoundary,
			"0.5 is a non-integer: the TRACE v0.2 policy (records, transcript lines) cannot represent it and reports it unsupported; only the declaration policy admits it.",
			canon.PolicyV02ID, `{"minimum":0.5}`, OutcomeUnsupported, string(canon.CodeUnsupportedNumber)},
		{"r4-canon-inexact-decimal", CaseNegative,
			"0.10000000000000000555 has more precision than binary64 keeps (it would become 0.1): unsupported under the declaration policy, not rounded.",
			canon.PolicyMCPDeclID, `{"maximum":0.10000000000000000555}`, OutcomeUnsupported, string(canon.CodeUnsupportedNumber)},
	} {
		v, err := g.canonVec(x.id, x.kase, x.checks, x.policy, x.input, x.verdict, x.code)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// --- Row 5: binding failure ---

func (g *generator) row5() ([]*vec, error) {
	pos, err := g.positive("r5-record-binds-transcript", 5,
		"The trusted record's tool_transcript.hash equals the RFC 6962 root recomputed over every transcript line, and each attempt's snapshot digest is recorded by a snapshot line inside that transcript.",
		cs(verify.CodeSnapshotVerified, verify.CodePayloadsVerified), cs(verify.CodeBindingFailure))
	if err != nil {
		return nil, err
	}
	out := []*vec{pos}

	// Signed checkpoints (spec/checkpoints.md): the producer signed a
	// checkpoint over the transcript so far, recorded one more call, and
	// died before sealing: no record.json.
	checkpointed := func(id string) (*bundle, error) {
		s, _, err := g.basic(id, nil)
		if err != nil {
			return nil, err
		}
		if err := s.rec.StartCheckpoints(recordSigner{g}, producer.CheckpointPolicy{EveryAttempts: 1 << 40}); err != nil {
			return nil, err
		}
		if _, err := s.rec.Checkpoint(g.fixedCtx); err != nil {
			return nil, err
		}
		req := s.callLine("get_weather", weatherArgs, "")
		if _, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req}); err != nil {
			return nil, err
		}
		if err := s.rec.Close(); err != nil {
			return nil, err
		}
		return &bundle{g: g, files: s.fs.tree(bundleDir)}, nil
	}
	b, err := checkpointed("r5-checkpoint-signs-prefix")
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r5-checkpoint-signs-prefix", 5, CaseBoundary,
		"The producer signed a checkpoint (a Trust Record over the transcript's first lines, checkpoints/<lines>.json), recorded one more call and died before sealing: there is no record.json. What the checkpoint covers is signed and verified; the call after it is unsigned evidence (tail_unsigned), so the verdict is incomplete, never verified and never failed.",
		string(verify.Incomplete), codes(cs(verify.CodeCheckpointBound, verify.CodeTailUnsigned)), codes(cs(verify.CodeCheckpointInvalid, verify.CodeBindingFailure, verify.CodeSignatureInvalid)), b))
	if b, err = checkpointed("r5-checkpoint-renamed"); err != nil {
		return nil, err
	}
	for name, data := range b.files {
		if strings.HasPrefix(name, "checkpoints/") && strings.HasSuffix(name, ".json") {
			delete(b.files, name)
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "checkpoints/"), ".json"))
			b.files["checkpoints/"+strconv.Itoa(n+1)+".json"] = data
			break
		}
	}
	out = append(out, g.bundleVec("r5-checkpoint-renamed", 5, CaseNegative,
		"The checkpoint file is renamed to claim one line more than it signs (checkpoints/<lines+1>.json): its root commits to its own tree size, so it does not bind the prefix its name claims. checkpoint_invalid, a failure.",
		string(verify.Failed), codes(cs(verify.CodeCheckpointInvalid)), codes(cs(verify.CodeSignatureInvalid)), b))

	// The snapshot line leaves the signed transcript; the manifest stays in
	// the pack and an unsigned side file names it.
	b, snap, err := g.basicBundle("r5-snapshot-digest-outside", nil)
	if err != nil {
		return nil, err
	}
	if err := b.remove(b.find(is("snapshot"))); err != nil {
		return nil, err
	}
	b.files["snapshot-ref.json"] = []byte(`{"snapshot_id":"s1","manifest_digest":"` + snap.Digest + `"}` + "\n")
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r5-snapshot-digest-outside", 5, CaseNegative,
		"The snapshot line is moved out of the transcript into an unsigned side file (snapshot-ref.json), and the record is re-signed over the remaining lines. The attempt still names s1, and the manifest is still in the payload pack, but nothing signed commits to it.",
		string(verify.Failed), codes(cs(verify.CodeBindingFailure)), codes(signedOK), b))

	b, _, err = g.basicBundle("r5-record-commits-to-nothing", nil)
	if err != nil {
		return nil, err
	}
	if err := b.resign(0, func(r *sign.Record) { r.ToolTranscript = nil }); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r5-record-commits-to-nothing", 5, CaseNegative,
		"The record is validly signed but has no tool_transcript: the transcript's digest is outside the signed boundary, so nothing in the bundle is bound.",
		string(verify.Failed), codes(cs(verify.CodeBindingFailure)), codes(signedOK), b))

	b, _, err = g.basicBundle("r5-transcript-edited-after-signing", nil)
	if err != nil {
		return nil, err
	}
	if err := b.editWhere(is("attempt"), func(e event) { e["tool"] = "search_docs" }); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r5-transcript-edited-after-signing", 5, CaseNegative,
		"After signing, the attempt line's tool is changed from get_weather to search_docs (the line stays valid). The record's signature still verifies, but the recomputed root is not tool_transcript.hash.",
		string(verify.Failed), codes(cs(verify.CodeBindingFailure, verify.CodeSignatureValid)), codes(signedOK, cs(verify.CodeTranscriptBound)), b))
	return out, nil
}

// --- Row 6: mismatch vs unavailable ---

func (g *generator) row6() ([]*vec, error) {
	pos, err := g.positive("r6-bytes-match", 6,
		"Every payload the transcript commits to (the discover response, the request and response lines, the pages and the manifest) is retained in the payload pack and matches its digest and length.",
		cs(verify.CodePayloadsVerified, verify.CodeSnapshotVerified), cs(verify.CodeEvidenceMismatch, verify.CodeEvidenceUnavailable))
	if err != nil {
		return nil, err
	}
	out := []*vec{pos}

	responseDigest := func(b *bundle) (string, error) {
		i := b.find(is("observation", "kind", transcript.ObsResponse))
		e, err := decodeEvent(b.lines()[i])
		if err != nil {
			return "", err
		}
		return e["response"].(map[string]any)["digest"].(string), nil
	}
	b, _, err := g.basicBundle("r6-bytes-changed", nil)
	if err != nil {
		return nil, err
	}
	p, err := responseDigest(b)
	if err != nil {
		return nil, err
	}
	b.setPayload(p, bytes.ReplaceAll(b.payload(p), []byte("21.5"), []byte("12.5")))
	out = append(out, g.bundleVec("r6-bytes-changed", 6, CaseNegative,
		"The retained response bytes are changed (21.5 -> 12.5, same length) under the same name: the bytes are available and differ from the commitment.",
		string(verify.Failed), codes(cs(verify.CodeEvidenceMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable)), b))

	b, _, err = g.basicBundle("r6-bytes-missing", nil)
	if err != nil {
		return nil, err
	}
	if p, err = responseDigest(b); err != nil {
		return nil, err
	}
	b.dropPayload(p)
	out = append(out, g.bundleVec("r6-bytes-missing", 6, CaseNegative,
		"The retained response bytes are missing: unavailable evidence, reported separately from a mismatch, and never a pass.",
		string(verify.Incomplete), codes(cs(verify.CodeEvidenceUnavailable)), codes(bound, cs(verify.CodeEvidenceMismatch, verify.CodePayloadsVerified)), b))

	// The pack itself damaged after sealing: a sealed bundle's pack is
	// whole entries, so a tear or a broken frame is a named failure, and the
	// payloads past it are unavailable, never passed.
	b, _, err = g.basicBundle("r6-pack-truncated", nil)
	if err != nil {
		return nil, err
	}
	pack := b.files[transcript.PackFile]
	b.files[transcript.PackFile] = pack[:len(pack)-7]
	out = append(out, g.bundleVec("r6-pack-truncated", 6, CaseNegative,
		"The payload pack is truncated after sealing: its last entry ends 7 bytes early. A sealed bundle's pack is whole entries, so the tear is pack_malformed, and the payload it held is unavailable, never a pass.",
		string(verify.Failed), codes(cs(verify.CodePackMalformed, verify.CodeEvidenceUnavailable)), codes(bound, cs(verify.CodePayloadsVerified)), b))

	b, _, err = g.basicBundle("r6-pack-frame-damaged", nil)
	if err != nil {
		return nil, err
	}
	es, err := b.entries()
	if err != nil {
		return nil, err
	}
	b.setEntries(es)
	pack = b.files[transcript.PackFile]
	first := int64(len(transcript.AppendPackHeader(nil, es[0].digest, int64(len(es[0].data)), es[0].salt))) + int64(len(es[0].data))
	pack[first] = ' ' // the first entry's closing LF
	out = append(out, g.bundleVec("r6-pack-frame-damaged", 6, CaseNegative,
		"The LF that closes the payload pack's first entry is replaced by a space: the pack is not whole entries from there on. That is pack_malformed, and every payload after the damage is unavailable: a reader never guesses where the next entry starts.",
		string(verify.Failed), codes(cs(verify.CodePackMalformed, verify.CodeEvidenceUnavailable)), codes(bound, cs(verify.CodePayloadsVerified)), b))

	// The salt beside the response's bytes replaced (bytes intact): the
	// salted commitment no longer opens, which is a mismatch, never a pass.
	b, _, err = g.basicBundle("r6-payload-salt-changed", nil)
	if err != nil {
		return nil, err
	}
	if p, err = responseDigest(b); err != nil {
		return nil, err
	}
	es, err = b.entries()
	if err != nil {
		return nil, err
	}
	for i := range es {
		if es[i].digest == p {
			if es[i].salt == nil {
				return nil, fmt.Errorf("r6-payload-salt-changed: the response entry is not salted")
			}
			es[i].salt = bytes.Repeat([]byte{0x5a}, transcript.SaltBytes)
		}
	}
	b.setEntries(es)
	out = append(out, g.bundleVec("r6-payload-salt-changed", 6, CaseNegative,
		"The salt kept beside the response's bytes in the payload pack is replaced, the bytes untouched. The response's salted commitment (transcript v3) no longer opens with the bytes and the salt the bundle holds: evidence_mismatch, never a pass, and never merely unavailable.",
		string(verify.Failed), codes(cs(verify.CodeEvidenceMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable)), b))

	// Redaction (v3): a call carrying a credential in its arguments is
	// retained as its redacted copy, with the list of what it hides.
	redacted := func(id string) (*bundle, error) {
		s, _, err := g.basicArgs(id, nil, `{"city":"Lisbon","units":"metric","api_key":"sk-proj-`+strings.Repeat("Ab3De6Gh9J", 5)+`"}`)
		if err != nil {
			return nil, err
		}
		return s.seal()
	}
	if b, err = redacted("r6-payload-redacted"); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r6-payload-redacted", 6, CaseBoundary,
		"The call's arguments carry an API key. The request is retained as its redacted copy (the key's value replaced by \"[REDACTED:openai_api_key]\"), the attempt line lists the redaction and commits to the exact bytes (original) under a salt the bundle does not hold. The copy opens its commitment and hides exactly what the list names: verified, with payload_redacted (information).",
		string(verify.Verified), codes(cs(verify.CodePayloadRedacted, verify.CodePayloadsVerified)), codes(bound, cs(verify.CodeEvidenceMismatch, verify.CodeEvidenceUnavailable)), b))
	if b, err = redacted("r6-redaction-list-forged"); err != nil {
		return nil, err
	}
	if err := b.editWhere(is("attempt"), func(e event) {
		reds := e["request"].(map[string]any)["redactions"].([]any)
		reds[0].(map[string]any)["pointer"] = "/params/arguments/city"
	}); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r6-redaction-list-forged", 6, CaseNegative,
		"The attempt line's redaction list is made to name /params/arguments/city instead of the redacted api_key, and the record re-signed: the retained copy holds no marker there, so the list does not describe the copy. evidence_mismatch, never a pass.",
		string(verify.Failed), codes(cs(verify.CodeEvidenceMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable)), b))

	// A disclosed attempt (tracectl disclose): the record, the inclusion
	// proof of the attempt's lines, and only their payloads with salts.
	disclosed := func(id string) (*bundle, error) {
		b, _, err := g.basicBundle(id, nil)
		if err != nil {
			return nil, err
		}
		fsys := fstest.MapFS{}
		for name, data := range b.files {
			fsys[name] = &fstest.MapFile{Data: data, Mode: 0o600}
		}
		d, err := verify.Disclose(fsys, "a1")
		if err != nil {
			return nil, err
		}
		return &bundle{g: g, files: d.Files}, nil
	}
	if b, err = disclosed("r6-disclosed-attempt"); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r6-disclosed-attempt", 6, CaseBoundary,
		"A disclosed bundle of the call (tracectl disclose): the signed record, the inclusion proof of the attempt's lines, and only the payloads they commit to, with their salts, and the bound snapshot's manifest and pages. It verifies for what it discloses; the rest of the transcript is hashes in the proof (proof_scope_limited).",
		string(verify.Verified), codes(cs(verify.CodePayloadsVerified, verify.CodeSnapshotVerified, verify.CodeInclusionProofOK, verify.CodeProofScopeLimited)), codes(cs(verify.CodeEvidenceMismatch, verify.CodeEvidenceUnavailable, verify.CodeInclusionProofFailed)), b))
	if b, err = disclosed("r6-disclosed-byte-changed"); err != nil {
		return nil, err
	}
	if p, err = responseDigestIn(b); err != nil {
		return nil, err
	}
	b.setPayload(p, bytes.ReplaceAll(b.payload(p), []byte("21.5"), []byte("12.5")))
	out = append(out, g.bundleVec("r6-disclosed-byte-changed", 6, CaseNegative,
		"The disclosed response's bytes are changed (21.5 -> 12.5) in the disclosed bundle's pack, its salt kept: the salted commitment the disclosed, signed line makes no longer opens. evidence_mismatch.",
		string(verify.Failed), codes(cs(verify.CodeEvidenceMismatch, verify.CodeInclusionProofOK)), codes(cs(verify.CodeEvidenceUnavailable, verify.CodeInclusionProofFailed)), b))

	b, _, err = g.basicBundle("r6-digest-only-retention", func(o *producer.Options) { o.Retention = transcript.RetainDigest })
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r6-digest-only-retention", 6, CaseBoundary,
		"The producer chose digest-only retention: request, response and protocol payloads are committed by digest and length but not kept (snapshot pages always are). Their bytes are unavailable evidence, not verified calls.",
		string(verify.Incomplete), codes(cs(verify.CodeEvidenceUnavailable, verify.CodeSnapshotVerified)), codes(bound, cs(verify.CodeEvidenceMismatch)), b))

	b, _, err = g.basicBundle("r6-digest-only-accepted", func(o *producer.Options) { o.Retention = transcript.RetainDigest })
	if err != nil {
		return nil, err
	}
	acc := g.bundleVec("r6-digest-only-accepted", 6, CaseBoundary,
		"The digest-only bundle of r6-digest-only-retention, verified by an auditor who accepts what the producer's declared policy withheld (accept_withheld): the verdict is verified, and one withheld_accepted finding states that the withheld payloads' digests and lengths, not their bytes, were verified.",
		string(verify.Verified), codes(cs(verify.CodeWithheldAccepted, verify.CodeSnapshotVerified)), codes(bound, cs(verify.CodeEvidenceUnavailable, verify.CodeEvidenceMismatch)), b)
	acc.m.Bundle.AcceptWithheld = true
	out = append(out, acc)

	// A signed line's claims about its retained bytes: each vector changes
	// one claim inside a validly signed transcript, the bytes untouched.
	claims := []struct {
		id, checks string
		match      func(event) bool
		edit       func(event)
	}{
		{"r6-claim-tool-changed",
			"The attempt line claims tool search_docs while its retained request bytes call get_weather; the record is re-signed, so only the claim contradicts the bytes.",
			is("attempt"), func(e event) { e["tool"] = "search_docs" }},
		{"r6-claim-arguments-digest-changed",
			"The attempt line's arguments_digest is replaced by the digest of other arguments; the retained request bytes canonicalize to the original digest. The record is re-signed.",
			is("attempt"), func(e event) { e["arguments_digest"] = canon.SHA256([]byte(`{"city":"Porto","units":"metric"}`)) }},
		{"r6-claim-jsonrpc-id-changed",
			"The attempt line's jsonrpc_id.text is changed from 3 to 4; the retained request bytes carry id 3. The record is re-signed.",
			is("attempt"), func(e event) { e["jsonrpc_id"].(map[string]any)["text"] = "4" }},
		{"r6-claim-is-error-flipped",
			"The response observation claims is_error true while its retained response bytes are a result without isError; the record is re-signed.",
			is("observation", "kind", transcript.ObsResponse), func(e event) { e["is_error"] = true }},
	}
	for _, c := range claims {
		b, _, err := g.basicBundle(c.id, nil)
		if err != nil {
			return nil, err
		}
		if err := b.editWhere(c.match, c.edit); err != nil {
			return nil, err
		}
		if err := b.resign(b.attempts(), nil); err != nil {
			return nil, err
		}
		out = append(out, g.bundleVec(c.id, 6, CaseNegative, c.checks,
			string(verify.Failed), codes(cs(verify.CodeEvidenceMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable)), b))
	}

	// The response observation is made to commit to the response bytes of
	// another request (id 4 instead of the attempt's 3): every digest
	// matches, only the id the bytes answer does not.
	b, _, err = g.basicBundle("r6-response-for-another-request", nil)
	if err != nil {
		return nil, err
	}
	if p, err = responseDigest(b); err != nil {
		return nil, err
	}
	other := bytes.Replace(b.payload(p), []byte(`"id":3,`), []byte(`"id":4,`), 1)
	if bytes.Equal(other, b.payload(p)) {
		return nil, fmt.Errorf("r6-response-for-another-request: the response does not answer id 3")
	}
	d := canon.SHA256(other)
	b.setPayload(d, other)
	if err := b.editWhere(is("observation", "kind", transcript.ObsResponse), func(e event) {
		e["response"].(map[string]any)["digest"] = d
	}); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r6-response-for-another-request", 6, CaseNegative,
		"The response observation of the get_weather attempt (request id 3) is changed to commit to response bytes answering request id 4, retained with their own digest and length; the record is re-signed. Every digest matches, but the bytes answer another request.",
		string(verify.Failed), codes(cs(verify.CodeResponseIDMismatch)), codes(bound, cs(verify.CodeEvidenceUnavailable, verify.CodePayloadsVerified)), b))
	return out, nil
}

// --- Row 7: identity / history conflict ---

// retryBundle records get_weather failing (isError), then a caller-declared
// retry (dev.tracectl/retryOf) that succeeds.
func (g *generator) retryBundle(id string) (*bundle, error) {
	s, err := g.open(id, nil)
	if err != nil {
		return nil, err
	}
	if err := s.discover(); err != nil {
		return nil, err
	}
	if _, err := s.snapshot(standardPages(), snapshot.Limits{}); err != nil {
		return nil, err
	}
	req := s.callLine("get_weather", weatherArgs, `"`+mcpwire.MetaCorrelationID+`":"weather-lisbon-1"`)
	h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, err
	}
	if err := h.Response(result(req, weatherError)); err != nil {
		return nil, err
	}
	req = s.callLine("get_weather", weatherArgs, `"`+mcpwire.MetaCorrelationID+`":"weather-lisbon-2","`+mcpwire.MetaRetryOf+`":"weather-lisbon-1"`)
	h, err = s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, err
	}
	if err := h.Response(result(req, weatherOK)); err != nil {
		return nil, err
	}
	return s.seal()
}

func (g *generator) row7() ([]*vec, error) {
	var out []*vec
	b, err := g.retryBundle("r7-retry-linked")
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r7-retry-linked", 7, CasePositive,
		"get_weather answers isError; the caller re-issues it with a new JSON-RPC id and declares the retry (_meta dev.tracectl/retryOf names the first call's correlation id). The retry is a new attempt a2 with retry_of a1 inside the signed transcript; a1 keeps its own outcome.",
		string(verify.Verified), codes(verifiedBase, cs(verify.CodeRetryLinked, verify.CodeHistoryConsistent)), codes(cs(verify.CodeIdentityConflict, verify.CodeHistoryConflict)), b))

	b, err = g.retryBundle("r7-attempt-id-reused")
	if err != nil {
		return nil, err
	}
	if err := b.editWhere(is("attempt", "attempt_id", "a2"), func(e event) {
		e["attempt_id"] = "a1"
		delete(e, "retry_of")
		delete(e, "retry_basis")
	}); err != nil {
		return nil, err
	}
	if err := b.editWhere(is("observation", "attempt_id", "a2"), func(e event) { e["attempt_id"] = "a1" }); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r7-attempt-id-reused", 7, CaseNegative,
		"The re-issued request is recorded under the first attempt's id a1 instead of a new one (and without a retry link). Reusing an attempt id for a different attempt is rejected.",
		string(verify.Failed), codes(cs(verify.CodeIdentityConflict)), codes(bound, cs(verify.CodeHistoryConsistent)), b))

	b, err = g.retryBundle("r7-first-outcome-replaced")
	if err != nil {
		return nil, err
	}
	i := b.find(is("observation", "attempt_id", "a2"))
	e, err := decodeEvent(b.lines()[i])
	if err != nil {
		return nil, err
	}
	e["attempt_id"] = "a1"
	forged, err := e.encode()
	if err != nil {
		return nil, err
	}
	if err := b.insert(b.find(is("seal")), forged); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r7-first-outcome-replaced", 7, CaseNegative,
		"After the retry succeeds, a second response observation for a1 (a copy of a2's success) is appended before the seal, as if the first attempt had succeeded. a1's recorded outcome (isError) cannot be replaced.",
		string(verify.Failed), codes(cs(verify.CodeHistoryConflict)), codes(bound, cs(verify.CodeIdentityConflict, verify.CodeHistoryConsistent)), b))

	b, err = g.retryBundle("r7-retry-link-dangling")
	if err != nil {
		return nil, err
	}
	if err := b.editWhere(is("attempt", "attempt_id", "a2"), func(e event) { e["retry_of"] = "a9" }); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r7-retry-link-dangling", 7, CaseBoundary,
		"The retry's retry_of names a9, an attempt the transcript never recorded: a retry link must point to an earlier attempt in the same signed transcript.",
		string(verify.Failed), codes(cs(verify.CodeHistoryConflict)), codes(bound, cs(verify.CodeRetryLinked)), b))
	return out, nil
}

// --- Row 8: unknown remains unknown ---

// timeoutBundle records get_weather timing out, then the same call again
// (new JSON-RPC id; the producer infers the retry) answered successfully.
func (g *generator) timeoutBundle(id string) (*bundle, error) {
	s, err := g.open(id, nil)
	if err != nil {
		return nil, err
	}
	if err := s.discover(); err != nil {
		return nil, err
	}
	if _, err := s.snapshot(standardPages(), snapshot.Limits{}); err != nil {
		return nil, err
	}
	req := s.callLine("get_weather", weatherArgs, "")
	h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, err
	}
	if err := h.Timeout(); err != nil {
		return nil, err
	}
	req = s.callLine("get_weather", weatherArgs, "")
	h, err = s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
	if err != nil {
		return nil, err
	}
	if err := h.Response(result(req, weatherOK)); err != nil {
		return nil, err
	}
	return s.seal()
}

func (g *generator) row8() ([]*vec, error) {
	var out []*vec
	b, err := g.timeoutBundle("r8-timeout-then-retry")
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r8-timeout-then-retry", 8, CasePositive,
		"a1 times out; the same tool with the same arguments is called again (a2, retry inferred by the producer) and succeeds. a1 stays unknown: it may or may not have executed, and the successful retry does not settle it. call_count is 2.",
		string(verify.Verified), codes(verifiedBase, cs(verify.CodeOutcomeUnknown, verify.CodeRetryLinked, verify.CodeHistoryConsistent)), codes(cs(verify.CodeHistoryConflict, verify.CodeCallCountMismatch)), b))

	b, err = g.timeoutBundle("r8-unknown-not-counted")
	if err != nil {
		return nil, err
	}
	if err := b.resign(1, nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r8-unknown-not-counted", 8, CaseNegative,
		"The record's call_count is 1, counting only the successful retry, as if the timed-out attempt had not executed. Call counts count every attempt, unknown ones included.",
		string(verify.Failed), codes(cs(verify.CodeCallCountMismatch, verify.CodeOutcomeUnknown)), codes(bound), b))

	b, err = g.timeoutBundle("r8-non-execution-claimed")
	if err != nil {
		return nil, err
	}
	i := b.find(is("observation", "attempt_id", "a1", "kind", transcript.ObsTimeout))
	e, err := decodeEvent(b.lines()[i])
	if err != nil {
		return nil, err
	}
	claim, err := canon.Marshal(map[string]any{"type": "resolution", "seq": e["seq"], "at_ms": e["at_ms"],
		"attempt_id": "a1", "outcome": "not_executed", "reason": "retry_succeeded"})
	if err != nil {
		return nil, err
	}
	lines := b.lines()
	lines[i] = claim
	b.setLines(lines)
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r8-non-execution-claimed", 8, CaseNegative,
		`The timeout observation of a1 is replaced by a resolution claiming outcome "not_executed" because the retry succeeded. The format has no such outcome: a timeout is never proof that the tool did not run, so the line is rejected.`,
		string(verify.Failed), codes(cs(verify.CodeTranscriptMalformed)), codes(bound, cs(verify.CodeHistoryConsistent)), b))
	return out, nil
}

// --- Row 9: producer observation only ---

func (g *generator) row9() ([]*vec, error) {
	pos, err := g.positive("r9-producer-recorded-response", 9,
		"The producer records the server's response to get_weather (basis producer_observation) and the server's self-description from server/discover. The verifier reports both as the producer's observations: bound to the attempt and intact, not authenticated by the server.",
		cs(verify.CodeProducerObservation), cs(verify.CodeServerProofMissing))
	if err != nil {
		return nil, err
	}
	out := []*vec{pos}

	// A remote server through tracectl proxy (spec/http.md): the HTTP facts
	// of the exchange are producer observations, the bearer token the
	// client sent is recorded only as present.
	httpBundle := func(id string) (*bundle, error) {
		u, _ := url.Parse("https://weather.example/mcp")
		srv, err := producer.HTTPServer(u, "weather")
		if err != nil {
			return nil, err
		}
		s, err := g.open(id, func(o *producer.Options) { o.Server = srv })
		if err != nil {
			return nil, err
		}
		if err := s.discover(); err != nil {
			return nil, err
		}
		if _, err := s.snapshot(standardPages(), snapshot.Limits{}); err != nil {
			return nil, err
		}
		if err := s.rec.RecordHTTP(transcript.HTTPEvent{Event: transcript.HTTPRequest, Exchange: 1, Method: "POST", Path: "/mcp",
			ContentType: "application/json", Headers: map[string]string{"mcp-method": "tools/call", "mcp-name": "get_weather", "mcp-protocol-version": protocolVersion},
			Credentials: []string{"authorization"}}); err != nil {
			return nil, err
		}
		req := s.callLine("get_weather", weatherArgs, "")
		h, err := s.rec.Attempt(g.fixedCtx, producer.Call{Line: req})
		if err != nil {
			return nil, err
		}
		if err := s.rec.RecordHTTP(transcript.HTTPEvent{Event: transcript.HTTPResponse, Exchange: 1, Status: 200, ContentType: "application/json"}); err != nil {
			return nil, err
		}
		if err := h.Response(result(req, weatherOK)); err != nil {
			return nil, err
		}
		return s.seal()
	}
	b, err := httpBundle("r9-http-observed")
	if err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r9-http-observed", 9, CaseBoundary,
		"The call went to a remote server through tracectl proxy: http lines record the POST (method, path, content type, the MCP headers, and that an Authorization header was present, never its value) and the upstream's 200. Like the response, they are the producer's observations: verified, not server-authenticated.",
		string(verify.Verified), codes(cs(verify.CodeProducerObservation, verify.CodePayloadsVerified)), codes(cs(verify.CodeServerProofMissing, verify.CodeTranscriptMalformed)), b))
	if b, err = httpBundle("r9-http-credential-recorded"); err != nil {
		return nil, err
	}
	if err := b.editWhere(is("http", "event", transcript.HTTPRequest), func(e event) {
		e["headers"].(map[string]any)["authorization"] = "Bearer sk-live-4eC39HqLyjWDarjtT1zdp7dc"
	}); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r9-http-credential-recorded", 9, CaseNegative,
		"An http line is made to carry the client's Authorization header value, and the record re-signed: a credential's value never enters the evidence, so the line is malformed (transcript_malformed), whatever the signature says.",
		string(verify.Failed), codes(cs(verify.CodeTranscriptMalformed)), codes(cs(verify.CodeSignatureInvalid)), b))

	b, _, err = g.basicBundle("r9-server-authentication-claimed", nil)
	if err != nil {
		return nil, err
	}
	if err := b.editWhere(is("observation", "kind", transcript.ObsResponse), func(e event) { e["basis"] = "server_authenticated" }); err != nil {
		return nil, err
	}
	if err := b.resign(b.attempts(), nil); err != nil {
		return nil, err
	}
	out = append(out, g.bundleVec("r9-server-authentication-claimed", 9, CaseNegative,
		`The response observation claims basis "server_authenticated" inside a validly signed transcript, but the bundle carries no server proof (no server signature, no issuer, no verification result). A claim of server authentication without its proof is refused; the response is only the producer's observation.`,
		string(verify.Failed), codes(cs(verify.CodeServerProofMissing)), codes(bound), b))
	return out, nil
}

// responseDigestIn returns the response digest of a disclosed bundle's
// proof (its observation line).
func responseDigestIn(b *bundle) (string, error) {
	p, err := transcript.ParseProof(b.files[transcript.DisclosureFile])
	if err != nil {
		return "", err
	}
	for _, e := range p.Entries {
		ev, err := transcript.DecodeLine([]byte(e.Line))
		if err != nil {
			return "", err
		}
		if o, ok := ev.(*transcript.Observation); ok && o.Response != nil {
			return o.Response.Digest, nil
		}
	}
	return "", fmt.Errorf("no response observation disclosed")
}
