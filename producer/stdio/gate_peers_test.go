package stdio

// The reference-monitor property against real, lenient servers: no tools/call
// reaches the server unless the transcript recorded it. Each server below
// parses the way real servers do (case-insensitive member names, the last of
// repeated members, NaN, BOMs, bare CRs as line ends, batches, deep nesting,
// invalid UTF-8, a last line without LF), and logs every tools/call it
// dispatches. Every hostile frame is sent through the recording proxy; then
// what the server executed must be a sub-multiset of what the transcript
// recorded, the ordinary call sent alongside must have been executed and
// recorded, and the sealed bundle must verify.
//
// TestGatePeersHostileFramesLive runs the same frames straight at the servers,
// without the proxy, to show they are not inert: each class makes some real
// server execute a call.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
)

// gatePeer is a real server the gate tests run.
type gatePeer struct {
	name string
	// command returns the server's command line; with a call log path it
	// logs every tools/call it dispatches there (hasLog).
	command func(t *testing.T, callLog string) (string, []string)
	hasLog  bool
	// listChangedAfterInit: the server registers a tool once initialized
	// and says so; list after that, or the snapshot would be stale.
	listChangedAfterInit bool
}

func gatePeers() []gatePeer {
	logArgs := func(callLog string) []string { return []string{"-call-log", callLog} }
	return []gatePeer{
		{name: "jsonserver", hasLog: true, command: func(t *testing.T, callLog string) (string, []string) {
			return mcptest.Build(t, "jsonserver"), logArgs(callLog)
		}},
		{name: "pyserver", hasLog: true, command: func(t *testing.T, callLog string) (string, []string) {
			py := gatePython3(t)
			root, err := mcptest.RepoRoot()
			if err != nil {
				t.Fatal(err)
			}
			return py, append([]string{filepath.Join(root, "internal", "mcptest", "pyserver", "server.py")}, logArgs(callLog)...)
		}},
		{name: "sdklogserver", hasLog: true, command: func(t *testing.T, callLog string) (string, []string) {
			return mcptest.Build(t, "sdklogserver"), logArgs(callLog)
		}},
		{name: "everything", listChangedAfterInit: true, command: func(t *testing.T, _ string) (string, []string) {
			return mcptest.EverythingBin(t), nil
		}},
	}
}

func gatePython3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH: the Python test server (internal/mcptest/pyserver) cannot run")
	}
	return p
}

// The ordinary call every session makes (okCall, answering okID, executing
// okKey), the arguments of the hostile calls, and how deep too_deep nests.
const (
	okID        = `"ok"`
	okCall      = `{"jsonrpc":"2.0","id":"ok","method":"tools/call","params":{"name":"echo","arguments":{"message":"ordinary"}}}`
	hostileArgs = `{"message":"hostile"}`
	deepNest    = 1100 // levels of arrays inside arguments: past mcpwire.MaxFrameDepth
)

var okKey = callKey("echo", json.RawMessage(`{"message":"ordinary"}`))

// gateCall is a tools/call line body with the given id, name and arguments
// JSON texts.
func gateCall(id, name, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":` + name + `,"arguments":` + args + `}}`
}

// hostileCase is one class of frame a lenient server may read as a tools/call
// that a strict reader does not see as that call (or cannot read at all).
// Hostile calls use ids starting with "h".
type hostileCase struct {
	name   string
	frames string // exact bytes written, terminators included
	// last: written after the ordinary call was answered, immediately
	// before the client closes its side.
	last bool
}

