package vectors

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// The fixed inputs of generation. The signing key's seed is public: these
// are test vectors, and anyone may re-sign a changed copy with it.
var (
	// KeySeed is the Ed25519 seed of the vectors' signing key:
	// SHA-256("tracectl vectors v1: signing key").
	KeySeed = sha256.Sum256([]byte("tracectl vectors v1: signing key"))
	// ClockStart is the time of the first event of every recording; each
	// reading of the clock advances it by one millisecond.
	ClockStart = time.Date(2026, 7, 1, 11, 58, 0, 0, time.UTC)
	// IssuedAt is every record's iat.
	IssuedAt = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	// ReferenceTime is the verifier's reference time (verifier.at).
	ReferenceTime = time.Date(2026, 7, 1, 12, 5, 0, 0, time.UTC)
)

// protocolVersion is the MCP revision of every recorded exchange.
const protocolVersion = "2026-07-28"

// stream is a deterministic entropy source: SHA-256(seed || counter)
// blocks. It stands in for crypto/rand so that scope and capture ids are
// the same on every run.
type stream struct {
	seed [32]byte
	ctr  uint64
	buf  []byte
}

func newStream(label string) *stream {
	return &stream{seed: sha256.Sum256([]byte("tracectl vectors v1: entropy: " + label))}
}

func (s *stream) Read(p []byte) (int, error) {
	for len(s.buf) < len(p) {
		var blk [40]byte
		copy(blk[:], s.seed[:])
		binary.BigEndian.PutUint64(blk[32:], s.ctr)
		s.ctr++
		sum := sha256.Sum256(blk[:])
		s.buf = append(s.buf, sum[:]...)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// clock returns a fixed clock: ClockStart, then one millisecond more at
// each reading.
func clock() func() time.Time {
	n := 0
	return func() time.Time {
		t := ClockStart.Add(time.Duration(n) * time.Millisecond)
		n++
		return t
	}
}

// generator holds what every vector shares.
type generator struct {
	signer   sign.Signer
	keyPEM   []byte
	thumb    string
	digest   string // build_provenance.digest of every record
	srvExec  string // executable_sha256 of the recorded server
	fixedCtx context.Context
}

func newGenerator() (*generator, error) {
	priv := ed25519.NewKeyFromSeed(KeySeed[:])
	s, err := sign.NewSigner(priv)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, err
	}
	tp, err := sign.Thumbprint(priv.Public())
	if err != nil {
		return nil, err
	}
	return &generator{
		signer: s, thumb: tp,
		keyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		digest:   canon.SHA256([]byte("tracectl vectors v1: generator")),
		srvExec:  canon.SHA256([]byte("tracectl vectors v1: weather-mcp executable")),
		fixedCtx: context.Background(),
	}, nil
}

// signRecord builds and signs the Trust Record over a transcript root.
func (g *generator) signRecord(root string, calls int64, edit func(*sign.Record)) ([]byte, error) {
	rec, err := sign.Build(sign.RecordOptions{
		IssuedAt: IssuedAt, Key: g.signer.Public(), Digest: g.digest,
		TranscriptHash: root, CallCount: calls,
		Subject: "spiffe://vectors.example/agent/weather-assistant", ModelProvider: "example", ModelID: "example-model-1",
	})
	if err != nil {
		return nil, err
	}
	if edit != nil {
		edit(rec)
	}
	return sign.Sign(rec, g.signer)
}

// recordSigner lets producer.Seal sign with the generator's key.
type recordSigner struct{ g *generator }

func (r recordSigner) SignTranscript(_ context.Context, root string, calls int64) ([]byte, error) {
	return r.g.signRecord(root, calls, nil)
}

// session records one vector's evidence through the real producer, in
// memory.
type session struct {
	g     *generator
	fs    *memFS
	rec   *producer.Recorder
	ent   *stream
	rpcID int
}

const bundleDir = "bundle"

func (g *generator) open(id string, edit func(*producer.Options)) (*session, error) {
	s := &session{g: g, fs: newMemFS(), ent: newStream(id), rpcID: 1}
	o := producer.Options{
		Clock: clock(), Entropy: s.ent, FS: s.fs,
		Producer: transcript.Producer{Name: "tracectl-vectors", Version: "v1", KeyThumbprint: g.thumb},
		Server: transcript.Server{
			Transport: transcript.TransportStdio, Executable: "/usr/local/bin/weather-mcp",
			ExecutableSHA256: g.srvExec, Argc: 1, Name: "weather",
		},
		Limits: producer.Limits{CallTimeout: 30 * time.Second},
	}
	if edit != nil {
		edit(&o)
	}
	rec, err := producer.Open(bundleDir, o)
	if err != nil {
		return nil, err
	}
	s.rec = rec
	return s, nil
}

// meta is the _meta every modern request carries.
const meta = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"` + protocolVersion + `"}`

// serverInfo is the server's self-description, as it reports it.
const serverInfo = `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"weather-mcp","version":"1.4.0"}}`

// discover records the server/discover exchange: the era and revision, and
// the server's self-description as reported.
func (s *session) discover() error {
	resp := `{"jsonrpc":"2.0","id":0,"result":{"resultType":"complete","supportedVersions":["` + protocolVersion +
		`"],"capabilities":{"tools":{"listChanged":true}},"ttlMs":300000,"cacheScope":"public",` + serverInfo + `}}` + "\n"
	return s.rec.RecordProtocol(producer.Protocol{
		Era: mcpwire.EraModern, Version: protocolVersion, Source: transcript.SourceDiscover,
		ServerName: "weather-mcp", ServerVersion: "1.4.0", Line: []byte(resp),
	})
}

// page is one tools/list exchange as served: the tools (raw JSON objects)
// and the cursors. A nil cursor is the first request (no cursor member); a
// nil next is the terminal page (no nextCursor member). The empty string is
// a real cursor.
type page struct {
	cursor *string
	tools  []string
	next   *string
}

func str(s string) *string { return &s }

// pageBytes returns the exact request and response lines of a page.
func (s *session) pageBytes(p page) (req, resp []byte) {
	id := s.rpcID
	s.rpcID++
	params := "{" + meta
	if p.cursor != nil {
		params += `,"cursor":` + strconv.Quote(*p.cursor)
	}
	params += "}"
	req = []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":%s}`, id, params))
	result := `{"resultType":"complete","tools":[` + strings.Join(p.tools, ",") + `],"ttlMs":300000,"cacheScope":"private"`
	if p.next != nil {
		result += `,"nextCursor":` + strconv.Quote(*p.next)
	}
	result += "," + serverInfo + "}"
	resp = []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, id, result))
	return req, resp
}

