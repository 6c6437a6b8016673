package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// Protocol choices for Capture.
const (
	ProtocolAuto   = "auto"   // probe modern with server/discover; fall back to legacy
	ProtocolModern = "modern" // server/discover, then requests carrying the modern _meta
	ProtocolLegacy = "legacy" // initialize + notifications/initialized
)

// Protocol revisions tracectl speaks.
const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
)

// Capture defaults. The probe timeout is what a legacy server that ignores
// server/discover costs; it also covers the server's start-up (a Node server
// on a busy machine takes seconds before it reads its first line), so it is
// not short. The request timeout is long enough for a slow server to build a
// large page.
const (
	DefaultProbeTimeout   = 10 * time.Second
	defaultRequestTimeout = 30 * time.Second
	defaultShutdownGrace  = 2 * time.Second
	// MaxRelistsCeiling bounds CaptureOptions.MaxRelists: a server whose
	// catalog never settles must not keep a capture running forever.
	MaxRelistsCeiling = 10
	// stderrTail is how much of the server's stderr a failed capture quotes.
	stderrTail = 2048
)

// CaptureOptions configure Capture. CaptureID is required.
type CaptureOptions struct {
	CaptureID      string
	Protocol       string // ProtocolAuto (default), ProtocolModern or ProtocolLegacy
	Limits         Limits
	ProbeTimeout   time.Duration // auto: how long server/discover may take before falling back
	RequestTimeout time.Duration // every other request (default 30 s)
	ShutdownGrace  time.Duration // after closing stdin, and again after SIGTERM (default 2 s)
	// MaxRelists is how many times a collection during which the server
	// sent list_changed is given up and started again from the first page
	// (0: never; the snapshot is then incomplete with that reason).
	MaxRelists    int
	ClientName    string    // clientInfo.name (default "tracectl")
	ClientVersion string    // clientInfo.version (default "0")
	Env           []string  // the server's environment (nil: inherit)
	Dir           string    // the server's working directory
	Stderr        io.Writer // receives the server's stderr (nil: discarded; a tail is kept for errors)
	// Progress, when set, is called after each page with the pages and
	// tools collected so far (the CLI shows it on a terminal).
	Progress func(pages, tools int)
	// Clock makes every timer Capture waits on: the probe and request
	// timeouts and the shutdown grace (nil: the real clock). Tests pass
	// one they fire themselves, so a timeout happens when the test says
	// and never because a loaded machine was slow. (os/exec's WaitDelay,
	// the backstop for a grandchild holding stderr open, stays real.)
	Clock Clock
}

