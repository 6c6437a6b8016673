// Command rawserver is a tiny MCP server that speaks newline-delimited
// JSON-RPC on stdin/stdout without any SDK, for the cases a real SDK cannot
// produce (bad cursors, duplicate members, numbers that would be coerced, odd
// request ids, dying mid-collection). tracectl's tests run it as a child
// process; it logs only to stderr.
//
// Every response is written as literal bytes built from fixed templates, one
// line each, so tests can compare what they receive byte for byte. Request
// ids are copied as their exact JSON text (never decoded through float64):
// 9007199254740993, -0, 1.5 and "" come back unchanged. A request whose id is
// null, true, an object or an array gets a -32600 error with id null, except
// in the echo-ids script.
//
// # Methods and eras
//
// By default the server is dual-era, decided per request like go-sdk: a
// request whose params._meta holds "io.modelcontextprotocol/protocolVersion"
// is modern (2026-07-28); it must also hold an object under
// "io.modelcontextprotocol/clientCapabilities" (else -32602) and name a
// supported version (else -32022 with data {supported, requested}). Modern
// results carry "resultType", "ttlMs" and "cacheScope" (list and discover
// results) and _meta["io.modelcontextprotocol/serverInfo"]. Requests without
// that _meta get legacy-shaped results (no resultType, no cache fields).
//
//	initialize                 legacy handshake; answers the requested version
//	                           if it is a legacy one, else 2025-11-25
//	notifications/initialized  ignored (so is every notification)
//	server/discover            supportedVersions, capabilities, ttlMs, cacheScope
//	tools/list                 paginated as the script says; unknown cursor -32602
//	tools/call                 {"content":[{"type":"text","text":"called NAME"}]};
//	                           a name not in the listing gives -32602
//	ping                       {}
//	anything else              -32601 (subscriptions/listen included)
//
// The server never sends list_changed and never sends requests. It does not
// require initialize before other requests. The Go SDK client can drive every
// script that answers normally, in both eras (it probes server/discover and
// falls back to initialize on -32601, as with the legacy script).
//
// # Flags
//
//	-script NAME        behaviour, below (default paged)
//	-pages N            pages for paged, empty-cursor, dup-keys, huge-page
//	                    (0: the script's default)
//	-tools-per-page M   tools per page (default 3)
//	-huge-bytes B       minimum size of huge-page's first page (default 20 MiB)
//	-ttl-ms T           ttlMs on modern cacheable results (default 0; 60000
//	                    for the modern script: an SDK client then serves
//	                    repeated tools/list calls from its cache)
//	-cache-scope S      cacheScope on modern cacheable results (public|private)
//	-v                  log every message to stderr
//	-call-delay D       wait D before answering each tools/call
//
// # Scripts (-script NAME)
//
//	paged (default)   -pages N (default 2) pages of -tools-per-page M (default 3)
//	                  tools raw-0000..; cursors "page-2", "page-3", ...
//	empty-cursor      page 1's nextCursor is "" (a valid cursor); the request
//	                  with cursor "" gets the next page; the last page has none
//	repeated-cursor   page 1 says nextCursor "again"; every request with cursor
//	                  "again" returns page 2 with nextCursor "again", forever
//	dup-keys          the second tool of page 1, "raw-dup", has a duplicate
//	                  member name ("a") inside inputSchema.properties; the
//	                  other tools are fine
//	dup-envelope      3 pages; page 1's result has two nextCursor members,
//	                  "page-2" then "page-3" (last-wins parsers skip page 2)
//	coerced-float     tools whose schemas hold "maximum": 0.10000000000000000555
//	                  and "default": 9007199254740993, plus one plain tool
//	extra-members     one tool with an unknown member, an explicit null title,
//	                  empty annotations and empty _meta
//	die-mid-pagination 4 pages; exits with status 1 right after writing page 2
//	huge-page         one page of at least -huge-bytes bytes (default 20 MiB)
//	modern            modern only: server/discover, every request must carry
//	                  the modern _meta (else -32602); initialize gives -32601;
//	                  results carry resultType, ttlMs (-ttl-ms, default 60000),
//	                  cacheScope (-cache-scope, default "public") and serverInfo
//	legacy            legacy only: initialize; server/discover gives -32601;
//	                  the modern _meta is ignored
//	never-answer      reads tools/call but never answers it (other methods are
//	                  answered)
//	close-stdout      answers the first tools/call, then closes stdout and keeps
//	                  reading (and discarding) stdin until EOF, exit status 0
//	close-stdout-unanswered  like close-stdout, but closes stdout on the first
//	                  tools/call without answering it
//	echo-ids          answers every request, whatever its id (null included)
//	                  and whatever its method (unknown methods get {}); a
//	                  tools/call result's text is the exact id text
//	input-required    a tools/call without requestState gets resultType
//	                  "input_required" with inputRequests {"who": elicitation}
//	                  and requestState "step=1"; the re-issued call (new id)
//	                  with requestState "step=1" and inputResponses.who gets a
//	                  complete result "hello NAME"; another state gives -32602
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	modernVersion = "2026-07-28"
	legacyDefault = "2025-11-25"

	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

	serverInfoJSON = `{"name":"tracectl-rawserver","version":"1.0.0"}`

	codeParse              = -32700
	codeInvalidRequest     = -32600
	codeMethodNotFound     = -32601
	codeInvalidParams      = -32602
	codeUnsupportedVersion = -32022
)