// collect runs the snapshot collector over pages and returns the snapshot.
func (s *session) collect(pages []page, lim snapshot.Limits) (*snapshot.Snapshot, error) {
	capID, err := snapshot.NewCaptureID(s.ent)
	if err != nil {
		return nil, err
	}
	var ex [][2][]byte
	for _, p := range pages {
		req, resp := s.pageBytes(p)
		ex = append(ex, [2][]byte{req, resp})
	}
	return collectBytes(capID, ex, lim)
}

// collectBytes runs the snapshot collector over exact exchanges.
func collectBytes(capID string, exchanges [][2][]byte, lim snapshot.Limits) (*snapshot.Snapshot, error) {
	name, ver, v := "weather-mcp", "1.4.0", protocolVersion
	col, err := snapshot.NewCollector(snapshot.Options{
		CaptureID: capID, Mode: snapshot.ModePassive, Limits: lim,
		ServerName: &name, ServerVersion: &ver, ServerSource: "discover_response",
		Era: mcpwire.EraModern, Version: &v, ListChangedWatch: snapshot.WatchSubscribed,
	})
	if err != nil {
		return nil, err
	}
	for _, e := range exchanges {
		if err := col.Add(e[0], e[1]); err != nil {
			return nil, err
		}
		if col.Finished() {
			break
		}
	}
	return col.Snapshot()
}

