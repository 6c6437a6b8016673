package snapshot

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// ErrFinished is returned by Collector.Add after collection has ended (a
// terminal page, or a stop). The exchange is not recorded: a new collection
// needs a new Collector.
var ErrFinished = errors.New("snapshot collection already finished")

// Options configure a Collector. CaptureID is required; it comes from the
// caller's entropy (NewCaptureID), never from the library.
type Options struct {
	CaptureID string
	Mode      string // ModeActive or ModePassive (default passive)
	Limits    Limits // zero fields take the defaults
	// Server and protocol as the producer observed them.
	ServerName, ServerVersion *string
	ServerSource              string      // discover_response | initialize_response | none (default)
	Era                       mcpwire.Era // default mcpwire.EraUnknown
	Version                   *string
	ListChangedWatch          string // default WatchUnknown
	// Relists counts earlier collections given up because list_changed
	// arrived during them (active capture only).
	Relists int64
}

// PageBytes are the exact bytes of one exchange, in manifest order. The
// producer stores both as blobs named by their SHA-256.
type PageBytes struct {
	Request, Response []byte
}

// Snapshot is a collection's result: the manifest, its canonical bytes and
// digest, and the page bytes the manifest commits to.
type Snapshot struct {
	Manifest *Manifest
	Bytes    []byte // canonical manifest bytes
	Digest   string // canon.SHA256(Bytes): the snapshot commitment
	Pages    []PageBytes
}

// Collector assembles a snapshot from tools/list exchanges given in the
// order the client sent them. It is passive and exact: it parses the bytes
// it is given, keeps them unchanged, and records what it saw. It is not safe
// for concurrent use.
type Collector struct {
	o         Options
	pages     []Page
	tools     []Tool
	raw       []PageBytes
	retained  int64
	requested map[string]int // request cursor values -> page index
	stop      *Stop
	terminal  bool
	changed   bool // list_changed during collection
	changedAB bool // list_changed after the collection ended (before a dispatch)
	cached    *Snapshot
	nextRaw   []byte // exact text of the last page's nextCursor
}

// NewCollector returns a Collector. It fails on missing or impossible
// options.
func NewCollector(o Options) (*Collector, error) {
	o.Limits = o.Limits.withDefaults()
	if err := o.Limits.check(); err != nil {
		return nil, fmt.Errorf("snapshot limits: %w", err)
	}
	if o.Relists < 0 {
		return nil, errors.New("snapshot relists must not be negative")
	}
	if o.CaptureID == "" || len(o.CaptureID) > 128 {
		return nil, errors.New("snapshot capture id must be 1..128 bytes")
	}
	if o.Mode == "" {
		o.Mode = ModePassive
	}
	if o.ServerSource == "" {
		o.ServerSource = "none"
	}
	if o.Era == "" {
		o.Era = mcpwire.EraUnknown
	}
	if o.ListChangedWatch == "" {
		o.ListChangedWatch = watchUnknown
	}
	return &Collector{o: o, requested: map[string]int{}}, nil
}

// Finished reports whether collection has ended (terminal page or stop).
func (c *Collector) Finished() bool { return c.terminal || c.stop != nil }

// Add records one exchange: the exact request line sent and the exact
// response line received for it (without the line terminator). It returns
// ErrNotToolsList or a parse error when request is not a readable tools/list
// request, and ErrFinished after collection ended (or when this request
// starts a new collection: stop "restarted"); in those cases nothing is
// recorded. It returns nil when it recorded the exchange, or the stop the
// exchange caused (a limit, an unexpected cursor: the exchange itself is
// then not kept). Everything about the response is recorded, whatever it
// holds.
// The collector keeps its own copies of both lines.
func (c *Collector) Add(req, resp []byte) error {
	// Copies: the caller may reuse its buffers, and these bytes are evidence.
	return c.add(bytes.Clone(req), bytes.Clone(resp), nil, nil)
}