// legacyVersions are the versions answered verbatim by initialize.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

var scripts = []string{
	"paged", "empty-cursor", "repeated-cursor", "dup-keys", "dup-envelope",
	"coerced-float", "extra-members", "die-mid-pagination", "huge-page", "modern",
	"legacy", "never-answer", "close-stdout", "close-stdout-unanswered", "echo-ids",
	"input-required",
}

type config struct {
	script     string
	pages      int
	perPage    int
	hugeBytes  int
	ttlMs      int
	cacheScope string
	verbose    bool
	callDelay  time.Duration
	// changedAfter: after each terminal tools/list page, send
	// notifications/tools/list_changed after a pseudo-random delay in
	// [0, changedAfter] (seeded, so a run is reproducible).
	changedAfter time.Duration
	seed         int64
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout *os.File, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("rawserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.script, "script", "paged", "behaviour: "+strings.Join(scripts, ", "))
	fs.IntVar(&cfg.pages, "pages", 0, "number of tools/list pages (0: the script's default)")
	fs.IntVar(&cfg.perPage, "tools-per-page", 3, "tools per page")
	fs.IntVar(&cfg.hugeBytes, "huge-bytes", 20<<20, "minimum size of the huge-page page")
	fs.IntVar(&cfg.ttlMs, "ttl-ms", -1, "ttlMs on modern cacheable results (-1: the script's default)")
	fs.StringVar(&cfg.cacheScope, "cache-scope", "public", "cacheScope on modern cacheable results")
	fs.BoolVar(&cfg.verbose, "v", false, "log every message to stderr")
	fs.DurationVar(&cfg.callDelay, "call-delay", 0, "wait this long before answering each tools/call (requests are still read in order)")
	fs.DurationVar(&cfg.changedAfter, "changed-after", 0, "after each terminal tools/list page, send list_changed within this delay (0: never)")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the -changed-after delays")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	known := false
	for _, s := range scripts {
		known = known || s == cfg.script
	}
	if !known || cfg.pages < 0 || cfg.perPage < 1 || cfg.hugeBytes < 0 || (cfg.cacheScope != "public" && cfg.cacheScope != "private") {
		fmt.Fprintf(stderr, "rawserver: bad flags (script %q; known: %s)\n", cfg.script, strings.Join(scripts, ", "))
		return 2
	}
	if cfg.ttlMs < 0 {
		cfg.ttlMs = 0
		if cfg.script == "modern" {
			cfg.ttlMs = 60000
		}
	}
	s := &server{
		rnd:    rand.New(rand.NewSource(cfg.seed)),
		cfg:    cfg,
		list:   newListing(cfg),
		stdout: stdout,
		out:    bufio.NewWriterSize(stdout, 64<<10),
		log:    stderr,
	}
	return s.serve(bufio.NewReaderSize(stdin, 64<<10))
}

type server struct {
	mu     sync.Mutex // serializes writes: -changed-after writes from timers
	rnd    *rand.Rand
	cfg    config
	list   *listing
	stdout *os.File
	out    *bufio.Writer
	log    io.Writer

	listsServed  int
	callsSeen    int
	stdoutClosed bool
}

func (s *server) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "rawserver: "+format+"\n", args...)
}

