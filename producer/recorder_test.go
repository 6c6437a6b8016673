package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

func TestRecordAndSeal(t *testing.T) {
	r, dir := openTest(t, nil)
	req := call("1", "echo", `{"text":"hi"}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)
	h := mustAttempt(t, r, req)
	resp := result("1", `,"resultType":"complete"`)
	if err := h.Response(resp); err != nil {
		t.Fatal(err)
	}
	h2 := mustAttempt(t, r, call("2", "echo", `{"text":"again"}`, ""))
	if err := h2.TransportFailure("server exited: signal: killed"); err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, r, call("3", "slow", `{}`, "")) // in flight at seal
	signer := &testSigner{}
	s, err := r.Seal(context.Background(), signer)
	if err != nil {
		t.Fatal(err)
	}
	b := readBundle(t, dir)
	if s.Root != b.root || signer.root != b.root || signer.count != 3 || !s.Signed {
		t.Errorf("sealed root %s, signed %s/%d, transcript root %s", s.Root, signer.root, signer.count, b.root)
	}
	want := transcript.Seal{Attempts: 3, Responses: 1, TransportFailures: 1, Unknown: 1}
	if got := b.seal(); got == nil || got.Attempts != want.Attempts || got.Responses != want.Responses || got.TransportFailures != want.TransportFailures || got.Unknown != want.Unknown || got.Recovered {
		t.Errorf("seal = %+v, want %+v", got, want)
	}
	if res := b.res["a3"]; res == nil || res.Reason != transcript.ReasonSealedInFlight || res.Outcome != transcript.OutcomeUnknown {
		t.Errorf("in-flight attempt resolution = %+v", res)
	}
	// Exact bytes: request and response blobs hold what was sent, without
	// the terminator, and the line says how it ended.
	a := b.attempts["a1"]
	if a.Request.Digest != transcript.SaltedDigest(zeroSalt, req[:len(req)-1]) || a.Request.Length != int64(len(req)-1) || a.Terminator != mcpwire.TermLF || !a.Request.Retained {
		t.Errorf("request commitment %+v %s", a.Request, a.Terminator)
	}
	got, err := readPayload(dir, a.Request.Digest)
	if err != nil || string(got) != string(req[:len(req)-1]) {
		t.Errorf("request blob = %q, %v", got, err)
	}
	if a.Protocol != (transcript.AttemptProto{Era: mcpwire.EraModern, State: transcript.ProtoPresent, Value: "2026-07-28"}) {
		t.Errorf("protocol = %+v", a.Protocol)
	}
	o := b.obs["a1"][0]
	if o.Kind != transcript.ObsResponse || o.ResultType != "complete" || o.Response.Digest != transcript.SaltedDigest(zeroSalt, resp[:len(resp)-1]) || o.Basis != transcript.BasisProducer {
		t.Errorf("response observation %+v", o)
	}
	rec, err := os.ReadFile(filepath.Join(dir, transcript.RecordFile))
	if err != nil || !strings.Contains(string(rec), b.root) {
		t.Errorf("record.json = %s, %v", rec, err)
	}
	// Modes: directories 0700, files 0600.
	for _, p := range []string{"", transcript.TranscriptFile, transcript.RecordFile, transcript.PackFile} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700 | os.ModeDir
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	// Closed after Seal.
	if _, err := r.Attempt(context.Background(), Call{Line: req}); !errors.Is(err, ErrClosed) {
		t.Errorf("Attempt after Seal = %v, want ErrClosed", err)
	}
}

func TestOpenRefusesExistingAndBadOptions(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, testOptions(t)); !errors.Is(err, ErrBundleExists) {
		t.Errorf("Open(existing dir) = %v, want ErrBundleExists", err)
	}
	for name, mutate := range map[string]func(*Options){
		"no clock":      func(o *Options) { o.Clock = nil },
		"no entropy":    func(o *Options) { o.Entropy = nil },
		"bad mode":      func(o *Options) { o.Durability = "eventually" },
		"bad retention": func(o *Options) { o.Retention = "some" },
		"no producer":   func(o *Options) { o.Producer.Name = "" },
		"no transport":  func(o *Options) { o.Server.Transport = "" },
	} {
		o := testOptions(t)
		mutate(&o)
		if _, err := Open(filepath.Join(dir, "x"), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Open = %v, want ErrInvalidOptions", name, err)
		}
	}
}

func TestAttemptIDsUniqueUnder64Goroutines(t *testing.T) {
	r, dir := openTest(t, nil)
	const workers, each = 64, 8
	ids := make(chan string, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprint(w*1000 + i)
				h, err := r.Attempt(context.Background(), Call{Line: call(id, "t", `{"w":`+id+`}`, "")})
				if err != nil {
					t.Error(err)
					return
				}
				if err := h.Response(result(id, "")); err != nil {
					t.Error(err)
				}
				ids <- h.ID()
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("attempt id %s handed out twice", id)
		}
		seen[id] = true
	}
	mustSeal(t, r)
	b := readBundle(t, dir) // checks uniqueness in the journal and contiguous seq
	if len(b.attempts) != workers*each || b.seal().Responses != workers*each {
		t.Errorf("%d attempts, seal %+v", len(b.attempts), b.seal())
	}
	// Times follow file order, whatever order the callers ran in.
	last := int64(0)
	for _, ev := range b.events[1:] {
		at := reflect.ValueOf(ev).Elem().FieldByName("AtMs").Int()
		if at < last {
			t.Fatalf("at_ms %d after %d", at, last)
		}
		last = at
	}
	// Group commit: concurrent callers shared fsyncs.
	if st := r.Stats(); st.Fsyncs >= st.Lines {
		t.Errorf("%d fsyncs for %d lines: no group commit", st.Fsyncs, st.Lines)
	}
}

func TestRetryLinks(t *testing.T) {
	r, dir := openTest(t, nil)
	ctx := context.Background()
	// A chain of three: a1 times out, a2 (declared retry) fails in
	// transport, a3 (inferred: same tool and canonical arguments) answers.
	a1 := mustAttempt(t, r, call("1", "pay", `{"amount":5,"to":"x"}`, ""))
	if err := a1.Timeout(); err != nil {
		t.Fatal(err)
	}
	a2, err := r.Retry(ctx, a1, transcript.BasisCallerDeclared, Call{Line: call("2", "pay", `{"amount":5,"to":"x"}`, "")})
	if err != nil {
		t.Fatal(err)
	}
	a2.TransportFailure("broken pipe")
	a3 := mustAttempt(t, r, call("3", "pay", `{ "to" : "x", "amount" : 5.0 }`, "")) // same canonical arguments
	a3.Response(result("3", ""))
	// Not a retry: different arguments after an unknown outcome.
	a4 := mustAttempt(t, r, call("4", "pay", `{"amount":6,"to":"x"}`, ""))
	a4.Timeout()
	// Declared through _meta: the earlier call's correlation id.
	a5 := mustAttempt(t, r, call("5", "mail", `{}`, `{"dev.tracectl/correlationId":"job-7"}`))
	a5.Response(result("5", ""))
	a6 := mustAttempt(t, r, call("6", "mail", `{}`, `{"dev.tracectl/correlationId":"job-7b","dev.tracectl/retryOf":"job-7"}`))
	a6.Response(result("6", ""))
	// A declaration naming nothing recorded links nothing but is kept.
	a7 := mustAttempt(t, r, call("7", "mail", `{}`, `{"dev.tracectl/retryOf":"nope"}`))
	a7.Response(result("7", ""))
	// An inferred retry after a late response is not made: the outcome is known.
	a8 := mustAttempt(t, r, call("8", "pay", `{"amount":6,"to":"x"}`, ""))
	a8.Response(result("8", ""))
	a4.Response(result("4", ""))
	a9 := mustAttempt(t, r, call("9", "pay", `{"amount":6,"to":"x"}`, ""))
	a9.Response(result("9", ""))
	mustSeal(t, r)
	b := readBundle(t, dir)
	tests := []struct {
		id, retryOf, basis string
	}{
		{"a1", "", ""},
		{"a2", "a1", transcript.BasisCallerDeclared},
		{"a3", "a2", transcript.BasisInferred},
		{"a4", "", ""},
		{"a5", "", ""},
		{"a6", "a5", transcript.BasisCallerDeclared},
		{"a7", "", ""},
		{"a8", "a4", transcript.BasisInferred},
		{"a9", "", ""},
	}
	for _, tt := range tests {
		a := b.attempts[tt.id]
		if a.RetryOf != tt.retryOf || a.RetryBasis != tt.basis {
			t.Errorf("%s: retry_of %q basis %q, want %q %q", tt.id, a.RetryOf, a.RetryBasis, tt.retryOf, tt.basis)
		}
	}
	if c := b.attempts["a7"].Correlation.RetryOf; c == nil || !c.Valid || c.Value != "nope" {
		t.Errorf("a7 declared retry_of = %+v", c)
	}
	// History is kept: a1 keeps its timeout, a2 its transport failure.
	if b.status("a1") != "unknown" || b.status("a2") != transcript.ObsTransportFailure || b.status("a4") != transcript.ObsResponse {
		t.Errorf("statuses a1=%s a2=%s a4=%s", b.status("a1"), b.status("a2"), b.status("a4"))
	}
	if k := b.obs["a4"][1].Kind; k != transcript.ObsLateResponse {
		t.Errorf("a4's response after its timeout is %s, want late_response", k)
	}
	if _, err := r.Retry(ctx, a1, transcript.BasisInferred, Call{Line: call("x", "pay", "", "")}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Retry with basis inferred = %v, want ErrInvalidInput", err)
	}
}

func TestContinuationOfInputRequired(t *testing.T) {
	r, dir := openTest(t, nil)
	a1 := mustAttempt(t, r, call("1", "deploy", `{"env":"prod"}`, ""))
	if err := a1.Response(result("1", `,"resultType":"input_required","inputRequests":{}`)); err != nil {
		t.Fatal(err)
	}
	// The re-issue: a NEW id, requestState: a distinct attempt linked as a continuation.
	a2 := mustAttempt(t, r, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"env":"prod"},"requestState":"opaque","inputResponses":{"ok":true}}}`+"\n"))
	a2.Response(result("2", `,"resultType":"complete"`))
	// Declared from Go.
	a3 := mustAttempt(t, r, call("3", "ask", `{}`, ""))
	a3.Response(result("3", `,"resultType":"input_required"`))
	a4, err := r.Retry(context.Background(), a3, transcript.BasisContinuation, Call{Line: call("4", "ask", `{}`, "")})
	if err != nil {
		t.Fatal(err)
	}
	a4.Response(result("4", ""))
	mustSeal(t, r)
	b := readBundle(t, dir)
	for id, want := range map[string]string{"a2": "a1", "a4": "a3"} {
		if a := b.attempts[id]; a.RetryOf != want || a.RetryBasis != transcript.BasisContinuation {
			t.Errorf("%s: retry_of %q basis %q, want %s continuation", id, a.RetryOf, a.RetryBasis, want)
		}
	}
	if rt := b.obs["a1"][0].ResultType; rt != "input_required" {
		t.Errorf("interim result_type %q", rt)
	}
}

