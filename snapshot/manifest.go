package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// ManifestFormat is the manifest's format id. Each hashed object names its
// own format inside it, so a manifest digest can never be mistaken for the
// digest of another object.
const ManifestFormat = "tracectl.snapshot.manifest/v1"

// Field states: how a member was (or was not) present on the wire.
const (
	stateAbsent      = "absent"      // the member is not there
	statePresent     = "present"     // there, with a value of the expected type (recorded)
	stateInvalid     = "invalid"     // there, but of the wrong JSON type (its kind is recorded)
	stateUnsupported = "unsupported" // a number the v0.2 boundary cannot hold (e.g. ttlMs 1.5 or 1e20)
	stateAmbiguous   = "ambiguous"   // the member name occurs more than once
)

// Page outcomes.
const (
	outcomeResult  = "result"  // a valid tools/list result
	outcomeError   = "error"   // a JSON-RPC error response
	outcomeInvalid = "invalid" // anything else (see Page.Invalid)
)

// Reasons a response is not a valid tools/list page (Page.Invalid).
const (
	invalidNotJSON          = "not_json"           // the line is not strict RFC 8259 JSON (Page.InvalidCode has the canon code)
	invalidNotResponse      = "not_response"       // not an object with jsonrpc "2.0" and exactly one of result and error
	invalidAmbiguous        = "ambiguous_envelope" // a member of the envelope or result occurs twice
	invalidIDMismatch       = "id_mismatch"        // the response id is not the request id, byte for byte
	invalidToolsNotArray    = "tools_not_array"    // result.tools missing or not an array
	invalidToolNotObject    = "tool_not_object"    // an element of tools is not an object
	invalidNextCursor       = "next_cursor_invalid"
	invalidResultType       = "result_type_not_complete" // resultType other than "complete" (e.g. input_required)
	invalidErrorNotReadable = "error_not_readable"       // an error response whose code is not a v0.2 integer
)

// Stop reasons: why collection ended before a terminal page. Each is also an
// incomplete reason. Codes are stable (spec/snapshot.md). The reasons a
// caller passes to [Collector.Stop] or compares after a page are exported;
// the rest are only this package's to write, and a reader compares the
// documented string.
const (
	stopRepeatedCursor   = "repeated_cursor"   // a nextCursor repeats a cursor already requested: a cycle
	stopUnexpectedCursor = "unexpected_cursor" // a request cursor is not the previous page's nextCursor
	stopPageLimit        = "page_limit"        // Limits.MaxPages pages collected and more were offered
	StopPageBytesLimit   = "page_bytes_limit"  // a request or response longer than Limits.MaxPageBytes
	stopTotalBytesLimit  = "total_bytes_limit" // retained bytes would exceed Limits.MaxTotalBytes
	stopJSONRPCError     = "jsonrpc_error"     // the server answered a page request with an error
	StopInvalidPage      = "invalid_page"      // a response that is not a valid tools/list result
	StopTransportClosed  = "transport_closed"  // the server went away with a page request outstanding
	StopTimeout          = "timeout"           // no response in time
	StopCancelled        = "cancelled"         // the caller gave up (context cancelled)
	stopRestarted        = "restarted"         // the client began a new collection (request without cursor) before this one ended
	// StopNextPageNotObserved: the session ended after a page that offered
	// a nextCursor, and no next page was observed. Typically a client that
	// reads only the first page (the TypeScript SDK's plain listTools());
	// a passive observer of completed exchanges cannot tell that from a
	// next-page request the server never answered, so the name says only
	// what was observed.
	StopNextPageNotObserved = "next_page_not_observed"
)

// Incomplete reasons that are not stop reasons.
const (
	reasonNoPages                   = "no_pages"
	reasonJoinedMidStream           = "joined_mid_stream" // the first observed request carried a cursor
	reasonTerminalNotReached        = "terminal_not_reached"
	reasonListChangedDuring         = "list_changed_during_collection"
	reasonListChangedBeforeDispatch = "list_changed_before_dispatch"
	reasonDuplicateToolNames        = "duplicate_tool_names"
	reasonUnnamedTool               = "unnamed_tool"
)