func (s *server) serve(in *bufio.Reader) int {
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if code, exit := s.handle(line); exit {
				return code
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.logf("read stdin: %v", err)
				return 1
			}
			return 0
		}
	}
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
}

// era is what the request's _meta says about the protocol revision.
type era struct {
	modern bool
}

// handle answers one line. It reports whether the process must exit now and
// with which status.
func (s *server) handle(line []byte) (int, bool) {
	trimmed := strings.TrimSpace(string(line))
	if trimmed == "" {
		return 0, false
	}
	if s.cfg.verbose {
		s.logf("<- %s", trimmed)
	}
	if s.stdoutClosed {
		s.logf("stdout closed; discarding a message")
		return 0, false
	}
	if trimmed[0] == '[' {
		s.writeError("null", codeInvalidRequest, "batches are not supported", "")
		return 0, false
	}
	var msg message
	if err := json.Unmarshal([]byte(trimmed), &msg); err != nil {
		s.writeError("null", codeParse, "parse error", "")
		return 0, false
	}
	if msg.Method == nil {
		return 0, false // a response from the client: we never send requests
	}
	method := *msg.Method
	if len(msg.ID) == 0 {
		return 0, false // notification
	}
	id := string(msg.ID)
	if !validID(id) && s.cfg.script != "echo-ids" {
		s.writeError("null", codeInvalidRequest, "invalid request id", "")
		return 0, false
	}

	if method == "initialize" {
		s.initialize(id, msg.Params)
		return 0, false
	}
	e, ok := s.era(id, method, msg.Params)
	if !ok {
		return 0, false
	}
	switch method {
	case "server/discover":
		s.discover(id, e)
	case "ping":
		s.writeResult(id, "{}")
	case "tools/list":
		return s.toolsList(id, e, msg.Params)
	case "tools/call":
		if s.cfg.callDelay > 0 {
			time.Sleep(s.cfg.callDelay)
		}
		s.toolsCall(id, e, msg.Params)
	default:
		if s.cfg.script == "echo-ids" {
			s.writeResult(id, "{}")
			return 0, false
		}
		s.writeError(id, codeMethodNotFound, "method not found", "")
	}
	return 0, false
}

// validID reports whether id is a string or a number, the only types we echo
// outside echo-ids.
func validID(id string) bool {
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// era checks the modern _meta of a request. On failure it has already written
// the error response and returns false.
func (s *server) era(id, method string, params json.RawMessage) (era, bool) {
	if s.cfg.script == "legacy" {
		if method == "server/discover" {
			s.writeError(id, codeMethodNotFound, "method not found", "")
			return era{}, false
		}
		return era{}, true
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			s.writeError(id, codeInvalidParams, "invalid params", "")
			return era{}, false
		}
	}
	rawVersion, hasVersion := p.Meta[metaProtocolVersion]
	if !hasVersion {
		if s.cfg.script == "modern" || method == "server/discover" {
			s.writeError(id, codeInvalidParams, `missing _meta "`+metaProtocolVersion+`"`, "")
			return era{}, false
		}
		return era{}, true
	}
	var version string
	if err := json.Unmarshal(rawVersion, &version); err != nil {
		s.writeError(id, codeInvalidParams, `invalid _meta "`+metaProtocolVersion+`"`, "")
		return era{}, false
	}
	if caps := strings.TrimSpace(string(p.Meta[metaClientCapabilities])); !strings.HasPrefix(caps, "{") {
		s.writeError(id, codeInvalidParams, `missing or invalid _meta "`+metaClientCapabilities+`"`, "")
		return era{}, false
	}
	if version != modernVersion {
		requested, _ := json.Marshal(version)
		s.writeError(id, codeUnsupportedVersion, "unsupported protocol version",
			`{"supported":["`+modernVersion+`"],"requested":`+string(requested)+`}`)
		return era{}, false
	}
	return era{modern: true}, true
}