func TestJSONRPCIDsRecordedExactly(t *testing.T) {
	r, dir := openTest(t, nil)
	long := `"` + strings.Repeat("k", 1024) + `"`
	huge := `"` + strings.Repeat("h", transcript.MaxRPCIDTextBytes) + `"`
	tests := []struct {
		id   string // "" = absent
		want transcript.JSONRPCID
	}{
		{"9007199254740993", transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: "9007199254740993"}},
		{"-0", transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: "-0"}},
		{"1.5", transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: "1.5"}},
		{"1E+2", transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: "1E+2"}},
		{`""`, transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: `""`}},
		{`"\u0041"`, transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: `"\u0041"`}},
		{"null", transcript.JSONRPCID{Present: true, Kind: transcript.IDNull, Text: "null"}},
		{`{"a":1}`, transcript.JSONRPCID{Present: true, Kind: transcript.IDOther, Text: `{"a":1}`}},
		{"", transcript.JSONRPCID{Present: false}},
		{long, transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: long}},
		{huge, transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Digest: canon.SHA256([]byte(huge))}},
	}
	for _, tt := range tests {
		h := mustAttempt(t, r, call(tt.id, "t", "", ""))
		tt := tt
		t.Cleanup(func() {
			b := readBundle(t, dir)
			if got := b.attempts[h.ID()].RPCID; got != tt.want {
				t.Errorf("id %.40s recorded as %+v, want %+v", tt.id, got, tt.want)
			}
		})
	}
	if _, err := r.Attempt(context.Background(), Call{Line: []byte(`{"id":1,"id":2,"method":"tools/call","params":{"name":"t"}}`)}); !errors.Is(err, ErrNotToolCall) {
		t.Errorf("repeated id: %v, want ErrNotToolCall", err)
	}
	if _, err := r.Attempt(context.Background(), Call{Line: []byte(`{"id":1,"method":"tools/list"}`)}); !errors.Is(err, ErrNotToolCall) {
		t.Errorf("tools/list: %v, want ErrNotToolCall", err)
	}
	mustSeal(t, r)
}