// Declaration statuses.
const (
	DeclOK          = "ok"
	DeclUnsupported = "unsupported"
)

// Tool name problems (Tool.NameProblem).
const (
	nameMissing   = "missing"
	nameNotString = "not_string"
	nameAmbiguous = "ambiguous"
	nameNotObject = "not_object" // the tool itself is not an object
)

// Cache provenance.
const (
	provenanceFresh  = "fresh"
	ProvenanceReused = "reused"
)

// Collection modes.
const (
	ModeActive  = "active"  // tracectl fetched every page itself
	ModePassive = "passive" // pages a client fetched, observed by the proxy
)

// List-changed watch: whether a list_changed notification could have been
// observed at all, so "none seen" is not mistaken for "none sent".
const (
	WatchSession    = "session"          // legacy: notifications arrive on the session
	WatchSubscribed = "subscribed"       // modern: a subscriptions/listen stream was acknowledged for toolsListChanged
	watchNotOffered = "not_offered"      // the server did not declare tools.listChanged
	watchNotAcked   = "not_acknowledged" // modern: the listen request got no acknowledgement
	watchUnknown    = "unknown"
)

// Manifest is a snapshot manifest. Its canonical bytes (Encode) are the
// snapshot commitment. Optional members are pointers so that "absent" and
// an explicit zero value never meet.
type Manifest struct {
	Format            string     `json:"format"`
	CaptureID         string     `json:"capture_id"`
	DeclarationPolicy string     `json:"declaration_policy"` // canon.PolicyMCPDeclID
	Server            Server     `json:"server"`
	Protocol          Protocol   `json:"protocol"`
	Collection        Collection `json:"collection"`
	Cache             Cache      `json:"cache"`
	Complete          bool       `json:"complete"`
	IncompleteReasons []string   `json:"incomplete_reasons"`
	Pages             []Page     `json:"pages"`
	Tools             []Tool     `json:"tools"`
}

// Server is the server as it described itself (not authenticated).
type Server struct {
	Name    *string `json:"name,omitempty"`
	Version *string `json:"version,omitempty"`
	Source  string  `json:"source"` // discover_response | initialize_response | none
}

// Protocol is the MCP era and revision in use, as observed.
type Protocol struct {
	Era     mcpwire.Era `json:"era"`
	Version *string     `json:"version,omitempty"`
}

// Collection holds the facts about how the pages were collected.
type Collection struct {
	Mode                      string   `json:"mode"`
	FirstRequestWithoutCursor bool     `json:"first_request_without_cursor"`
	TerminalReached           bool     `json:"terminal_reached"`
	Stop                      *Stop    `json:"stop,omitempty"`
	ListChangedWatch          string   `json:"list_changed_watch"`
	ListChangedDuring         bool     `json:"list_changed_during_collection"`
	ListChangedBeforeDispatch bool     `json:"list_changed_before_dispatch"`
	Relists                   int64    `json:"relists"` // earlier collections given up because list_changed arrived during them
	DuplicateToolNames        []string `json:"duplicate_tool_names"`
	UnnamedTools              int64    `json:"unnamed_tools"`
	RetainedBytes             int64    `json:"retained_bytes"` // request and response bytes of the recorded pages
	Limits                    Limits   `json:"limits"`
}

// Stop says why collection ended early.
type Stop struct {
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Limits bound a collection. Zero fields take the defaults.
type Limits struct {
	MaxPages      int64 `json:"max_pages"`
	MaxPageBytes  int64 `json:"max_page_bytes"`
	MaxTotalBytes int64 `json:"max_total_bytes"`
}

// Default limits. A real catalog of a few thousand tools is a few MiB over a
// few dozen pages; these leave two orders of magnitude of room while keeping
// one capture within what a verifier can hold in memory.
const (
	DefaultMaxPages      = 1000
	defaultMaxPageBytes  = 16 << 20
	defaultMaxTotalBytes = 64 << 20
)

// Hard ceilings on configured limits, so a manifest cannot claim limits that
// would make a verifier allocate without bound.
const (
	CeilingMaxPages      = 100_000
	CeilingMaxPageBytes  = 64 << 20
	ceilingMaxTotalBytes = 1 << 30
)

// withDefaults fills zero fields with the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultMaxPages
	}
	if l.MaxPageBytes <= 0 {
		l.MaxPageBytes = defaultMaxPageBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = defaultMaxTotalBytes
	}
	return l
}

