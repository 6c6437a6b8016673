// Package verifytest builds evidence bundles for tests: a transcript written
// line by line as spec/transcript.md describes it, content-addressed blobs,
// real snapshots (package snapshot) and a record signed over the
// transcript's commitment (package sign). A test makes exactly the history
// it needs, and a fault it introduces before FS is signed validly, so that
// fault is the only thing a verifier can find. It never imports the
// producer: a verifier's tests must not depend on the code that writes
// evidence.
//
// Everything is deterministic (fixed keys, times and ids), so bundles can be
// kept as golden files.
package verifytest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/snapshot"
	"github.com/tracectl/tracectl/transcript"
)

// At is the reference time of every test bundle; records are issued at
// Issued, a minute before it.
var (
	At     = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	Issued = At.Add(-time.Minute)
)

// Key returns a deterministic Ed25519 signer (seed byte n).
func Key(t testing.TB, n byte) sign.Signer {
	t.Helper()
	s, err := sign.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{n}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Builder writes a bundle line by line. Its fields may be changed between
// calls: Lines before FS to fault the transcript (FS signs what is there),
// Files after FS to fault blobs, RecordOpts to fault the record's members.
type Builder struct {
	T            testing.TB
	Scope        string                    // the execution scope of the header and every attempt
	Lines        [][]byte                  // the transcript lines written so far
	Files        fstest.MapFS              // blobs, and after FS the transcript and record
	ServerDigest string                    // sha256 of JCS(header.server), set by Header
	Key          sign.Signer               // signs the record (Key(t, 1) by default)
	RecordOpts   func(*sign.RecordOptions) // adjusts the record before it is signed
	RecordEdit   func(*sign.Record)        // edits the built record (members Build does not write) before it is signed
	Lie          bool                      // sign the record even if sign.Sign refuses it (a re-signed lie)
	Retention    string                    // the header's retention mode

	atMs int64
}

// New returns a Builder with no lines; the first event writes the header.
func New(t testing.TB) *Builder {
	b := &Builder{T: t, Scope: "scope-1", Files: fstest.MapFS{}, atMs: Issued.Add(-time.Minute).UnixMilli(), Key: Key(t, 1), Retention: transcript.RetainFull}
	return b
}

// Header writes line 0; the first event calls it if no line exists yet.
func (b *Builder) Header() {
	srv := transcript.Server{Transport: transcript.TransportStdio, Executable: "/usr/bin/example-server", Argc: 0, Name: "example"}
	sb, err := canon.Marshal(srv)
	if err != nil {
		b.T.Fatal(err)
	}
	b.ServerDigest = canon.SHA256(sb)
	b.Add(&transcript.Header{
		Format: transcript.Format, Profile: transcript.Profile,
		Canonicalization: transcript.Canonicalization{Lines: canon.PolicyV02ID, Declarations: canon.PolicyMCPDeclID},
		Merkle:           transcript.MerkleAlg, ExecutionScope: b.Scope,
		Producer: transcript.Producer{Name: "tracectl-test", Version: "0"},
		Server:   srv, Retention: b.Retention, Durability: transcript.DurabilityNone,
		Limits: transcript.HeaderLimits{MaxFrameBytes: 1 << 20, MaxSnapshotPages: 100, MaxPageBytes: 1 << 20, MaxSnapshotBytes: 1 << 24}, StartedAtMs: b.atMs,
	})
}

// Add appends an event, setting its seq and at_ms (one millisecond
// after the previous line). It fails the test if the line is not valid.
func (b *Builder) Add(ev transcript.Event) {
	b.T.Helper()
	if len(b.Lines) == 0 {
		if _, ok := ev.(*transcript.Header); !ok {
			b.Header()
		}
	}
	seq := int64(len(b.Lines))
	b.atMs++
	switch e := ev.(type) {
	case *transcript.Header:
		e.Seq = seq
	case *transcript.SnapshotEvent:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Notification:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Attempt:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Observation:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Resolution:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Seal:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Protocol:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Recovery:
		e.Seq, e.AtMs = seq, b.atMs
	case *transcript.Frame:
		e.Seq, e.AtMs = seq, b.atMs
	default:
		b.T.Fatalf("builder: unknown event %T", ev)
	}
	line, err := transcript.Encode(ev)
	if err != nil {
		b.T.Fatal(err)
	}
	if _, err := transcript.DecodeLine(line); err != nil {
		b.T.Fatalf("builder wrote an invalid line: %v\n%s", err, line)
	}
	b.Lines = append(b.Lines, line)
}

// Blob stores bytes content-addressed and returns their payload commitment.
// The Builder's own payloads are canonical JSON (mcp-decl policy), so they
// can be rebuilt byte for byte with 'tracectl canon' in test scripts.
func (b *Builder) Blob(data []byte) transcript.Payload {
	d := canon.SHA256(data)
	b.Files[transcript.BlobPath(d)] = &fstest.MapFile{Data: bytes.Clone(data), Mode: 0o600}
	return transcript.Payload{Digest: d, Length: int64(len(data)), Retained: true}
}

// Snapshot collects a tools/list of n tools over pages of perPage and
// writes its manifest, pages and snapshot event; it returns the binding.
func (b *Builder) Snapshot(id string, n, perPage int) transcript.SnapshotRef {
	b.T.Helper()
	s := Collect(b.T, id, n, perPage)
	return b.AddSnapshot(id, s)
}

// AddSnapshot writes a collected snapshot's pages, manifest and snapshot
// line, and returns the binding an attempt would carry.
func (b *Builder) AddSnapshot(id string, s *snapshot.Snapshot) transcript.SnapshotRef {
	for _, p := range s.Pages {
		b.Blob(p.Request)
		b.Blob(p.Response)
	}
	b.Blob(s.Bytes)
	m := s.Manifest
	b.Add(&transcript.SnapshotEvent{SnapshotID: id, ManifestDigest: s.Digest, Complete: m.Complete, IncompleteReason: snapshot.ReasonText(m),
		Tools: int64(len(m.Tools)), Pages: int64(len(m.Pages)), Reuse: m.Cache.Provenance == snapshot.ProvenanceReused})
	return transcript.SnapshotRef{SnapshotID: id, ManifestDigest: s.Digest, Complete: m.Complete}
}

// Collect builds a snapshot from synthetic pages.
func Collect(t testing.TB, id string, n, perPage int) *snapshot.Snapshot {
	t.Helper()
	c, err := snapshot.NewCollector(snapshot.Options{CaptureID: id, Mode: snapshot.ModeActive})
	if err != nil {
		t.Fatal(err)
	}
	for page, first := 0, 0; first < n || page == 0; page++ {
		last := min(first+perPage, n)
		var tools []string
		for i := first; i < last; i++ {
			tools = append(tools, fmt.Sprintf(`{"description":"Tool number %d.","inputSchema":{"properties":{"x":{"minimum":0.5,"type":"number"}},"type":"object"},"name":"tool_%d"}`, i, i))
		}
		req := fmt.Sprintf(`{"id":%d,"jsonrpc":"2.0","method":"tools/list"}`, page+1)
		if page > 0 {
			req = fmt.Sprintf(`{"id":%d,"jsonrpc":"2.0","method":"tools/list","params":{"cursor":"c%d"}}`, page+1, page)
		}
		next := ""
		if last < n {
			next = fmt.Sprintf(`"nextCursor":"c%d",`, page+1)
		}
		resp := fmt.Sprintf(`{"id":%d,"jsonrpc":"2.0","result":{%s"tools":[%s]}}`, page+1, next, strings.Join(tools, ","))
		if err := c.Add([]byte(req), []byte(resp)); err != nil {
			t.Fatal(err)
		}
		first = last
	}
	s, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CollectTools builds a one-page snapshot of the given tool objects (JSON).
func CollectTools(t testing.TB, id string, tools ...string) *snapshot.Snapshot {
	t.Helper()
	c, err := snapshot.NewCollector(snapshot.Options{CaptureID: id, Mode: snapshot.ModeActive})
	if err != nil {
		t.Fatal(err)
	}
	resp := `{"id":1,"jsonrpc":"2.0","result":{"tools":[` + strings.Join(tools, ",") + `]}}`
	if err := c.Add([]byte(`{"id":1,"jsonrpc":"2.0","method":"tools/list"}`), []byte(resp)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Attempt dispatches a tools/call of tool_1 bound to ref; mods adjust the
// attempt line before it is written.
func (b *Builder) Attempt(id string, ref transcript.SnapshotRef, mods ...func(*transcript.Attempt)) {
	b.T.Helper()
	if len(b.Lines) == 0 {
		b.Header()
	}
	req := fmt.Sprintf(`{"id":%q,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"x":%d},"name":"tool_1"}}`, id, len(b.Lines))
	// The line's claims are derived from the request bytes as a producer
	// derives them: a verifier checks them against the bytes.
	f, err := transcript.DeriveRequest([]byte(req))
	if err != nil {
		b.T.Fatal(err)
	}
	a := &transcript.Attempt{ExecutionScope: b.Scope, AttemptID: id, Tool: f.Tool, ToolInvalid: f.ToolInvalid,
		ArgsDigest: f.ArgsDigest, ArgsUnsupport: f.ArgsUnsupported, RPCID: f.RPCID, Correlation: f.Correlation,
		Protocol:     transcript.AttemptProto{Era: mcpwire.EraModern, State: f.ProtoState, Value: f.ProtoVersion},
		ServerDigest: b.ServerDigest, Request: b.Blob([]byte(req)), Terminator: mcpwire.TermLF, Snapshot: ref}
	for _, m := range mods {
		m(a)
	}
	b.Add(a)
}

// Respond records a response observation for an attempt.
func (b *Builder) Respond(id string, kind string) {
	b.T.Helper()
	resp := fmt.Sprintf(`{"id":%q,"jsonrpc":"2.0","result":{"content":[{"text":"done %d","type":"text"}]}}`, id, len(b.Lines))
	p := b.Blob([]byte(resp))
	b.Add(&transcript.Observation{AttemptID: id, Kind: kind, ResultType: "complete", Response: &p, Terminator: mcpwire.TermLF, Basis: transcript.BasisProducer})
}

// Observe records an observation without a response (timeout, ...).
func (b *Builder) Observe(id, kind string) {
	b.Add(&transcript.Observation{AttemptID: id, Kind: kind, Basis: transcript.BasisProducer, Detail: "test"})
}

// Resolve appends a resolution: the attempt sealed in flight, outcome unknown.
func (b *Builder) Resolve(id string) {
	b.Add(&transcript.Resolution{AttemptID: id, Outcome: transcript.OutcomeUnknown, Reason: transcript.ReasonSealedInFlight})
}

// Seal appends the seal line with counts recomputed from the lines.
func (b *Builder) Seal() {
	b.T.Helper()
	var attempts int64
	state := map[string]string{}
	for _, l := range b.Lines {
		ev, _ := transcript.DecodeLine(l)
		switch e := ev.(type) {
		case *transcript.Attempt:
			attempts++
			if _, ok := state[e.AttemptID]; !ok {
				state[e.AttemptID] = "unknown"
			}
		case *transcript.Observation:
			switch e.Kind {
			case transcript.ObsResponse, transcript.ObsLateResponse:
				state[e.AttemptID] = "response"
			case transcript.ObsTransportFailure:
				state[e.AttemptID] = "transport"
			}
		}
	}
	s := &transcript.Seal{Attempts: attempts}
	for _, st := range state {
		switch st {
		case "response":
			s.Responses++
		case "transport":
			s.TransportFailures++
		default:
			s.Unknown++
		}
	}
	s.Unknown += attempts - int64(len(state)) // reused ids count as attempts
	b.Add(s)
}

// FS returns the bundle: transcript, blobs and a record signed over the
// transcript's commitment.
func (b *Builder) FS() fstest.MapFS {
	b.T.Helper()
	var tr bytes.Buffer
	var attempts int64
	for _, l := range b.Lines {
		tr.Write(l)
		tr.WriteByte('\n')
		if ev, _ := transcript.DecodeLine(l); ev != nil {
			if _, ok := ev.(*transcript.Attempt); ok {
				attempts++
			}
		}
	}
	b.Files[transcript.TranscriptFile] = &fstest.MapFile{Data: tr.Bytes(), Mode: 0o600}
	o := sign.RecordOptions{IssuedAt: Issued, Key: b.Key.Public(), Digest: canon.SHA256([]byte("tracectl-test")),
		TranscriptHash: transcript.Root(b.Lines), CallCount: attempts}
	if b.RecordOpts != nil {
		b.RecordOpts(&o)
	}
	rec, err := sign.Build(o)
	if err != nil {
		b.T.Fatal(err)
	}
	if b.RecordEdit != nil {
		b.RecordEdit(rec)
	}
	var data []byte
	if b.Lie {
		data = SignAnyway(b.T, rec, b.Key)
	} else if data, err = sign.Sign(rec, b.Key); err != nil {
		b.T.Fatal(err)
	}
	b.Files[transcript.RecordFile] = &fstest.MapFile{Data: data, Mode: 0o600}
	return b.Files
}

// SignAnyway signs rec's canonical bytes as sign.Sign would, without
// sign.Sign's checks: the record a hostile key holder writes.
func SignAnyway(t testing.TB, rec *sign.Record, k sign.Signer) []byte {
	t.Helper()
	u := *rec
	u.Signature = ""
	pre, err := canon.Marshal(&u)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := k.SignRecordBytes(pre)
	if err != nil {
		t.Fatal(err)
	}
	u.Signature = base64.RawURLEncoding.EncodeToString(sig)
	out, err := canon.Marshal(&u)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SignRecord builds and signs a record from o.
func SignRecord(t testing.TB, o sign.RecordOptions, k sign.Signer) []byte {
	t.Helper()
	rec, err := sign.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := sign.Sign(rec, k)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Standard is a small valid history: a complete two-page snapshot, three
// attempts (one answered, one timed out then retried and answered), sealed.
func Standard(t testing.TB) *Builder {
	b := New(t)
	ref := b.Snapshot("snap-1", 5, 3)
	b.Attempt("a1", ref)
	b.Respond("a1", transcript.ObsResponse)
	b.Attempt("a2", ref)
	b.Observe("a2", transcript.ObsTimeout)
	b.Attempt("a3", ref, func(a *transcript.Attempt) { a.RetryOf, a.RetryBasis = "a2", transcript.BasisCallerDeclared })
	b.Respond("a3", transcript.ObsResponse)
	b.Seal()
	return b
}

// Collector returns an active-mode snapshot collector for hand-made pages.
func Collector(id string) (*snapshot.Collector, error) {
	return snapshot.NewCollector(snapshot.Options{CaptureID: id, Mode: snapshot.ModeActive})
}