func TestCorrelationRecordedAfterSafeShapeCheck(t *testing.T) {
	r, dir := openTest(t, nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		meta  string
		field func(c transcript.Correlation) *transcript.CorrValue
		want  transcript.CorrValue
		leak  string // must not appear in the transcript
	}{
		{`{"traceparent":"` + tp + `"}`, func(c transcript.Correlation) *transcript.CorrValue { return c.Traceparent }, transcript.CorrValue{Valid: true, Value: tp}, ""},
		{`{"traceparent":"00-zzzz-secret-01"}`, func(c transcript.Correlation) *transcript.CorrValue { return c.Traceparent }, transcript.CorrValue{Reason: transcript.CorrBadShape}, "zzzz-secret"},
		{`{"tracestate":"vendor=abc"}`, func(c transcript.Correlation) *transcript.CorrValue { return c.Tracestate }, transcript.CorrValue{Valid: true, Value: "vendor=abc"}, ""},
		{`{"dev.tracectl/correlationId":"` + strings.Repeat("L", 129) + `"}`, func(c transcript.Correlation) *transcript.CorrValue { return c.CorrelationID }, transcript.CorrValue{Reason: transcript.CorrTooLong}, strings.Repeat("L", 129)},
		{`{"dev.tracectl/correlationId":"evil\u001b[2Jx"}`, func(c transcript.Correlation) *transcript.CorrValue { return c.CorrelationID }, transcript.CorrValue{Reason: transcript.CorrBadCharset}, "[2Jx"},
		{`{"dev.tracectl/correlationId":{"ssn":"123-45-6789"}}`, func(c transcript.Correlation) *transcript.CorrValue { return c.CorrelationID }, transcript.CorrValue{Reason: transcript.CorrNotString}, "123-45-6789"},
		{`{"dev.tracectl/correlationId":42}`, func(c transcript.Correlation) *transcript.CorrValue { return c.CorrelationID }, transcript.CorrValue{Reason: transcript.CorrNotString}, ""},
		{`{"dev.tracectl/correlationId":"ok_ID-1"}`, func(c transcript.Correlation) *transcript.CorrValue { return c.CorrelationID }, transcript.CorrValue{Valid: true, Value: "ok_ID-1"}, ""},
		{`{}`, func(c transcript.Correlation) *transcript.CorrValue { return c.CorrelationID }, transcript.CorrValue{}, ""},
	}
	var handles []*Handle
	for i, tt := range tests {
		handles = append(handles, mustAttempt(t, r, call(fmt.Sprint(i), "t", "", tt.meta)))
	}
	r.Close()
	b := readBundle(t, dir)
	for i, tt := range tests {
		got := tt.field(b.attempts[handles[i].ID()].Correlation)
		if got == nil {
			got = &transcript.CorrValue{}
		}
		if *got != tt.want {
			t.Errorf("%s: recorded %+v, want %+v", tt.meta, *got, tt.want)
		}
		if tt.leak != "" && contains(b.lines, tt.leak) {
			t.Errorf("%s: the invalid raw value reached the transcript", tt.meta)
		}
	}
}