func (l Limits) check() error {
	switch {
	case l.MaxPages <= 0 || l.MaxPages > CeilingMaxPages:
		return fmt.Errorf("max_pages %d outside 1..%d", l.MaxPages, CeilingMaxPages)
	case l.MaxPageBytes <= 0 || l.MaxPageBytes > CeilingMaxPageBytes:
		return fmt.Errorf("max_page_bytes %d outside 1..%d", l.MaxPageBytes, CeilingMaxPageBytes)
	case l.MaxTotalBytes <= 0 || l.MaxTotalBytes > ceilingMaxTotalBytes:
		return fmt.Errorf("max_total_bytes %d outside 1..%d", l.MaxTotalBytes, ceilingMaxTotalBytes)
	}
	return nil
}

// Cache is the snapshot's cache provenance.
type Cache struct {
	Provenance string    `json:"provenance"` // fresh | reused
	Original   *Original `json:"original,omitempty"`
}

// Original names the capture a reused snapshot came from and the freshness
// policy under which it was reused.
type Original struct {
	CaptureID       string          `json:"capture_id"`
	ManifestDigest  string          `json:"manifest_digest"`
	FreshnessPolicy FreshnessPolicy `json:"freshness_policy"`
}

// FreshnessPolicy is the rule under which a cached snapshot was reused. Name
// is the caller's identifier for the rule (for example "ttl" when the
// served ttlMs decided, or "max_age"); MaxAgeMs and AgeMs are recorded when
// the caller knows them (the library never reads a clock).
type FreshnessPolicy struct {
	Name     string `json:"name"`
	MaxAgeMs *int64 `json:"max_age_ms,omitempty"`
	AgeMs    *int64 `json:"age_ms,omitempty"`
}

// Page is one tools/list exchange.
type Page struct {
	Request     Blob   `json:"request"`
	Response    Blob   `json:"response"`
	Cursor      Field  `json:"cursor"` // params.cursor of the request
	Outcome     string `json:"outcome"`
	Invalid     string `json:"invalid,omitempty"`      // why the outcome is invalid
	InvalidCode string `json:"invalid_code,omitempty"` // the canon code, for not_json
	ErrorCode   *int64 `json:"error_code,omitempty"`   // for outcome error
	NextCursor  Field  `json:"next_cursor"`
	TTLMs       Field  `json:"ttl_ms"`
	CacheScope  Field  `json:"cache_scope"`
	ResultType  Field  `json:"result_type"`
	Tools       int64  `json:"tools"`
}

// Blob commits to exact bytes by SHA-256 and length.
type Blob struct {
	Digest string `json:"digest"`
	Length int64  `json:"length"`
}

// Field records one member as served: its state and, when present, its
// value (Value for strings, Integer for integers), or its JSON kind when
// invalid or unsupported.
type Field struct {
	State   string  `json:"state"`
	Value   *string `json:"value,omitempty"`
	Integer *int64  `json:"integer,omitempty"`
	Kind    string  `json:"kind,omitempty"`
}

// Tool is one element of a page's tools array, in served order.
type Tool struct {
	Name        *string     `json:"name,omitempty"` // absent when NameProblem is set
	NameProblem string      `json:"name_problem,omitempty"`
	Page        int64       `json:"page"`
	Index       int64       `json:"index"`
	Declaration Declaration `json:"declaration"`
}