func (s *server) initialize(id string, params json.RawMessage) {
	if s.cfg.script == "modern" {
		s.writeError(id, codeMethodNotFound, "method not found", "")
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p) // a missing or odd version is answered with the default
	version := legacyDefault
	for _, v := range legacyVersions {
		if p.ProtocolVersion == v {
			version = v
		}
	}
	s.writeResult(id, `{"protocolVersion":"`+version+`","capabilities":{"tools":{"listChanged":true}},"serverInfo":`+serverInfoJSON+`}`)
}

func (s *server) discover(id string, e era) {
	versions := `["` + modernVersion + `","` + legacyDefault + `"]`
	if s.cfg.script == "modern" {
		versions = `["` + modernVersion + `"]`
	}
	s.writeResult(id, s.result(e, "complete", true, `"supportedVersions":`+versions+`,"capabilities":{"tools":{"listChanged":true}}`))
}

// result wraps members (without braces) into a result object shaped for the
// era: modern results get resultType first, the cache fields when cacheable,
// and the serverInfo _meta last. resultType "input_required" is written in
// both eras.
func (s *server) result(e era, resultType string, cacheable bool, members string) string {
	var b strings.Builder
	b.WriteByte('{')
	if e.modern || resultType != "complete" {
		b.WriteString(`"resultType":"` + resultType + `",`)
	}
	b.WriteString(members)
	if e.modern {
		if cacheable {
			b.WriteString(`,"ttlMs":` + strconv.Itoa(s.cfg.ttlMs) + `,"cacheScope":"` + s.cfg.cacheScope + `"`)
		}
		b.WriteString(`,"_meta":{"io.modelcontextprotocol/serverInfo":` + serverInfoJSON + `}`)
	}
	b.WriteByte('}')
	return b.String()
}

func (s *server) toolsList(id string, e era, params json.RawMessage) (int, bool) {
	var p struct {
		Cursor json.RawMessage `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			s.writeError(id, codeInvalidParams, "invalid params", "")
			return 0, false
		}
	}
	page := 0
	if len(p.Cursor) > 0 {
		var cursor string
		if err := json.Unmarshal(p.Cursor, &cursor); err != nil {
			s.writeError(id, codeInvalidParams, "invalid cursor", "")
			return 0, false
		}
		i, ok := s.list.cursors[cursor]
		if !ok {
			s.writeError(id, codeInvalidParams, "invalid cursor", "")
			return 0, false
		}
		page = i
	}
	var b strings.Builder
	b.WriteString(`"tools":[`)
	b.WriteString(strings.Join(s.list.pages[page], ","))
	b.WriteByte(']')
	for _, next := range s.list.next[page] {
		c, _ := json.Marshal(next)
		b.WriteString(`,"nextCursor":`)
		b.Write(c)
	}
	s.writeResult(id, s.result(e, "complete", true, b.String()))
	s.listsServed++
	if s.cfg.changedAfter > 0 && len(s.list.next[page]) == 0 {
		d := time.Duration(s.rnd.Int63n(int64(s.cfg.changedAfter) + 1))
		time.AfterFunc(d, func() { s.writeLine(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`) })
	}
	if s.cfg.script == "die-mid-pagination" && page == 1 {
		s.logf("die-mid-pagination: exiting after page 2 of %d", len(s.list.pages))
		return 1, true
	}
	return 0, false
}