func TestObservationRules(t *testing.T) {
	r, dir := openTest(t, nil)
	h := mustAttempt(t, r, call("1", "t", "", ""))
	if err := h.LateResponse(result("1", "")); !errors.Is(err, ErrObservation) {
		t.Errorf("LateResponse without a timeout = %v, want ErrObservation", err)
	}
	if err := h.Timeout(); err != nil {
		t.Fatal(err)
	}
	if err := h.Timeout(); !errors.Is(err, ErrObservation) {
		t.Errorf("second Timeout = %v", err)
	}
	if err := h.LateResponse(result("1", "")); err != nil {
		t.Fatal(err)
	}
	if err := h.Response(result("1", "")); !errors.Is(err, ErrObservation) {
		t.Errorf("second response = %v, want ErrObservation", err)
	}
	if err := h.TransportFailure("x"); !errors.Is(err, ErrObservation) {
		t.Errorf("transport failure after a response = %v, want ErrObservation", err)
	}
	e := mustAttempt(t, r, call("2", "t", "", ""))
	if err := e.Response([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad"}}`)); err != nil {
		t.Fatal(err)
	}
	f := mustAttempt(t, r, call("3", "t", "", ""))
	f.Response([]byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true}}` + "\r\n"))
	// Timed out, then cancelled, then the server went away: all kept; a
	// transport failure, never a response.
	g := mustAttempt(t, r, call("4", "t", "", ""))
	for _, err := range []error{g.Timeout(), g.CancelSent(), g.TransportFailure("server exited")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := g.LateResponse(result("4", "")); !errors.Is(err, ErrObservation) {
		t.Errorf("late response after a transport failure = %v", err)
	}
	mustSeal(t, r)
	b := readBundle(t, dir)
	if o := b.obs["a1"]; len(o) != 2 || o[0].Kind != transcript.ObsTimeout || o[1].Kind != transcript.ObsLateResponse {
		t.Errorf("a1 history %+v", o)
	}
	if o := b.obs["a2"][0]; o.ResultType != transcript.ResultTypeError || o.ErrorCode == nil || *o.ErrorCode != -32602 || o.Terminator != mcpwire.TermNone {
		t.Errorf("error response %+v", o)
	}
	if o := b.obs["a3"][0]; !o.IsError || o.ResultType != "complete" || o.Terminator != mcpwire.TermCRLF {
		t.Errorf("isError response %+v", o)
	}
	if s := b.seal(); s.Responses != 3 || s.Unknown != 0 || s.TransportFailures != 1 {
		t.Errorf("seal %+v: a late response counts as a response, a transport failure after a timeout as a transport failure", s)
	}
}

func TestSnapshotBinding(t *testing.T) {
	r, dir := openTest(t, func(o *Options) { o.Retention = transcript.RetainDigest })
	ctx := context.Background()
	a0 := mustAttempt(t, r, call("0", "t", "", ""))
	manifest := []byte(`{"format":"test-manifest","pages":1}`)
	page := []byte(`{"jsonrpc":"2.0","id":9,"result":{"tools":[]}}`)
	s1, err := r.RecordSnapshot(Snapshot{Manifest: manifest, Digest: canon.SHA256(manifest), Complete: true, Tools: 0, Pages: 1, Blobs: [][]byte{page}})
	if err != nil {
		t.Fatal(err)
	}
	a1 := mustAttempt(t, r, call("1", "t", "", ""))
	if err := r.RecordNotification(Notification{Line: []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n"), Direction: transcript.ServerToClient}); err != nil {
		t.Fatal(err)
	}
	a2 := mustAttempt(t, r, call("2", "t", "", ""))
	m2 := []byte(`{"format":"test-manifest","pages":2}`)
	s2, err := r.RecordSnapshot(Snapshot{Manifest: m2, Digest: canon.SHA256(m2), IncompleteReason: "repeated_cursor", Pages: 2})
	if err != nil {
		t.Fatal(err)
	}
	a3 := mustAttempt(t, r, call("3", "t", "", ""))
	a4, err := r.Attempt(ctx, Call{Line: call("4", "t", "", ""), Snapshot: s1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Attempt(ctx, Call{Line: call("5", "t", "", ""), Snapshot: "s99"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unknown snapshot: %v", err)
	}
	if _, err := r.RecordSnapshot(Snapshot{Manifest: m2, Digest: canon.SHA256(manifest), Complete: true}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("digest of other bytes: %v", err)
	}
	mustSeal(t, r)
	b := readBundle(t, dir)
	d1, d2 := canon.SHA256(manifest), canon.SHA256(m2)
	tests := []struct {
		h    *Handle
		want transcript.SnapshotRef
	}{
		{a0, transcript.SnapshotRef{NoneReason: transcript.NoneNoSnapshot}},
		{a1, transcript.SnapshotRef{SnapshotID: s1, ManifestDigest: d1, Complete: true}},
		{a2, transcript.SnapshotRef{SnapshotID: s1, ManifestDigest: d1, Complete: true, ListChangedSince: true}},
		{a3, transcript.SnapshotRef{SnapshotID: s2, ManifestDigest: d2}},
		{a4, transcript.SnapshotRef{SnapshotID: s1, ManifestDigest: d1, Complete: true, ListChangedSince: true}},
	}
	for _, tt := range tests {
		if got := b.attempts[tt.h.ID()].Snapshot; got != tt.want {
			t.Errorf("%s binds %+v, want %+v", tt.h.ID(), got, tt.want)
		}
	}
	// Digest retention drops payloads but never snapshot pages.
	for _, blob := range [][]byte{manifest, page, m2} {
		if _, err := readPayload(dir, canon.SHA256(blob)); err != nil {
			t.Errorf("snapshot blob missing: %v", err)
		}
	}
	if a := b.attempts["a1"]; a.Request.Retained {
		t.Errorf("request retained under digest retention")
	}
	if _, err := readPayload(dir, b.attempts["a1"].Request.Digest); !errors.Is(err, transcript.ErrPayloadMissing) {
		t.Errorf("request blob written under digest retention")
	}
}

func TestProtocolAndNotifications(t *testing.T) {
	r, dir := openTest(t, nil)
	init := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"srv","version":"1.2"}}}`)
	if err := r.RecordProtocol(Protocol{Era: mcpwire.EraLegacy, Version: "2025-11-25", Source: transcript.SourceInitialize, ServerName: "srv", ServerVersion: "1.2", Line: init}); err != nil {
		t.Fatal(err)
	}
	h := mustAttempt(t, r, call(`"x-1"`, "t", "", ""))
	mal := mustAttempt(t, r, call("2", "t", "", `{"io.modelcontextprotocol/protocolVersion":7}`))
	if err := r.RecordNotification(Notification{Line: []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x-1","reason":"user"}}`), Direction: transcript.ClientToServer}); err != nil {
		t.Fatal(err)
	}
	if err := h.CancelSent(); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordNotification(Notification{Line: []byte(`{"jsonrpc":"2.0"}`), Direction: transcript.ServerToClient}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("notification without method: %v", err)
	}
	mal.Response(result("2", ""))
	mustSeal(t, r)
	b := readBundle(t, dir)
	if p := b.attempts[h.ID()].Protocol; p != (transcript.AttemptProto{Era: mcpwire.EraLegacy, State: transcript.ProtoNegotiated, Value: "2025-11-25"}) {
		t.Errorf("negotiated protocol = %+v", p)
	}
	if p := b.attempts[mal.ID()].Protocol; p != (transcript.AttemptProto{Era: mcpwire.EraLegacy, State: transcript.ProtoMalformed}) {
		t.Errorf("malformed protocol = %+v", p)
	}
	var cancelled *transcript.Notification
	for _, ev := range b.events {
		if n, ok := ev.(*transcript.Notification); ok {
			cancelled = n
		}
	}
	if cancelled == nil || cancelled.AttemptID != h.ID() || cancelled.RequestID.Text != `"x-1"` {
		t.Errorf("cancelled notification = %+v", cancelled)
	}
	if s := b.seal(); s.Unknown != 1 || s.Responses != 1 {
		t.Errorf("seal %+v", s)
	}
}