// Declaration is a tool's declaration digest, or why there is none.
type Declaration struct {
	Status  string  `json:"status"`            // ok | unsupported
	Digest  string  `json:"digest,omitempty"`  // sha256 of the canonical tool object under canon.PolicyMCPDecl
	Code    string  `json:"code,omitempty"`    // canon code when unsupported
	Pointer *string `json:"pointer,omitempty"` // RFC 6901 pointer relative to the tool object, when unsupported
}

// MaxManifestBytes bounds ParseManifest: a manifest for the ceiling of
// pages and a catalog of some 100,000 tools fits with room to spare.
const MaxManifestBytes = 64 << 20

// ErrManifest is wrapped by every ParseManifest and Encode rejection.
var errManifest = errors.New("invalid snapshot manifest")

// Encode returns the manifest's canonical bytes after checking that it is
// consistent (the same checks ParseManifest applies).
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errManifest, err)
	}
	b, err := canon.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errManifest, err)
	}
	return b, nil
}

// ParseManifest parses a manifest from its exact bytes. It is strict: the
// bytes must be the manifest's canonical form under canon.PolicyV02, with no
// unknown members, and the manifest must be consistent with itself
// (complete iff its facts say so; tools agree with page counts). It does not
// look at page bytes: VerifyPages does.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", errManifest, len(data), MaxManifestBytes)
	}
	// Canonical member order puts "cache" first: anything else is refused
	// before the parser spends memory on it.
	if !bytes.HasPrefix(data, []byte(`{"cache":{`)) {
		return nil, fmt.Errorf("%w: does not begin with the canonical {\"cache\":{", errManifest)
	}
	if err := canon.Check(data, canon.PolicyV02); err != nil {
		return nil, fmt.Errorf("%w: %w", errManifest, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", errManifest, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errManifest, err)
	}
	// Unique encoding: an explicit empty optional member, a null, or a
	// member the Go type would default cannot hide in accepted bytes.
	back, err := canon.Marshal(&m)
	if err != nil || !bytes.Equal(back, data) {
		return nil, fmt.Errorf("%w: not the unique encoding of its content (an explicit empty, null or default member)", errManifest)
	}
	return &m, nil
}

// Digest returns the snapshot commitment: SHA-256 of the canonical bytes.
func (m *Manifest) Digest() (string, error) {
	b, err := m.Encode()
	if err != nil {
		return "", err
	}
	return canon.SHA256(b), nil
}

// maxReasonTextBytes bounds ReasonText: the transcript line's
// incomplete_reason is producer text of at most this many bytes
// (transcript.MaxReportedBytes).
const maxReasonTextBytes = 256

// ReasonText is what the proxy writes as a snapshot line's
// incomplete_reason (producer/internal/session RecordingSink): every incomplete reason
// in the manifest's order joined with ",", "incomplete" if there is none,
// cut to 256 bytes; "" when complete. A verifier compares
// the line with it.
func ReasonText(m *Manifest) string {
	if m.Complete {
		return ""
	}
	s := strings.Join(m.IncompleteReasons, ",")
	if s == "" {
		s = "incomplete"
	}
	if len(s) > maxReasonTextBytes {
		s = s[:maxReasonTextBytes]
	}
	return s
}

// IncompleteReason returns the first incomplete reason, or "" when complete.
func (m *Manifest) IncompleteReason() string {
	if len(m.IncompleteReasons) == 0 {
		return ""
	}
	return m.IncompleteReasons[0]
}

// incompleteReasons computes, from the collection facts alone, why the
// collection is not complete, in a fixed order.
func incompleteReasons(c *Collection, pages int, duplicateNames bool) []string {
	var r []string
	if pages == 0 {
		r = append(r, reasonNoPages)
	} else if !c.FirstRequestWithoutCursor {
		r = append(r, reasonJoinedMidStream)
	}
	if c.Stop != nil {
		r = append(r, c.Stop.Reason)
	} else if !c.TerminalReached && pages > 0 {
		r = append(r, reasonTerminalNotReached)
	}
	if c.ListChangedDuring {
		r = append(r, reasonListChangedDuring)
	}
	if c.ListChangedBeforeDispatch {
		r = append(r, reasonListChangedBeforeDispatch)
	}
	if duplicateNames {
		r = append(r, reasonDuplicateToolNames)
	}
	if c.UnnamedTools > 0 {
		r = append(r, reasonUnnamedTool)
	}
	if r == nil {
		r = []string{}
	}
	return r
}