func hostileCases() []hostileCase {
	lf := func(s ...string) string { return strings.Join(s, "\n") + "\n" }
	deep := strings.Repeat("[", deepNest) + strings.Repeat("]", deepNest)
	if deepNest <= mcpwire.MaxFrameDepth {
		panic("deepNest must exceed the gate's depth limit")
	}
	return []hostileCase{
		{name: "nan", frames: lf(gateCall(`"h"`, `"echo"`, `{"message":"hostile","n":NaN}`))},
		{name: "infinity", frames: lf(gateCall(`"h"`, `"echo"`, `{"message":"hostile","p":Infinity,"m":-Infinity}`))},
		{name: "bom", frames: "\xEF\xBB\xBF" + lf(gateCall(`"h"`, `"echo"`, hostileArgs))},
		{name: "case_Method", frames: lf(`{"jsonrpc":"2.0","id":"h","Method":"tools/call","params":{"name":"echo","arguments":` + hostileArgs + `}}`)},
		// A strict reader sees a ping; a case-insensitive one takes the
		// last of the two, tools/call.
		{name: "case_METHOD_after_method", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"ping","METHOD":"tools/call","params":{"name":"echo","arguments":` + hostileArgs + `}}`)},
		{name: "case_ID", frames: lf(`{"jsonrpc":"2.0","ID":"h","method":"tools/call","params":{"name":"echo","arguments":` + hostileArgs + `}}`)},
		{name: "case_Params", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"tools/call","Params":{"name":"echo","arguments":` + hostileArgs + `}}`)},
		{name: "case_Name", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"Name":"echo","arguments":` + hostileArgs + `}}`)},
		{name: "case_Arguments", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"echo","Arguments":` + hostileArgs + `}}`)},
		{name: "duplicate_method", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"ping","method":"tools/call","params":{"name":"echo","arguments":` + hostileArgs + `}}`)},
		{name: "duplicate_name", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"other","name":"echo","arguments":` + hostileArgs + `}}`)},
		{name: "duplicate_arguments", frames: lf(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"echo","arguments":{"message":"decoy"},"arguments":` + hostileArgs + `}}`)},
		{name: "pretty_printed", frames: lf(
			`{`,
			`  "jsonrpc": "2.0",`,
			`  "id": "h",`,
			`  "method": "tools/call",`,
			`  "params": {`,
			`    "name": "echo",`,
			`    "arguments": {"message": "hostile"}`,
			`  }`,
			`}`)},
		{name: "bare_cr_two_messages", frames: `{"jsonrpc":"2.0","id":"p","method":"ping"}` + "\r" + lf(gateCall(`"h"`, `"echo"`, hostileArgs))},
		{name: "batch", frames: lf(`[` + gateCall(`"h"`, `"echo"`, hostileArgs) + `]`)},
		{name: "too_deep", frames: lf(gateCall(`"h"`, `"echo"`, `{"message":"hostile","deep":`+deep+`}`))},
		{name: "invalid_utf8_name", frames: lf(gateCall(`"h"`, "\"ech\xffo\"", hostileArgs))},
		{name: "invalid_utf8_arguments", frames: lf(gateCall(`"h"`, `"echo"`, "{\"message\":\"host\xffile\"}"))},
		{name: "unterminated_last", frames: gateCall(`"h"`, `"echo"`, hostileArgs), last: true},
	}
}

// TestGatePeersHostileFrames: for each real server and each hostile class, a
// recorded session through the proxy. What the server executed (its call log;
// for server-everything, which has none, its successful tools/call
// responses) is a sub-multiset of the recorded attempts, the ordinary call
// was executed and recorded, and the bundle verifies.
func TestGatePeersHostileFrames(t *testing.T) {
	t.Parallel()
	for _, peer := range gatePeers() {
		t.Run(peer.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range hostileCases() {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					runHostile(t, peer, tc)
				})
			}
		})
	}
}

func runHostile(t *testing.T, peer gatePeer, tc hostileCase) {
	callLog := filepath.Join(t.TempDir(), "calls.jsonl")
	cmd, args := peer.command(t, callLog)
	w := startWrap(t, wrapOpts{}, cmd, args...)
	c := w.raw()
	c.gateHandshake(peer)
	c.gateList()
	if !tc.last {
		c.writeRaw(tc.frames)
	}
	c.send(okCall)
	ok := c.waitID(okID)
	if ok.Error != nil || !isToolSuccess(ok.Result) {
		t.Fatalf("the ordinary call was not answered with a result: %s", ok.raw)
	}
	if !strings.Contains(string(ok.Result), "ordinary") {
		t.Fatalf("the ordinary call's result does not echo its arguments: %s", ok.raw)
	}
	if tc.last {
		c.writeRaw(tc.frames)
	}
	w.end()
	w.seal()

	j := readJournal(t, w.dir)
	rec := recordedCalls(t, w.dir, j)

	// (a) the server executed nothing the transcript does not record.
	if peer.hasLog {
		executed := readCallLog(t, callLog)
		if extra := notRecorded(executed, rec.keys()); len(extra) > 0 {
			t.Errorf("the server executed %d call(s) the transcript does not record:\n  %s\nrecorded:\n  %s",
				len(extra), strings.Join(extra, "\n  "), strings.Join(rec.keys(), "\n  "))
		}
		// (b) ... and it did execute the ordinary call.
		if !slices.Contains(executed, okKey) {
			t.Errorf("the server's call log has no %s: %q", okKey, executed)
		}
	}
	// (a) again, from what the client received: every successful
	// tools/call response proves an execution, which must be a recorded
	// attempt with that id.
	for _, id := range executedByResponse(w.got.Bytes()) {
		if !slices.Contains(rec.ids, id) {
			t.Errorf("the client received a successful tools/call response for id %s, which no attempt records (attempt ids %q)", id, rec.ids)
		}
	}
	// (b) the ordinary call is recorded, answered, and is what was executed.
	a := j.attemptFor(t, okID)
	if a.Tool != "echo" || rec.byAttempt[a.AttemptID] != okKey {
		t.Errorf("the ordinary call's attempt %s records %s (tool %q), want %s", a.AttemptID, rec.byAttempt[a.AttemptID], a.Tool, okKey)
	}
	if h := j.history(a.AttemptID); h != transcript.ObsResponse {
		t.Errorf("the ordinary call's attempt %s: history %q, want %q", a.AttemptID, h, transcript.ObsResponse)
	}
	// (c) the bundle verifies.
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// TestGatePeersHostileFramesLive runs every hostile class straight at the
// servers that log their calls, without the proxy, and records which of them
// execute a call other than the ordinary one. It pins the two hand-written
// servers' leniency (if they stopped executing these frames,
// TestGatePeersHostileFrames would prove nothing) and requires every class
// to be acted on by at least one server. It logs the full matrix.
func TestGatePeersHostileFramesLive(t *testing.T) {
	t.Parallel()
	// The classes each hand-written server executes, by design (see their
	// package documentation); the Go SDK's are only logged.
	want := map[string][]string{
		"jsonserver": {
			"case_Method", "case_METHOD_after_method", "case_ID", "case_Params", "case_Name", "case_Arguments",
			"duplicate_method", "duplicate_name", "duplicate_arguments", "batch", "too_deep",
			"invalid_utf8_name", "invalid_utf8_arguments", "unterminated_last",
		},
		"pyserver": {
			"nan", "infinity", "bom", "case_ID", "case_Params", "case_Name", "case_Arguments",
			"duplicate_method", "duplicate_name", "duplicate_arguments", "bare_cr_two_messages", "batch",
			"invalid_utf8_name", "invalid_utf8_arguments", "unterminated_last",
		},
	}
	// Classes whose outcome depends on the interpreter's version: Python's
	// json recursion limit differs between releases.
	unpinned := map[string][]string{"pyserver": {"too_deep"}}
	cases := hostileCases()
	var (
		mu   sync.Mutex
		live = map[string]map[string]bool{} // case -> peer -> executed
		ran  []string                       // peers that ran (not skipped)
	)
	for _, tc := range cases {
		live[tc.name] = map[string]bool{}
	}
	// t.Run returns once its parallel subtests have all ended.
	t.Run("direct", func(t *testing.T) {
		for _, peer := range gatePeers() {
			if !peer.hasLog {
				continue
			}
			for _, tc := range cases {
				t.Run(peer.name+"/"+tc.name, func(t *testing.T) {
					t.Parallel()
					executed := runDirect(t, peer, tc)
					mu.Lock()
					defer mu.Unlock()
					live[tc.name][peer.name] = slices.ContainsFunc(executed, func(k string) bool { return k != okKey })
					if !slices.Contains(ran, peer.name) {
						ran = append(ran, peer.name)
					}
				})
			}
		}
	})
	slices.Sort(ran)
	var b strings.Builder
	for _, tc := range cases {
		var by []string
		for _, p := range ran {
			if live[tc.name][p] {
				by = append(by, p)
			}
		}
		fmt.Fprintf(&b, "  %-26s executed by %s\n", tc.name, strings.Join(by, ", "))
		if len(by) == 0 && slices.Contains(ran, "jsonserver") && slices.Contains(ran, "pyserver") {
			t.Errorf("hostile class %s: no server executed it; the gate test of it proves nothing", tc.name)
		}
	}
	t.Logf("hostile classes, executed without the proxy:\n%s", b.String())
	for peer, classes := range want {
		if !slices.Contains(ran, peer) {
			continue
		}
		for _, tc := range cases {
			if slices.Contains(unpinned[peer], tc.name) {
				continue
			}
			if got, exp := live[tc.name][peer], slices.Contains(classes, tc.name); got != exp {
				t.Errorf("%s without the proxy: executed %s = %v, want %v", peer, tc.name, got, exp)
			}
		}
	}
}

// runDirect sends the handshake, the hostile frames and the ordinary call
// straight to the server and returns its call log once it exited.
func runDirect(t *testing.T, peer gatePeer, tc hostileCase) []string {
	callLog := filepath.Join(t.TempDir(), "calls.jsonl")
	cmd, args := peer.command(t, callLog)
	c := mcptest.StartRaw(t, cmd, args...)
	died := false
	send := func(s string) {
		t.Helper()
		if err := c.Write([]byte(s)); err != nil {
			if !errors.Is(err, syscall.EPIPE) {
				t.Fatal(err)
			}
			died = true // the server exited of an earlier hostile frame
		}
	}
	waitID := func(id string) bool {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			l, err := c.Recv(time.Until(deadline))
			if err != nil {
				return false
			}
			if slices.Contains(responseIDs(l), id) {
				return true
			}
		}
	}
	send(initLine + "\n")
	if !waitID("0") {
		t.Fatalf("no initialize response\nstderr:\n%s", c.Stderr())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	if !tc.last {
		send(tc.frames)
	}
	send(okCall + "\n")
	// A server may die of a hostile frame: then the ordinary call is not
	// answered, which only matters to the proxied test.
	answered := waitID(okID)
	if tc.last {
		send(tc.frames)
	}
	if err := c.CloseStdin(); err != nil && !died {
		t.Fatal(err)
	}
	if err := c.Wait(10 * time.Second); errors.Is(err, mcptest.ErrTimeout) {
		t.Fatalf("the server did not exit after stdin closed")
	}
	executed := readCallLog(t, callLog)
	if !answered {
		t.Logf("%s did not answer the ordinary call after %s\nstderr:\n%s", peer.name, tc.name, c.Stderr())
	}
	return executed
}

// TestGateRefusesHugeClientFrame: a 70 MiB tools/call from the client is over
// the gate's frame limit: it is not forwarded, not even in part (the server
// logs the length of every line it reads), the session goes on, and the
// bundle verifies.
func TestGateRefusesHugeClientFrame(t *testing.T) {
	dir := t.TempDir()
	callLog, lineLog := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "lines.jsonl")
	// The frame limit is raised above the frame and redaction is off (a
	// frame too long to redact is withheld otherwise), so the refused bytes
	// are retained (through the spool) and the bundle verifies in full.
	w := startWrap(t, wrapOpts{maxFrame: 128 << 20, noRedact: true}, mcptest.Build(t, "jsonserver"), "-call-log", callLog, "-line-log", lineLog)
	c := w.raw()
	c.gateHandshake(gatePeer{})
	c.gateList()
	huge := gateCall(`"huge"`, `"echo"`, `{"message":"`+strings.Repeat("x", 70<<20)+`"}`) + "\n"
	if int64(len(huge)) <= mcpwire.MaxFrameBytes {
		t.Fatalf("the huge frame (%d bytes) is not over the gate's limit (%d)", len(huge), mcpwire.MaxFrameBytes)
	}
	c.writeTimeout(huge, 60*time.Second)
	c.send(okCall)
	if ok := c.waitID(okID); ok.Error != nil || !isToolSuccess(ok.Result) {
		t.Fatalf("the ordinary call after the huge frame: %s", ok.raw)
	}
	w.end()
	w.seal()

	var total int64
	for _, e := range readLineLog(t, lineLog) {
		if e.In == nil {
			continue
		}
		total += *e.In
		if *e.In > 64<<10 {
			t.Errorf("the server read a line of %d bytes: (part of) the huge frame was forwarded", *e.In)
		}
	}
	if total == 0 || total > 1<<20 {
		t.Errorf("the server read %d bytes in all, want a handful of ordinary lines", total)
	}
	j := readJournal(t, w.dir)
	hugeBody := strings.TrimSuffix(huge, "\n")
	if !commitsTo(j, canon.SHA256([]byte(hugeBody)), int64(len(hugeBody))) {
		t.Errorf("no transcript line commits to the refused huge frame (%d bytes, over_limit)", len(hugeBody))
	}
	rec := recordedCalls(t, w.dir, j)
	executed := readCallLog(t, callLog)
	if extra := notRecorded(executed, rec.keys()); len(extra) > 0 {
		t.Errorf("the server executed calls the transcript does not record: %.200q", extra)
	}
	if !slices.Equal(executed, []string{okKey}) {
		t.Errorf("the server executed %.200q, want only %s", executed, okKey)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// TestGateBindsHugeServerFrame: a ~70 MiB tools/call response is over the
// gate's 64 MiB frame limit, but it begins as the answer to the call
// waiting for it: it is spooled whole, read by the gate from the spool
// (mcpwire.ReadLarge), bound as that call's response and delivered to the
// client byte for byte as the server wrote it (its digest from the
// server's own log); the calls after it go on, and the bundle verifies.
func TestGateBindsHugeServerFrame(t *testing.T) {
	dir := t.TempDir()
	callLog, lineLog := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "lines.jsonl")
	w := startWrap(t, wrapOpts{maxFrame: 128 << 20, noRedact: true}, mcptest.Build(t, "jsonserver"), "-call-log", callLog, "-line-log", lineLog)
	c := w.raw()
	c.gateHandshake(gatePeer{})
	c.gateList()
	const n = 70 << 20
	c.send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{"bytes":` + strconv.Itoa(n) + `}}}`)
	// 70 MiB hashed, spooled, read and committed under -race on two loaded
	// cores takes tens of seconds: the bound is for a proxy that never
	// answers.
	got := c.waitForWithin(`the answer to id "big"`, 3*time.Minute, func(l wireLine) bool {
		return len(l.body) > 1<<20 || l.Method == "" && string(l.ID) == `"big"`
	})
	var wrote []lineLogEntry
	for _, e := range readLineLog(t, lineLog) {
		if e.Out != nil && *e.Out > 1<<20 {
			wrote = append(wrote, e)
		}
	}
	if len(wrote) != 1 || *wrote[0].Out <= mcpwire.MaxFrameBytes {
		t.Fatalf("the server wrote %+v, want one line over the gate's limit", wrote)
	}
	if sum := sha256.Sum256(got.body); int64(len(got.body)) != *wrote[0].Out || "sha256:"+hex.EncodeToString(sum[:]) != wrote[0].SHA256 {
		t.Fatalf("the client received %d bytes (%.100s…), not the %d bytes the server wrote", len(got.body), got.body, *wrote[0].Out)
	}
	if !bytes.HasPrefix(got.body, []byte(`{"jsonrpc":"2.0","id":"big","result":`)) {
		t.Fatalf("the big answer begins %.100s", got.body)
	}
	c.send(okCall)
	if ok := c.waitID(okID); ok.Error != nil || !isToolSuccess(ok.Result) {
		t.Fatalf("the ordinary call after the big response: %s", ok.raw)
	}
	w.end()
	w.seal()

	j := readJournal(t, w.dir)
	var bigs []*transcript.Attempt
	for _, a := range j.attempts() {
		if a.RPCID.Text == `"big"` {
			bigs = append(bigs, a)
		}
	}
	if len(bigs) != 1 || bigs[0].Tool != "big" {
		t.Fatalf("attempts under id \"big\": %+v, want the big call", bigs)
	}
	if got := readCallLog(t, callLog); !slices.Equal(got, []string{callKey("big", json.RawMessage(`{"bytes":`+strconv.Itoa(n)+`}`)), okKey}) {
		t.Errorf("the server executed %q", got)
	}
	if h := j.history(bigs[0].AttemptID); h != transcript.ObsResponse {
		t.Errorf("the big call's history %q, want %s", h, transcript.ObsResponse)
	}
	requireVerified(t, verifyBundle(t, w.dir, w.signer.Public()))
}