// add is Add with the response optionally parsed already (doc or perr from
// canon.Parse with AllowDuplicateKeys and limits no wider than
// MaxPageBytes), so an active capture parses each line once.
func (c *Collector) add(req, resp []byte, doc *canon.Doc, perr error) error {
	if c.Finished() {
		return ErrFinished
	}
	lim := c.o.Limits
	r, err := parseRequest(req, lim.MaxPageBytes)
	if err != nil {
		return err
	}
	c.cached = nil
	n := len(c.pages)
	if n > 0 && r.cursor.State == stateAbsent {
		c.setStop(stopRestarted, fmt.Sprintf("request %d carries no cursor: the client started a new collection", n))
		return ErrFinished
	}
	if n > 0 {
		prev := c.pages[n-1].NextCursor
		if r.cursor.State != statePresent || *r.cursor.Value != *prev.Value {
			c.setStop(stopUnexpectedCursor, fmt.Sprintf("request %d cursor is not page %d's nextCursor", n, n-1))
			return nil
		}
	}
	if int64(len(req)) > lim.MaxPageBytes || int64(len(resp)) > lim.MaxPageBytes {
		c.setStop(StopPageBytesLimit, fmt.Sprintf("page %d: request %d bytes, response %d bytes; limit %d", n, len(req), len(resp), lim.MaxPageBytes))
		return nil
	}
	if c.retained+int64(len(req))+int64(len(resp)) > lim.MaxTotalBytes {
		c.setStop(stopTotalBytesLimit, fmt.Sprintf("page %d would bring retained bytes to %d; limit %d", n, c.retained+int64(len(req))+int64(len(resp)), lim.MaxTotalBytes))
		return nil
	}
	var f pageFacts
	if doc != nil || perr != nil {
		f = analyzeDoc(doc, perr, r.id, int64(n))
	} else {
		f = analyzeResponse(resp, r.id, int64(n), lim.MaxPageBytes)
	}
	c.nextRaw = f.nextRaw
	p := f.page
	p.Request = Blob{Digest: canon.SHA256(req), Length: int64(len(req))}
	p.Response = Blob{Digest: canon.SHA256(resp), Length: int64(len(resp))}
	p.Cursor = r.cursor
	c.pages = append(c.pages, p)
	c.tools = append(c.tools, f.tools...)
	c.raw = append(c.raw, PageBytes{Request: req, Response: resp})
	c.retained += p.Request.Length + p.Response.Length
	if r.cursor.State == statePresent {
		c.requested[*r.cursor.Value] = n
	}
	switch {
	case p.Outcome == outcomeError:
		c.setStop(stopJSONRPCError, fmt.Sprintf("page %d: %s", n, f.stopDetail))
	case p.Outcome == outcomeInvalid:
		c.setStop(StopInvalidPage, fmt.Sprintf("page %d: %s: %s", n, p.Invalid, f.stopDetail))
	case p.NextCursor.State == stateAbsent:
		c.terminal = true
	default:
		next := *p.NextCursor.Value
		if at, seen := c.requested[next]; seen {
			c.setStop(stopRepeatedCursor, fmt.Sprintf("page %d nextCursor %s was already requested for page %d", n, boundedString(next), at))
		} else if int64(len(c.pages)) >= lim.MaxPages {
			c.setStop(stopPageLimit, fmt.Sprintf("%d pages collected and page %d offers a nextCursor", len(c.pages), n))
		}
	}
	return nil
}

// nextCursor returns the cursor to request next (its exact JSON text as the
// server wrote it, so it can be sent back unchanged) and true, or false when
// collection has finished.
func (c *Collector) nextCursor() (raw []byte, ok bool) {
	if c.Finished() || c.nextRaw == nil {
		return nil, false
	}
	return c.nextRaw, true
}

// OfferedNextPage reports whether collection is unfinished and the last
// page observed offered a nextCursor: the next page was offered and not
// (yet) observed.
func (c *Collector) OfferedNextPage() bool {
	return !c.Finished() && len(c.pages) > 0 && c.nextRaw != nil
}

// NotifyListChanged records a notifications/tools/list_changed. During
// collection it makes the collection incomplete (the pages may mix two
// catalogs); after collection ended it marks the snapshot as changed before
// dispatch, so the next Snapshot is incomplete with that reason. Collection
// starts when the first page request is sent: a caller must not report a
// notification that arrived before that (it predates the collection, and
// the pages fetched after it show the changed catalog).
func (c *Collector) NotifyListChanged() {
	c.cached = nil
	if c.Finished() {
		c.changedAB = true
		return
	}
	c.changed = true
}

// Stop ends collection early with one of the Stop* reasons (transport
// closed, timeout, cancelled); detail says what happened. It is a no-op
// once collection has finished.
func (c *Collector) Stop(reason, detail string) {
	if c.Finished() {
		return
	}
	c.cached = nil
	c.setStop(reason, detail)
}

func (c *Collector) setStop(reason, detail string) {
	if c.stop == nil && !c.terminal {
		c.stop = &Stop{Reason: reason, Detail: detail}
	}
}

// Snapshot returns the snapshot as collected so far. It can be called at
// any time (a producer binding an attempt to an unfinished collection gets
// an incomplete snapshot) and again after NotifyListChanged.
func (c *Collector) Snapshot() (*Snapshot, error) {
	if c.cached != nil {
		return c.cached, nil
	}
	m := &Manifest{
		Format:            ManifestFormat,
		CaptureID:         c.o.CaptureID,
		DeclarationPolicy: canon.PolicyMCPDeclID,
		Server:            Server{Name: c.o.ServerName, Version: c.o.ServerVersion, Source: c.o.ServerSource},
		Protocol:          Protocol{Era: c.o.Era, Version: c.o.Version},
		Cache:             Cache{Provenance: provenanceFresh},
		Pages:             append([]Page{}, c.pages...),
		Tools:             append([]Tool{}, c.tools...),
	}
	col := &m.Collection
	col.Mode = c.o.Mode
	col.FirstRequestWithoutCursor = len(c.pages) > 0 && c.pages[0].Cursor.State == stateAbsent
	col.TerminalReached = c.terminal
	col.Stop = c.stop
	col.ListChangedWatch = c.o.ListChangedWatch
	col.ListChangedDuring = c.changed
	col.ListChangedBeforeDispatch = c.changedAB
	col.Relists = c.o.Relists
	col.RetainedBytes = c.retained
	col.Limits = c.o.Limits
	seen := make(map[string]int, len(c.tools))
	for _, t := range c.tools {
		if t.Name == nil {
			col.UnnamedTools++
		} else {
			seen[*t.Name]++
		}
	}
	col.DuplicateToolNames = duplicateNames(seen)
	finish(m)
	b, err := m.Encode()
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Manifest: m, Bytes: b, Digest: canon.SHA256(b), Pages: append([]PageBytes{}, c.raw...)}
	c.cached = s
	return s, nil
}

// finish sets the derived members from the facts.
func finish(m *Manifest) {
	m.IncompleteReasons = incompleteReasons(&m.Collection, len(m.Pages), len(m.Collection.DuplicateToolNames) > 0)
	m.Complete = len(m.IncompleteReasons) == 0
}