func (s *server) toolsCall(id string, e era, params json.RawMessage) {
	var p struct {
		Name           string                     `json:"name"`
		RequestState   *string                    `json:"requestState"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		s.writeError(id, codeInvalidParams, "invalid params", "")
		return
	}
	s.callsSeen++
	switch s.cfg.script {
	case "never-answer":
		s.logf("never-answer: holding tools/call id %s", id)
		return
	case "close-stdout-unanswered":
		if s.callsSeen == 1 {
			s.closeStdout(id)
			return
		}
	case "echo-ids":
		text, _ := json.Marshal(id)
		s.writeResult(id, s.result(e, "complete", false, `"content":[{"type":"text","text":`+string(text)+`}]`))
		return
	case "input-required":
		s.inputRequired(id, e, p.RequestState, p.InputResponses)
		return
	}
	if !s.list.names[p.Name] {
		s.writeError(id, codeInvalidParams, "unknown tool", "")
		return
	}
	name, _ := json.Marshal("called " + p.Name)
	s.writeResult(id, s.result(e, "complete", false, `"content":[{"type":"text","text":`+string(name)+`}]`))
	if s.cfg.script == "close-stdout" && s.callsSeen == 1 {
		s.closeStdout(id)
	}
}

func (s *server) closeStdout(id string) {
	s.logf("%s: closing stdout after tools/call id %s", s.cfg.script, id)
	if err := s.out.Flush(); err != nil {
		s.logf("flush: %v", err)
	}
	if err := s.stdout.Close(); err != nil {
		s.logf("close stdout: %v", err)
	}
	s.stdoutClosed = true
}

const inputRequestsJSON = `"inputRequests":{"who":{"method":"elicitation/create","params":{"mode":"form",` +
	`"message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}},` +
	`"requestState":"step=1"`

func (s *server) inputRequired(id string, e era, state *string, responses map[string]json.RawMessage) {
	if state == nil {
		s.writeResult(id, s.result(e, "input_required", false, inputRequestsJSON))
		return
	}
	var who struct {
		Action  string `json:"action"`
		Content struct {
			Name string `json:"name"`
		} `json:"content"`
	}
	raw, ok := responses["who"]
	if *state != "step=1" || !ok || json.Unmarshal(raw, &who) != nil || who.Action != "accept" {
		s.writeError(id, codeInvalidParams, "invalid requestState or inputResponses", "")
		return
	}
	text, _ := json.Marshal("hello " + who.Content.Name)
	s.writeResult(id, s.result(e, "complete", false, `"content":[{"type":"text","text":`+string(text)+`}]`))
}

func (s *server) writeResult(id, result string) {
	s.writeLine(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`)
}

func (s *server) writeError(id string, code int, message, data string) {
	m, _ := json.Marshal(message)
	line := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(m)
	if data != "" {
		line += `,"data":` + data
	}
	s.writeLine(line + `}}`)
}

func (s *server) writeLine(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.verbose {
		if len(line) > 300 {
			s.logf("-> %s... (%d bytes)", line[:300], len(line))
		} else {
			s.logf("-> %s", line)
		}
	}
	if _, err := s.out.WriteString(line + "\n"); err != nil {
		s.logf("write stdout: %v", err)
		return
	}
	if err := s.out.Flush(); err != nil {
		s.logf("write stdout: %v", err)
	}
}

// listing is the paginated tool set of a script.
type listing struct {
	pages   [][]string     // tool declarations (JSON text) per page
	next    [][]string     // nextCursor member values per page (none: terminal)
	cursors map[string]int // cursor -> page index
	names   map[string]bool
}

func newListing(cfg config) *listing {
	l := &listing{cursors: map[string]int{}, names: map[string]bool{}}
	pages := cfg.pages
	defaultPages := func(n int) {
		if pages == 0 {
			pages = n
		}
	}
	cursor := func(i int) string { return "page-" + strconv.Itoa(i+1) }
	k := 0
	plainPages := func() {
		for range pages {
			var page []string
			for range cfg.perPage {
				page = append(page, plainTool(k))
				k++
			}
			l.pages = append(l.pages, page)
		}
	}
	switch cfg.script {
	case "empty-cursor":
		defaultPages(2)
		plainPages()
		cursor = func(i int) string {
			if i == 1 {
				return ""
			}
			return "page-" + strconv.Itoa(i+1)
		}
	case "repeated-cursor":
		pages = 2
		plainPages()
		l.linear(pages, func(int) string { return "again" })
		l.next[1] = []string{"again"}
		l.collectNames()
		return l
	case "dup-keys":
		defaultPages(1)
		plainPages()
		l.pages[0][min(1, len(l.pages[0])-1)] = `{"name":"raw-dup","description":"inputSchema.properties has the member \"a\" twice",` +
			`"inputSchema":{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"integer"}}}}`
	case "dup-envelope":
		pages = 3
		plainPages()
		l.linear(pages, cursor)
		l.next[0] = []string{"page-2", "page-3"}
		l.collectNames()
		return l
	case "coerced-float":
		pages = 1
		l.pages = [][]string{{
			plainTool(0),
			`{"name":"coerced-maximum","description":"maximum is not exactly a binary64","inputSchema":{"type":"object","properties":{"p":{"type":"number","maximum":0.10000000000000000555}}}}`,
			`{"name":"coerced-default","description":"default is above 2^53","inputSchema":{"type":"object","properties":{"n":{"type":"integer","default":9007199254740993}}}}`,
		}}
	case "extra-members":
		pages = 1
		l.pages = [][]string{{
			plainTool(0),
			`{"name":"extra","title":null,"description":"carries members the MCP schema does not define",` +
				`"inputSchema":{"type":"object"},"annotations":{},"_meta":{},"x-vendor":{"rank":1,"tags":["a","b"]}}`,
		}}
	case "die-mid-pagination":
		pages = 4
		plainPages()
	case "huge-page":
		defaultPages(1)
		plainPages()
		l.pages[0] = hugePage(cfg.hugeBytes)
	default:
		defaultPages(2)
		plainPages()
	}
	l.linear(len(l.pages), cursor)
	l.collectNames()
	return l
}

// linear links page i to page i+1 through cursor(i+1).
func (l *listing) linear(pages int, cursor func(int) string) {
	l.next = make([][]string, pages)
	for i := 1; i < pages; i++ {
		c := cursor(i)
		l.cursors[c] = i
		l.next[i-1] = []string{c}
	}
}

// collectNames records the callable tool names. Every declaration above
// starts with its name member, which keeps this cheap for huge-page.
func (l *listing) collectNames() {
	const prefix = `{"name":"`
	for _, page := range l.pages {
		for _, tool := range page {
			rest, ok := strings.CutPrefix(tool, prefix)
			if !ok {
				panic("rawserver: tool declaration does not start with its name: " + tool)
			}
			name, _, _ := strings.Cut(rest, `"`)
			l.names[name] = true
		}
	}
}

func plainTool(k int) string {
	return fmt.Sprintf(`{"name":"raw-%04d","description":"raw tool %d","inputSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":%d}}}}`, k, k, 100+k)
}

// hugePage returns tools of about 1 KiB each, enough to reach size bytes.
func hugePage(size int) []string {
	filler := strings.Repeat("0123456789abcdef", 60) // 960 bytes
	var tools []string
	total := 0
	for k := 0; total < size || len(tools) == 0; k++ {
		t := fmt.Sprintf(`{"name":"huge-%06d","description":"%s","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":%d}}}}`, k, filler, k)
		tools = append(tools, t)
		total += len(t) + 1
	}
	return tools
}