func TestFrameLimit(t *testing.T) {
	r, dir := openTest(t, func(o *Options) { o.Limits.MaxFrameBytes = 200 })
	h := mustAttempt(t, r, call("1", "t", `{"blob":"`+strings.Repeat("z", 300)+`"}`, ""))
	h.Response(result("1", ""))
	mustSeal(t, r)
	b := readBundle(t, dir)
	a := b.attempts["a1"]
	if !a.Request.OverLimit || a.Request.Retained || a.Request.Length <= 200 {
		t.Errorf("over-limit request payload %+v", a.Request)
	}
	if o := b.obs["a1"][0]; !o.Response.Retained {
		t.Errorf("a small response is retained: %+v", o.Response)
	}
}

func TestStdioServer(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "srv")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700)
	s, err := StdioServer(nil, exe, []string{"--token", "s3cret"}, "demo")
	if err != nil {
		t.Fatal(err)
	}
	// The argv is counted, never committed by an unsalted digest that
	// would let anyone confirm a guessed secret in it.
	if s.ExecutableSHA256 != canon.SHA256([]byte("#!/bin/sh\n")) || s.ArgsDigest != "" || s.Argc != 2 || s.Transport != transcript.TransportStdio {
		t.Errorf("server = %+v", s)
	}
	if _, err := StdioServer(nil, exe, []string{"\xff"}, ""); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("non-UTF-8 argument: %v", err)
	}
	o := testOptions(t)
	o.Server = s
	dir := filepath.Join(t.TempDir(), "b")
	r, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if b := readBundle(t, dir); contains(b.lines, "s3cret") {
		t.Errorf("a server argument reached the transcript")
	}
}