var (
	stopReasons = []string{stopRepeatedCursor, stopUnexpectedCursor, stopPageLimit, StopPageBytesLimit,
		stopTotalBytesLimit, stopJSONRPCError, StopInvalidPage, StopTransportClosed, StopTimeout, StopCancelled, stopRestarted, StopNextPageNotObserved}
	invalidReasons = []string{invalidNotJSON, invalidNotResponse, invalidAmbiguous, invalidIDMismatch,
		invalidToolsNotArray, invalidToolNotObject, invalidNextCursor, invalidResultType, invalidErrorNotReadable}
	watches    = []string{WatchSession, WatchSubscribed, watchNotOffered, watchNotAcked, watchUnknown}
	eras       = []mcpwire.Era{mcpwire.EraModern, mcpwire.EraLegacy, mcpwire.EraUnknown}
	jsonKinds  = []string{"null", "boolean", "number", "string", "array", "object"}
	srcs       = []string{"discover_response", "initialize_response", "none"}
	nameProbls = []string{nameMissing, nameNotString, nameAmbiguous, nameNotObject}
)

// validate checks everything a manifest must satisfy on its own.
func (m *Manifest) validate() error {
	if m.Format != ManifestFormat {
		return fmt.Errorf("format %q, want %q", m.Format, ManifestFormat)
	}
	if m.CaptureID == "" || len(m.CaptureID) > 128 {
		return errors.New("capture_id must be 1..128 bytes")
	}
	if m.DeclarationPolicy != canon.PolicyMCPDeclID {
		return fmt.Errorf("declaration_policy %q, want %q", m.DeclarationPolicy, canon.PolicyMCPDeclID)
	}
	if !slices.Contains(srcs, m.Server.Source) {
		return fmt.Errorf("server.source %q unknown", m.Server.Source)
	}
	if m.Server.Source == "none" && (m.Server.Name != nil || m.Server.Version != nil) {
		return errors.New("server.source none with a name or version")
	}
	if !slices.Contains(eras, m.Protocol.Era) {
		return fmt.Errorf("protocol.era %q unknown", m.Protocol.Era)
	}
	c := &m.Collection
	if c.Mode != ModeActive && c.Mode != ModePassive {
		return fmt.Errorf("collection.mode %q unknown", c.Mode)
	}
	if !slices.Contains(watches, c.ListChangedWatch) {
		return fmt.Errorf("collection.list_changed_watch %q unknown", c.ListChangedWatch)
	}
	if err := c.Limits.check(); err != nil {
		return fmt.Errorf("collection.limits: %w", err)
	}
	if c.Stop != nil {
		if !slices.Contains(stopReasons, c.Stop.Reason) {
			return fmt.Errorf("collection.stop.reason %q unknown", c.Stop.Reason)
		}
		if c.TerminalReached {
			return errors.New("collection both stopped and terminal")
		}
	}
	if c.Relists < 0 || (c.Relists > 0 && c.Mode != ModeActive) {
		return errors.New("collection.relists must be 0, or positive for an active capture")
	}
	if int64(len(m.Pages)) > c.Limits.MaxPages {
		return fmt.Errorf("%d pages exceed max_pages %d", len(m.Pages), c.Limits.MaxPages)
	}
	if c.DuplicateToolNames == nil || m.IncompleteReasons == nil || m.Pages == nil || m.Tools == nil {
		return errors.New("duplicate_tool_names, incomplete_reasons, pages and tools must be arrays")
	}
	switch m.Cache.Provenance {
	case provenanceFresh:
		if m.Cache.Original != nil {
			return errors.New("cache: fresh with an original")
		}
	case ProvenanceReused:
		o := m.Cache.Original
		if o == nil {
			return errors.New("cache: reused without its original capture")
		}
		if o.CaptureID == "" || o.FreshnessPolicy.Name == "" {
			return errors.New("cache: reused without original capture id or freshness policy name")
		}
		if _, err := canon.ParseDigest(o.ManifestDigest); err != nil {
			return fmt.Errorf("cache.original.manifest_digest: %w", err)
		}
	default:
		return fmt.Errorf("cache.provenance %q unknown", m.Cache.Provenance)
	}

	// Pages, and the facts that follow from them.
	var retained int64
	var toolsWant int64
	for i := range m.Pages {
		p := &m.Pages[i]
		if err := p.validate(i == len(m.Pages)-1); err != nil {
			return fmt.Errorf("pages/%d: %w", i, err)
		}
		if p.Outcome == outcomeResult && p.NextCursor.State == stateAbsent && i != len(m.Pages)-1 {
			return fmt.Errorf("pages/%d: terminal page before the last page", i)
		}
		if i > 0 {
			prev := m.Pages[i-1].NextCursor
			if p.Cursor.State != statePresent || prev.State != statePresent || *p.Cursor.Value != *prev.Value {
				return fmt.Errorf("pages/%d: cursor is not pages/%d's nextCursor", i, i-1)
			}
		}
		retained += p.Request.Length + p.Response.Length
		toolsWant += p.Tools
	}
	if retained != c.RetainedBytes {
		return fmt.Errorf("collection.retained_bytes %d, pages hold %d", c.RetainedBytes, retained)
	}
	if retained > c.Limits.MaxTotalBytes {
		return errors.New("retained bytes exceed max_total_bytes")
	}
	if len(m.Pages) > 0 {
		first := m.Pages[0].Cursor.State == stateAbsent
		if first != c.FirstRequestWithoutCursor {
			return errors.New("first_request_without_cursor disagrees with pages/0")
		}
		last := m.Pages[len(m.Pages)-1]
		terminal := last.Outcome == outcomeResult && last.NextCursor.State == stateAbsent
		if terminal != c.TerminalReached {
			return errors.New("terminal_reached disagrees with the last page")
		}
	} else if c.FirstRequestWithoutCursor || c.TerminalReached {
		return errors.New("collection facts claimed without pages")
	}
	if int64(len(m.Tools)) != toolsWant {
		return fmt.Errorf("%d tools, pages count %d", len(m.Tools), toolsWant)
	}
	page, idx := int64(0), int64(0)
	var unnamed int64
	seen := map[string]int{}
	for i := range m.Tools {
		t := &m.Tools[i]
		for page < int64(len(m.Pages)) && idx == m.Pages[page].Tools {
			page, idx = page+1, 0
		}
		if t.Page != page || t.Index != idx {
			return fmt.Errorf("tools/%d: page %d index %d, want page %d index %d", i, t.Page, t.Index, page, idx)
		}
		idx++
		if err := t.validate(); err != nil {
			return fmt.Errorf("tools/%d: %w", i, err)
		}
		if t.Name == nil {
			unnamed++
		} else {
			seen[*t.Name]++
		}
	}
	if unnamed != c.UnnamedTools {
		return fmt.Errorf("collection.unnamed_tools %d, tools hold %d", c.UnnamedTools, unnamed)
	}
	if want := duplicateNames(seen); !slices.Equal(want, c.DuplicateToolNames) {
		return errors.New("collection.duplicate_tool_names disagrees with tools")
	}
	want := incompleteReasons(c, len(m.Pages), len(c.DuplicateToolNames) > 0)
	if !slices.Equal(want, m.IncompleteReasons) {
		return fmt.Errorf("incomplete_reasons %q, the facts give %q", m.IncompleteReasons, want)
	}
	if m.Complete != (len(want) == 0) {
		return fmt.Errorf("complete is %v, the facts say %v", m.Complete, len(want) == 0)
	}
	return nil
}