// Clock starts timers. It is the only source of time Capture uses.
type Clock interface {
	// NewTimer returns a timer whose channel receives once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a started timer, as time.Timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

type realClock struct{}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// ErrHandshake is wrapped when no tools/list request could be made: the
// server could not be started or did not complete the handshake.
var ErrHandshake = errors.New("mcp handshake failed")

// NewCaptureID returns a capture id made from 16 bytes of entropy.
func NewCaptureID(entropy io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(entropy, b[:]); err != nil {
		return "", fmt.Errorf("capture id: %w", err)
	}
	return "cap-" + hex.EncodeToString(b[:]), nil
}

// Capture starts the stdio MCP server argv, speaks the protocol itself over
// raw JSON-RPC lines (so every byte is the server's own), walks every
// tools/list page, and shuts the server down: stdin closed, then SIGTERM,
// then SIGKILL, each after ShutdownGrace.
//
// With ProtocolAuto it sends server/discover first. A JSON-RPC error, or a
// result that does not offer modernVersion, falls back to legacy on the same
// process (as a dual-era client does). A timeout, a closed transport or an
// unreadable answer falls back on a fresh process: the first one may be
// wedged, and a late answer must not be taken for a page.
//
// A collection that stops early is not an error: the snapshot records why.
// The error is non-nil only when there is no snapshot to record.
func Capture(ctx context.Context, argv []string, o CaptureOptions) (*Snapshot, error) {
	if len(argv) == 0 {
		return nil, errors.New("capture: no server command")
	}
	o = o.withDefaults()
	switch o.Protocol {
	case ProtocolAuto, ProtocolModern, ProtocolLegacy:
	default:
		return nil, fmt.Errorf("capture: unknown protocol %q (want auto, modern or legacy)", o.Protocol)
	}
	if o.MaxRelists < 0 || o.MaxRelists > MaxRelistsCeiling {
		return nil, fmt.Errorf("capture: relists %d outside 0..%d", o.MaxRelists, MaxRelistsCeiling)
	}
	lim := o.Limits.withDefaults()
	if err := lim.check(); err != nil {
		return nil, fmt.Errorf("capture: limits: %w", err)
	}
	s, err := startServer(argv, o, lim.MaxPageBytes)
	if err != nil {
		return nil, err
	}
	defer func() { s.shutdown(o.ShutdownGrace) }()

	var hs handshake
	switch o.Protocol {
	case ProtocolModern:
		hs, err = s.modern(ctx, o, o.RequestTimeout)
	case ProtocolLegacy:
		hs, err = s.legacy(ctx, o)
	case ProtocolAuto:
		hs, err = s.modern(ctx, o, o.ProbeTimeout)
		var nm *notModernError
		switch {
		case err == nil:
		case errors.As(err, &nm):
			hs, err = s.legacy(ctx, o)
		case ctx.Err() != nil:
		default:
			s.shutdown(o.ShutdownGrace)
			fresh, serr := startServer(argv, o, lim.MaxPageBytes)
			if serr != nil {
				return nil, serr
			}
			s = fresh
			hs, err = s.legacy(ctx, o)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w%s", ErrHandshake, err, s.stderrNote())
	}

	for relists := 0; ; relists++ {
		col, err := NewCollector(Options{
			CaptureID: o.CaptureID, Mode: ModeActive, Limits: lim,
			ServerName: hs.name, ServerVersion: hs.version, ServerSource: hs.source,
			Era: hs.era, Version: &hs.protoVersion, ListChangedWatch: hs.watch, Relists: int64(relists),
		})
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		if err := s.collect(ctx, col, hs, o.RequestTimeout); err != nil {
			return nil, err
		}
		// A catalog that changed under the collection is fetched again
		// from the first page, as a client would; the manifest counts the
		// collections given up this way.
		if !col.changed || relists >= o.MaxRelists || col.stop != nil {
			return col.Snapshot()
		}
	}
}

// collect walks the pages into col until it finishes.
func (s *server) collect(ctx context.Context, col *Collector, hs handshake, timeout time.Duration) error {
	s.col = col
	defer func() { s.col = nil }()
	var cursor []byte
	for !col.Finished() {
		req, resp, err := s.call(ctx, "tools/list", hs.params(cursor), timeout)
		doc, perr := s.lastDoc, s.lastErr
		if err != nil {
			reason := StopTransportClosed
			var ol *overLimitError
			switch {
			case errors.As(err, &ol):
				reason = StopPageBytesLimit
			case errors.Is(err, errTimeout):
				reason = StopTimeout
			case ctx.Err() != nil:
				reason = StopCancelled
			}
			col.Stop(reason, fmt.Sprintf("page %d: %v%s", len(col.pages), err, s.stderrNote()))
			return nil
		}
		if err := col.add(req, resp, doc, perr); err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if s.progress != nil {
			s.progress(len(col.pages), len(col.tools))
		}
		cursor, _ = col.nextCursor()
	}
	return nil
}

func (o CaptureOptions) withDefaults() CaptureOptions {
	if o.Protocol == "" {
		o.Protocol = ProtocolAuto
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultRequestTimeout
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = defaultShutdownGrace
	}
	if o.ClientName == "" {
		o.ClientName = "tracectl"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "0"
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	return o
}

// handshake is what the handshake established.
type handshake struct {
	era                         mcpwire.Era
	protoVersion, source, watch string
	name, version               *string
	meta                        []byte // modern: the _meta object every request carries
}

// params returns the tools/list params, with the cursor's exact JSON text.
func (h handshake) params(cursor []byte) []byte {
	var b []byte
	b = append(b, '{')
	if h.meta != nil {
		b = append(b, `"_meta":`...)
		b = append(b, h.meta...)
	}
	if cursor != nil {
		if h.meta != nil {
			b = append(b, ',')
		}
		b = append(b, `"cursor":`...)
		b = append(b, cursor...)
	}
	return append(b, '}')
}

type notModernError struct{ why string }

func (e *notModernError) Error() string { return "server is not modern: " + e.why }

type overLimitError struct{ n, limit int64 }

func (e *overLimitError) Error() string {
	return fmt.Sprintf("a line of at least %d bytes exceeds the %d-byte page limit", e.n, e.limit)
}

var (
	errTimeout = errors.New("no response in time")
	errClosed  = errors.New("server closed its output")
)

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

func (s *server) modern(ctx context.Context, o CaptureOptions, timeout time.Duration) (handshake, error) {
	meta := []byte(`{"io.modelcontextprotocol/protocolVersion":"` + modernVersion + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":`)
	meta = append(meta, jsonString(o.ClientName)...)
	meta = append(meta, `,"version":`...)
	meta = append(meta, jsonString(o.ClientVersion)...)
	meta = append(meta, "}}"...)
	hs := handshake{era: mcpwire.EraModern, protoVersion: modernVersion, source: "discover_response", meta: meta, watch: watchNotOffered}
	_, resp, err := s.call(ctx, "server/discover", []byte(`{"_meta":`+string(meta)+`}`), timeout)
	if err != nil {
		return hs, err
	}
	doc, err := canon.Parse(resp, canon.ParseOptions{AllowDuplicateKeys: true})
	if err != nil {
		return hs, fmt.Errorf("server/discover response: %w", err)
	}
	root := doc.Root()
	if e, st := member(root, "error"); st == statePresent {
		code, _ := member(e, "code")
		return hs, &notModernError{"server/discover answered with error " + string(code.Raw())}
	}
	res, st := member(root, "result")
	if st != statePresent || res.Kind() != canon.KindObject {
		return hs, errors.New("server/discover: response without a result object")
	}
	sv, _ := member(res, "supportedVersions")
	offered := false
	for _, v := range sv.Elems() {
		if s, _ := v.Str(); s == modernVersion {
			offered = true
		}
	}
	if !offered {
		return hs, &notModernError{"server/discover does not offer " + modernVersion}
	}
	meta2, _ := member(res, "_meta")
	info, _ := member(meta2, "io.modelcontextprotocol/serverInfo")
	hs.name, hs.version = strMember(info, "name"), strMember(info, "version")
	caps, _ := member(res, "capabilities")
	tools, _ := member(caps, "tools")
	lc, _ := member(tools, "listChanged")
	if b, _ := lc.Bool(); b {
		// Modern servers deliver list_changed only on a listen stream.
		params := []byte(`{"_meta":` + string(meta) + `,"notifications":{"toolsListChanged":true}}`)
		listenID := []byte(strconv.FormatInt(s.nextID, 10))
		if err := s.send(s.request("subscriptions/listen", params)); err != nil {
			return hs, err
		}
		// The stream stays open; its first message is the acknowledgement.
		// A response to the listen request instead (an error) means no stream.
		hs.watch = watchNotAcked
		acked := false
		err := s.await(ctx, timeout, func(m msg) bool {
			if m.method == "notifications/subscriptions/acknowledged" {
				acked = true
				return true
			}
			return m.response && bytes.Equal(m.id, listenID)
		})
		switch {
		case err == nil && acked:
			hs.watch = WatchSubscribed
		case err != nil && !errors.Is(err, errTimeout):
			return hs, err
		}
	}
	return hs, nil
}

func (s *server) legacy(ctx context.Context, o CaptureOptions) (handshake, error) {
	hs := handshake{era: mcpwire.EraLegacy, source: "initialize_response", watch: watchNotOffered}
	params := []byte(`{"protocolVersion":"` + legacyVersion + `","capabilities":{},"clientInfo":{"name":` +
		string(jsonString(o.ClientName)) + `,"version":` + string(jsonString(o.ClientVersion)) + `}}`)
	_, resp, err := s.call(ctx, "initialize", params, o.RequestTimeout)
	if err != nil {
		return hs, err
	}
	doc, err := canon.Parse(resp, canon.ParseOptions{AllowDuplicateKeys: true})
	if err != nil {
		return hs, fmt.Errorf("initialize response: %w", err)
	}
	res, st := member(doc.Root(), "result")
	if st != statePresent || res.Kind() != canon.KindObject {
		return hs, fmt.Errorf("initialize failed: %s", bounded(resp))
	}
	pv := strMember(res, "protocolVersion")
	if pv == nil {
		return hs, errors.New("initialize result without a protocolVersion string")
	}
	hs.protoVersion = *pv
	info, _ := member(res, "serverInfo")
	hs.name, hs.version = strMember(info, "name"), strMember(info, "version")
	caps, _ := member(res, "capabilities")
	tools, _ := member(caps, "tools")
	lc, _ := member(tools, "listChanged")
	if b, _ := lc.Bool(); b {
		hs.watch = WatchSession
	}
	if err := s.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		return hs, err
	}
	return hs, nil
}

func strMember(obj canon.Value, name string) *string {
	v, st := member(obj, name)
	if st != statePresent {
		return nil
	}
	s, ok := v.Str()
	if !ok {
		return nil
	}
	return &s
}

// server is a running stdio server and the line reader on its stdout.
type server struct {
	cmd      *exec.Cmd
	stdin    *os.File
	stdout   *os.File  // read end, closed at shutdown so the reader never outlives the capture
	lines    chan line // closed when stdout ends
	exited   chan struct{}
	quit     chan struct{}
	stderr   *tail
	nextID   int64
	col      *Collector // receives list_changed once collection starts
	maxLine  int64
	progress func(pages, tools int)
	clock    Clock
	once     sync.Once
	// The parse of the last response call returned, reused by the collector.
	lastDoc *canon.Doc
	lastErr error
}

type line struct {
	b    []byte
	over int64 // > 0: a line this long (at least) was discarded
}

func startServer(argv []string, o CaptureOptions, maxLine int64) (*server, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = o.Env, o.Dir
	cmd.Stdin, cmd.Stdout = inR, outW
	t := &tail{w: o.Stderr}
	cmd.Stderr = t
	cmd.WaitDelay = o.ShutdownGrace
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%w: start %s: %w", ErrHandshake, argv[0], err)
	}
	inR.Close()
	outW.Close()
	s := &server{cmd: cmd, stdin: inW, stdout: outR, lines: make(chan line, 4),
		exited: make(chan struct{}), quit: make(chan struct{}), stderr: t, nextID: 1, maxLine: maxLine, progress: o.Progress, clock: o.Clock}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	go s.read(outR, maxLine)
	return s, nil
}

// read splits stdout into lines (LF removed, nothing else touched). A line
// longer than maxLine is not kept: its length is reported instead.
func (s *server) read(r *os.File, maxLine int64) {
	defer close(s.lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		var buf []byte
		var n int64
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			n += int64(len(frag))
			if n <= maxLine+1 {
				buf = append(buf, frag...)
			} else {
				buf = nil
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if l := len(buf); l > 0 && buf[l-1] == '\n' {
			buf = buf[:l-1]
			n--
		}
		var ln line
		switch {
		case n > maxLine:
			ln.over = n
		case len(buf) > 0:
			ln.b = buf
		}
		if ln.b != nil || ln.over > 0 {
			select {
			case s.lines <- ln:
			case <-s.quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *server) request(method string, params []byte) []byte {
	id := s.nextID
	s.nextID++
	b := make([]byte, 0, 64+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":`...)
	b = append(b, jsonString(method)...)
	b = append(b, `,"params":`...)
	b = append(b, params...)
	return append(b, '}')
}

func (s *server) send(b []byte) error {
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	if _, err := s.stdin.Write(buf); err != nil {
		return fmt.Errorf("write to server: %w", err)
	}
	return nil
}

// call sends one request and returns its exact bytes and the exact bytes of
// the response line that answers it.
func (s *server) call(ctx context.Context, method string, params []byte, timeout time.Duration) (req, resp []byte, err error) {
	req = s.request(method, params)
	id := []byte(strconv.FormatInt(s.nextID-1, 10))
	if err := s.send(req); err != nil {
		return req, nil, err
	}
	err = s.await(ctx, timeout, func(m msg) bool {
		if !m.response {
			return false
		}
		if m.id == nil || bytes.Equal(m.id, id) {
			resp, s.lastDoc, s.lastErr = m.raw, m.doc, m.err
			return true
		}
		return false // an answer to an earlier request (a late discover)
	})
	return req, resp, err
}

// msg is a classified line.
type msg struct {
	raw      []byte
	doc      *canon.Doc // parsed with AllowDuplicateKeys; nil when err is set
	err      error
	response bool   // not a request or notification: a response, or unreadable
	id       []byte // exact id text of a response; nil when unreadable
	method   string
}

// await reads lines until match accepts one, answering server requests and
// recording list_changed on the way.
func (s *server) await(ctx context.Context, timeout time.Duration, match func(msg) bool) error {
	t := s.clock.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case ln, ok := <-s.lines:
			if !ok {
				return errClosed
			}
			if ln.over > 0 {
				return &overLimitError{ln.over, s.maxLine}
			}
			m := classify(ln.b)
			if !m.response && m.method != "" {
				if err := s.handle(m); err != nil {
					return err
				}
			}
			if match(m) {
				return nil
			}
		case <-t.C():
			return errTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func classify(b []byte) msg {
	m := msg{raw: b, response: true}
	doc, err := canon.Parse(b, canon.ParseOptions{AllowDuplicateKeys: true})
	m.doc, m.err = doc, err
	if err != nil || doc.Root().Kind() != canon.KindObject {
		return m // unreadable: taken as the answer, and judged by the collector
	}
	root := doc.Root()
	if v, st := member(root, "method"); st == statePresent {
		if s, ok := v.Str(); ok {
			m.response, m.method = false, s
			if id, st := member(root, "id"); st == statePresent {
				m.id = id.Raw()
			}
			return m
		}
	}
	if id, st := member(root, "id"); st == statePresent && id.Kind() != canon.KindNull {
		m.id = id.Raw()
	}
	return m
}

// handle answers a server-to-client request (ping with an empty result,
// anything else with method not found) and records list_changed.
func (s *server) handle(m msg) error {
	if m.id != nil {
		var b []byte
		if m.method == "ping" {
			b = []byte(`{"jsonrpc":"2.0","id":` + string(m.id) + `,"result":{}}`)
		} else {
			b = []byte(`{"jsonrpc":"2.0","id":` + string(m.id) + `,"error":{"code":-32601,"message":"method not served by tracectl snapshot"}}`)
		}
		return s.send(b)
	}
	// A list_changed before the first page request predates the
	// collection: the pages fetched after it show the changed catalog.
	if m.method == "notifications/tools/list_changed" && s.col != nil {
		s.col.NotifyListChanged()
	}
	return nil
}

// shutdown: close stdin, wait; SIGTERM, wait; SIGKILL.
func (s *server) shutdown(grace time.Duration) {
	s.once.Do(func() {
		// A grandchild may still hold the pipe's write end open: closing the
		// read end at the end unblocks the reader.
		defer s.stdout.Close()
		close(s.quit)
		s.stdin.Close()
		if s.waitExit(grace) {
			return
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		if s.waitExit(grace) {
			return
		}
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// waitExit reports whether the server exits within d.
func (s *server) waitExit(d time.Duration) bool {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C():
		return false
	}
}

func (s *server) stderrNote() string {
	if t := s.stderr.String(); t != "" {
		return "; server stderr ends: " + strconv.Quote(t)
	}
	return ""
}

// tail forwards to w and keeps the last stderrTail bytes.
type tail struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTail {
		t.buf = slices.Clone(t.buf[len(t.buf)-stderrTail:])
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