// commitsTo reports whether some transcript line holds a payload commitment
// to the given digest and length (retained or not), at any depth.
func commitsTo(j *journalView, digest string, length int64) bool {
	var find func(v any) bool
	find = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if d, _ := v["digest"].(string); d == digest {
				if n, ok := v["length"].(json.Number); ok && n.String() == strconv.FormatInt(length, 10) {
					return true
				}
			}
			for _, m := range v {
				if find(m) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(v, find)
		}
		return false
	}
	for _, raw := range j.raw {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil && find(v) {
			return true
		}
	}
	return false
}

// writeRaw writes exact bytes from the client.
func (c *rawConn) writeRaw(b string) {
	c.t.Helper()
	if _, err := c.w.clientW.Write([]byte(b)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// writeTimeout writes exact bytes from the client, failing (not hanging) if
// the proxy does not take them all in time.
func (c *rawConn) writeTimeout(b string, d time.Duration) {
	c.t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := c.w.clientW.Write([]byte(b))
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			c.t.Fatalf("write %d bytes: %v", len(b), err)
		}
	case <-time.After(d):
		c.t.Fatalf("the proxy did not read a %d-byte client frame within %v", len(b), d)
	}
}

// waitID reads lines until a response with the given id text, skipping
// everything else (notifications, the proxy's refusals, other responses).
func (c *rawConn) waitID(id string) wireLine {
	c.t.Helper()
	return c.waitFor("a response with id "+id, func(l wireLine) bool { return l.Method == "" && string(l.ID) == id })
}