func duplicateNames(seen map[string]int) []string {
	d := []string{}
	for n, k := range seen {
		if k > 1 {
			d = append(d, n)
		}
	}
	slices.Sort(d)
	return d
}

func (p *Page) validate(last bool) error {
	for _, b := range []Blob{p.Request, p.Response} {
		if _, err := canon.ParseDigest(b.Digest); err != nil {
			return err
		}
		if b.Length < 0 {
			return errors.New("negative length")
		}
	}
	if err := p.Cursor.validate(false); err != nil {
		return fmt.Errorf("cursor: %w", err)
	}
	for _, f := range []struct {
		name string
		f    Field
		int  bool
	}{{"next_cursor", p.NextCursor, false}, {"ttl_ms", p.TTLMs, true}, {"cache_scope", p.CacheScope, false}, {"result_type", p.ResultType, false}} {
		if err := f.f.validate(f.int); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if p.Outcome == outcomeError && f.f.State != stateAbsent {
			return fmt.Errorf("%s on an error page", f.name)
		}
	}
	switch p.Outcome {
	case outcomeResult:
		if p.Invalid != "" || p.InvalidCode != "" || p.ErrorCode != nil {
			return errors.New("result page with invalid or error members")
		}
		if p.NextCursor.State != stateAbsent && p.NextCursor.State != statePresent {
			return errors.New("result page with an unusable next_cursor")
		}
		if p.ResultType.State != stateAbsent && (p.ResultType.State != statePresent || *p.ResultType.Value != "complete") {
			return errors.New("result page whose result_type is not complete")
		}
	case outcomeError:
		if p.Invalid != "" || p.InvalidCode != "" || p.ErrorCode == nil || p.Tools != 0 {
			return errors.New("error page needs error_code only")
		}
		if !last {
			return errors.New("error page before the last page")
		}
	case outcomeInvalid:
		if !slices.Contains(invalidReasons, p.Invalid) || p.ErrorCode != nil {
			return fmt.Errorf("invalid %q unknown", p.Invalid)
		}
		if (p.Invalid == invalidNotJSON) != (p.InvalidCode != "") {
			return errors.New("invalid_code goes with not_json only")
		}
		if !last {
			return errors.New("invalid page before the last page")
		}
	default:
		return fmt.Errorf("outcome %q unknown", p.Outcome)
	}
	if p.Tools < 0 {
		return errors.New("negative tool count")
	}
	return nil
}