// record records a snapshot (fresh or reused) and returns its id.
func (s *session) record(snap *snapshot.Snapshot) (string, error) {
	m := snap.Manifest
	var blobs [][]byte
	for _, p := range snap.Pages {
		blobs = append(blobs, p.Request, p.Response)
	}
	return s.rec.RecordSnapshot(producer.Snapshot{
		Manifest: snap.Bytes, Digest: snap.Digest, Complete: m.Complete, IncompleteReason: m.IncompleteReason(),
		Tools: int64(len(m.Tools)), Pages: int64(len(m.Pages)), Reuse: m.Cache.Provenance == snapshot.ProvenanceReused,
		Blobs: blobs,
	})
}

// snapshot collects and records pages, and returns the snapshot.
func (s *session) snapshot(pages []page, lim snapshot.Limits) (*snapshot.Snapshot, error) {
	snap, err := s.collect(pages, lim)
	if err != nil {
		return nil, err
	}
	_, err = s.record(snap)
	return snap, err
}

// callLine returns a tools/call request line.
func (s *session) callLine(tool, args, extraMeta string) []byte {
	id := s.rpcID
	s.rpcID++
	m := meta
	if extraMeta != "" {
		m = strings.TrimSuffix(meta, "}") + "," + extraMeta + "}"
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":%q,"arguments":%s}}`+"\n", id, m, tool, args))
}

// result returns the response line to the request line req.
func result(req []byte, body string) []byte {
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(req, &r)
	return []byte(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"result":` + body + "}\n")
}

// Tool call results used by the vectors.
const (
	weatherOK    = `{"resultType":"complete","content":[{"type":"text","text":"Lisbon: 21.5 C, clear"}],"structuredContent":{"temperature":21.5,"conditions":"clear"},"isError":false}`
	weatherError = `{"resultType":"complete","content":[{"type":"text","text":"upstream weather service unavailable"}],"isError":true}`
	searchOK     = `{"resultType":"complete","content":[{"type":"text","text":"3 documents"}],"isError":false}`
)

// seal seals and signs the recording and returns the bundle's files.
func (s *session) seal() (*bundle, error) {
	if _, err := s.rec.Seal(s.g.fixedCtx, recordSigner{s.g}); err != nil {
		return nil, err
	}
	return &bundle{g: s.g, files: s.fs.tree(bundleDir)}, nil
}

// bundle is a sealed bundle's files, to be faulted.
type bundle struct {
	g     *generator
	files map[string][]byte
}

func (b *bundle) lines() [][]byte {
	t := bytes.TrimSuffix(b.files[transcript.TranscriptFile], []byte("\n"))
	return bytes.Split(t, []byte("\n"))
}

func (b *bundle) setLines(lines [][]byte) {
	b.files[transcript.TranscriptFile] = append(bytes.Join(lines, []byte("\n")), '\n')
}

// event is a transcript line decoded for editing: numbers stay exact.
type event map[string]any

func decodeEvent(line []byte) (event, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var e event
	err := dec.Decode(&e)
	return e, err
}

// encode returns the canonical line of an edited event.
func (e event) encode() ([]byte, error) { return canon.Marshal(map[string]any(e)) }

func (e event) str(k string) string { s, _ := e[k].(string); return s }

// find returns the index of the first line for which match holds, or -1.
func (b *bundle) find(match func(event) bool) int {
	for i, l := range b.lines() {
		if e, err := decodeEvent(l); err == nil && match(e) {
			return i
		}
	}
	return -1
}

// is matches events by type and, optionally, attempt id and kind.
func is(typ string, kv ...string) func(event) bool {
	return func(e event) bool {
		if e.str("type") != typ {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if e.str(kv[i]) != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// edit rewrites line i through f (re-encoded canonically).
func (b *bundle) edit(i int, f func(event)) error {
	ls := b.lines()
	if i < 0 || i >= len(ls) {
		return fmt.Errorf("edit: no line %d", i)
	}
	e, err := decodeEvent(ls[i])
	if err != nil {
		return err
	}
	f(e)
	if ls[i], err = e.encode(); err != nil {
		return err
	}
	b.setLines(ls)
	return nil
}

// editWhere edits the first line match selects.
func (b *bundle) editWhere(match func(event) bool, f func(event)) error {
	i := b.find(match)
	if i < 0 {
		return fmt.Errorf("edit: no matching line")
	}
	return b.edit(i, f)
}

// insert puts raw lines before line i and renumbers every seq.
func (b *bundle) insert(i int, lines ...[]byte) error {
	ls := b.lines()
	ls = slices.Insert(ls, i, lines...)
	b.setLines(ls)
	return b.renumber()
}

// remove drops line i and renumbers every seq.
func (b *bundle) remove(i int) error {
	ls := b.lines()
	ls = slices.Delete(ls, i, i+1)
	b.setLines(ls)
	return b.renumber()
}

// renumber sets each line's seq to its position.
func (b *bundle) renumber() error {
	ls := b.lines()
	for i := range ls {
		e, err := decodeEvent(ls[i])
		if err != nil {
			return err
		}
		if n, _ := e["seq"].(json.Number); n.String() == strconv.Itoa(i) {
			continue
		}
		e["seq"] = i
		if ls[i], err = e.encode(); err != nil {
			return err
		}
	}
	b.setLines(ls)
	return nil
}

// resign recomputes the transcript commitment over the current lines and
// signs a new record over it with the same key: a fault introduced before
// resign is inside a validly signed bundle, so it is the only thing a
// verifier can find.
func (b *bundle) resign(calls int64, edit func(*sign.Record)) error {
	rec, err := b.g.signRecord(transcript.Root(b.lines()), calls, edit)
	if err != nil {
		return err
	}
	b.files[transcript.RecordFile] = rec
	return nil
}

// attempts counts the attempt lines (the call count).
func (b *bundle) attempts() int64 {
	var n int64
	for _, l := range b.lines() {
		if e, err := decodeEvent(l); err == nil && e.str("type") == "attempt" {
			n++
		}
	}
	return n
}

// packEntry is one entry of a bundle's payload pack: the digest its header
// names, its salt (nil: a plain entry) and its bytes (which a faulted vector
// may make disagree).
type packEntry struct {
	digest string
	salt   []byte
	data   []byte
}

func (b *bundle) entries() ([]packEntry, error) {
	var out []packEntry
	_, err := transcript.ScanPack(bytes.NewReader(b.files[transcript.PackFile]), func(e transcript.PackEntry, body io.Reader) error {
		data := make([]byte, e.Length)
		if _, err := io.ReadFull(body, data); err != nil {
			return err
		}
		out = append(out, packEntry{e.Digest, e.Salt, data})
		return nil
	})
	return out, err
}

func (b *bundle) setEntries(es []packEntry) {
	var pack []byte
	for _, e := range es {
		pack = transcript.AppendPackHeader(pack, e.digest, int64(len(e.data)), e.salt)
		pack = append(append(pack, e.data...), '\n')
	}
	b.files[transcript.PackFile] = pack
}

// payload returns the bytes of the pack entry that names digest, or nil.
func (b *bundle) payload(digest string) []byte {
	es, err := b.entries()
	if err != nil {
		panic("vectors: the producer wrote a malformed pack: " + err.Error())
	}
	for _, e := range es {
		if e.digest == digest {
			return e.data
		}
	}
	return nil
}

// setPayload puts data in the pack under digest: in place of the entry
// that names it (the bytes changed, the name and salt kept), or as a new
// plain entry (digest is then SHA-256 of data, or a forgery).
func (b *bundle) setPayload(digest string, data []byte) {
	es, _ := b.entries()
	for i, e := range es {
		if e.digest == digest {
			es[i].data = data
			b.setEntries(es)
			return
		}
	}
	b.setEntries(append(es, packEntry{digest, nil, data}))
}

// dropPayload removes the pack entries that name digest.
func (b *bundle) dropPayload(digest string) {
	es, _ := b.entries()
	b.setEntries(slices.DeleteFunc(es, func(e packEntry) bool { return e.digest == digest }))
}