// waitFor reads lines until match accepts one. Lines over 1 MiB are not
// decoded: match sees only their raw and body.
func (c *rawConn) waitFor(what string, match func(wireLine) bool) wireLine {
	c.t.Helper()
	return c.waitForWithin(what, 20*time.Second, match)
}

// waitForWithin is waitFor with its own failure bound (not a
// synchronisation: the wait ends at the line).
func (c *rawConn) waitForWithin(what string, bound time.Duration, match func(wireLine) bool) wireLine {
	c.t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		select {
		case raw, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("waiting for %s: the proxy closed the client's stdout\nserver stderr:\n%s", what, c.w.stderr.String())
			}
			body, _ := mcpwire.SplitTerminator(raw)
			l := wireLine{raw: raw, body: body}
			if len(body) > 1<<20 || json.Unmarshal(body, &l) == nil {
				if match(l) {
					return l
				}
			}
		case <-deadline.C:
			c.t.Fatalf("waiting for %s: timeout\nserver stderr:\n%s", what, c.w.stderr.String())
		}
	}
}

// gateHandshake is the legacy handshake, waiting for the initialize response
// by id (servers may write other lines first).
func (c *rawConn) gateHandshake(p gatePeer) {
	c.t.Helper()
	c.send(initLine)
	if r := c.waitID("0"); r.Error != nil || !strings.Contains(string(r.Result), `"protocolVersion"`) {
		c.t.Fatalf("initialize: %s", r.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if p.listChangedAfterInit {
		c.waitFor("notifications/tools/list_changed", func(l wireLine) bool { return l.Method == mcpwire.NotifyToolsListChanged })
	}
}

// gateList lists every tools/list page; echo must be among the tools.
func (c *rawConn) gateList() {
	c.t.Helper()
	cursor := ""
	var names []string
	for page := 1; page <= 100; page++ {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":` + strconv.Quote(cursor) + `}`
		}
		id := `"l` + strconv.Itoa(page) + `"`
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":` + params + `}`)
		r := c.waitID(id)
		var res struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			c.t.Fatalf("tools/list page %d: %s", page, r.raw)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == "" {
			if !slices.Contains(names, "echo") {
				c.t.Fatalf("tools/list: no echo among %q", names)
			}
			return
		}
		cursor = res.NextCursor
	}
	c.t.Fatal("tools/list: more than 100 pages")
}

// isToolSuccess reports whether result is a tools/call result (it has content)
// that is not a tool error: evidence that the tool ran.
func isToolSuccess(result json.RawMessage) bool {
	var r struct {
		Content []json.RawMessage `json:"content"`
		IsError bool              `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.Content != nil && !r.IsError
}

// callKey normalizes a tools/call: the tool name and the arguments decoded
// with UseNumber and re-encoded by json.Marshal (sorted members, number text
// kept). Absent arguments are null; arguments that do not decode keep their
// text, marked, and match nothing decodable.
func callKey(name string, args json.RawMessage) string {
	norm := "null"
	if len(args) > 0 {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			norm = "undecodable:" + strconv.Quote(string(args))
		} else if b, err := json.Marshal(v); err != nil {
			norm = "unencodable:" + strconv.Quote(string(args))
		} else {
			norm = string(b)
		}
	}
	return strconv.Quote(name) + " " + norm
}

// readCallLog reads a server's call log (absent: no calls) as call keys.
func readCallLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var e struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Python writes NaN as NaN: such a call matches no recorded one.
			keys = append(keys, "unparseable log line: "+strconv.Quote(sc.Text()))
			continue
		}
		name := ""
		if e.Name != nil {
			name = *e.Name
		}
		keys = append(keys, callKey(name, e.Arguments))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("call log %s: %v", path, err)
	}
	return keys
}

type lineLogEntry struct {
	In     *int64 `json:"in"`
	Out    *int64 `json:"out"`
	SHA256 string `json:"sha256"`
}

func readLineLog(t *testing.T, path string) []lineLogEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []lineLogEntry
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var e lineLogEntry
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("line log %s: %q: %v", path, l, err)
		}
		out = append(out, e)
	}
	return out
}

// recordedSet is what the transcript says was called: each attempt's request,
// read back from its retained bytes.
type recordedSet struct {
	byAttempt map[string]string // attempt id -> call key
	order     []string          // attempt ids in transcript order
	ids       []string          // JSON-RPC id texts of the attempts
}

func (r *recordedSet) keys() []string {
	var out []string
	for _, a := range r.order {
		out = append(out, r.byAttempt[a])
	}
	return out
}

// recordedCalls reads every attempt's retained request bytes from the bundle
// (checking them against the attempt's digest and length) and normalizes the
// call they make. The envelope and params are read with exact member names;
// the attempt's own tool must agree with the bytes.
func recordedCalls(t *testing.T, dir string, j *journalView) *recordedSet {
	t.Helper()
	r := &recordedSet{byAttempt: map[string]string{}}
	payloads, err := transcript.OpenPayloads(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer payloads.Close()
	for _, a := range j.attempts() {
		if !a.Request.Retained {
			t.Fatalf("attempt %s: request not retained; the test cannot tell what it calls", a.AttemptID)
		}
		blob, err := payloads.Read(a.Request.Digest, 1<<30)
		if err != nil {
			t.Fatalf("attempt %s: %v", a.AttemptID, err)
		}
		if int64(len(blob)) != a.Request.Length {
			t.Fatalf("attempt %s: %d retained bytes, the line commits to %d", a.AttemptID, len(blob), a.Request.Length)
		}
		body, _ := mcpwire.SplitTerminator(blob)
		key, name, err := requestKey(body)
		if err != nil {
			key = "unreadable recorded request " + a.AttemptID + ": " + err.Error()
		} else if a.ToolInvalid == "" && a.Tool != name {
			t.Errorf("attempt %s records tool %q, but its request bytes name %q", a.AttemptID, a.Tool, name)
		}
		r.byAttempt[a.AttemptID] = key
		r.order = append(r.order, a.AttemptID)
		if a.RPCID.Present {
			r.ids = append(r.ids, a.RPCID.Text)
		}
	}
	return r
}

// requestKey reads a tools/call request with exact member names and returns
// its call key and tool name.
func requestKey(body []byte) (key, name string, err error) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return "", "", err
	}
	var params map[string]json.RawMessage
	if p, ok := env["params"]; ok {
		if err := json.Unmarshal(p, &params); err != nil {
			return "", "", fmt.Errorf("params: %w", err)
		}
	}
	if n, ok := params["name"]; ok {
		if err := json.Unmarshal(n, &name); err != nil {
			return "", "", fmt.Errorf("params.name: %w", err)
		}
	}
	return callKey(name, params["arguments"]), name, nil
}

// notRecorded returns the executed calls left over once each is matched
// with a distinct recorded one.
func notRecorded(executed, recorded []string) []string {
	left := map[string]int{}
	for _, k := range recorded {
		left[k]++
	}
	var extra []string
	for _, k := range executed {
		if left[k] == 0 {
			extra = append(extra, k)
			continue
		}
		left[k]--
	}
	return extra
}

// executedByResponse returns the ids of the successful responses, in the
// client's received bytes, to the tools/call ids the gate tests use ("ok" and
// ids starting with "h"); a batch response is read element by element.
func executedByResponse(got []byte) []string {
	var ids []string
	for _, line := range bytes.SplitAfter(got, []byte("\n")) {
		body, _ := mcpwire.SplitTerminator(line)
		var msgs []json.RawMessage
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			if json.Unmarshal(body, &msgs) != nil {
				continue
			}
		} else {
			msgs = []json.RawMessage{body}
		}
		for _, m := range msgs {
			var r struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(m, &r) != nil || r.Method != "" || len(r.Error) > 0 || !isToolSuccess(r.Result) {
				continue
			}
			id := string(r.ID)
			if id == okID || strings.HasPrefix(id, `"h`) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// responseIDs returns the id texts of the responses in one line (an object,
// or a batch of them).
func responseIDs(line []byte) []string {
	body, _ := mcpwire.SplitTerminator(line)
	var msgs []json.RawMessage
	if json.Unmarshal(body, &msgs) != nil {
		msgs = []json.RawMessage{body}
	}
	var ids []string
	for _, m := range msgs {
		var r struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		if json.Unmarshal(m, &r) == nil && r.Method == "" && r.ID != nil {
			ids = append(ids, string(r.ID))
		}
	}
	return ids
}