func (f Field) validate(integer bool) error {
	switch f.State {
	case stateAbsent, stateAmbiguous:
		if f.Value != nil || f.Integer != nil || f.Kind != "" {
			return fmt.Errorf("state %s with a value", f.State)
		}
	case statePresent:
		if f.Kind != "" || (integer && (f.Integer == nil || f.Value != nil)) || (!integer && (f.Value == nil || f.Integer != nil)) {
			return errors.New("present without exactly its value")
		}
	case stateInvalid, stateUnsupported:
		if f.Value != nil || f.Integer != nil || !slices.Contains(jsonKinds, f.Kind) {
			return fmt.Errorf("state %s needs its kind only", f.State)
		}
		if f.State == stateUnsupported && (!integer || f.Kind != "number") {
			return errors.New("unsupported applies to integer members holding numbers")
		}
	default:
		return fmt.Errorf("state %q unknown", f.State)
	}
	return nil
}

func (t *Tool) validate() error {
	if (t.Name == nil) == (t.NameProblem == "") {
		return errors.New("exactly one of name and name_problem")
	}
	if t.NameProblem != "" && !slices.Contains(nameProbls, t.NameProblem) {
		return fmt.Errorf("name_problem %q unknown", t.NameProblem)
	}
	d := t.Declaration
	switch d.Status {
	case DeclOK:
		if d.Code != "" || d.Pointer != nil {
			return errors.New("ok declaration with code or pointer")
		}
		if _, err := canon.ParseDigest(d.Digest); err != nil {
			return err
		}
	case DeclUnsupported:
		if d.Digest != "" || d.Code == "" || d.Pointer == nil {
			return errors.New("unsupported declaration needs code and pointer only")
		}
	default:
		return fmt.Errorf("declaration status %q unknown", d.Status)
	}
	return nil
}
