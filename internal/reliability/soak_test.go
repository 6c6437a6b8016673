//go:build unix

// Package reliability holds the whole-system campaign: a soak of tracectl
// wrap under random server kills and client cancellations, and disk faults
// on a real small file system. Everything runs real processes: the tracectl
// binary, the Go SDK test server and the Go SDK client.
package reliability

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/mcptest"
	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }

var (
	soakCalls    = flag.Int("soak-calls", 20000, "tool calls in the soak, across all wrap sessions")
	soakInFlight = flag.Int("soak-inflight", 32, "concurrent calls in the soak")
)

// maxWrapRSS bounds the wrap process's peak resident memory: the proxy
// holds lines, not sessions, so it must not grow with the number of calls.
const maxWrapRSS = 256 << 20

// TestSoak drives tracectl wrap with the Go SDK client and server: soakCalls
// calls, soakInFlight at a time, spread over wrap sessions; some sessions
// have their server SIGKILLed at a random moment, some calls are cancelled
// by the client. After each session the bundle must seal and verify, and
// every call the client saw answered must be in the transcript exactly once
// with its response; no attempt id repeats.
func TestSoak(t *testing.T) {
	tracectl := mcptest.BuildTracectl(t)
	server := mcptest.Build(t, "sdkserver")
	dir := t.TempDir()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	keyPath := filepath.Join(dir, "key.pem")
	if err := sign.WriteKeyPair(keyPath, key, nil); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: a failure can be replayed
	total, session := *soakCalls, 0
	var peakRSS int64
	var killed, cancelled, answered, recorded int64
	start := time.Now()
	for next := 0; next < total; session++ {
		n := min(total-next, 1000+rng.IntN(3000))
		kill := session%3 == 1 // every third session loses its server mid-run
		st := runSoakSession(t, soakSession{
			tracectl: tracectl, server: server, key: keyPath,
			bundle: filepath.Join(dir, fmt.Sprintf("s%03d.trace", session)),
			first:  next, calls: n, inflight: *soakInFlight, kill: kill,
			killAfter: rng.IntN(n), seed: uint64(session),
		})
		next += n
		peakRSS = max(peakRSS, st.rss)
		answered += st.answered
		recorded += st.attempts
		cancelled += st.cancelled
		if st.killed {
			killed++
		}
	}
	t.Logf("soak: %d calls requested over %d sessions (%d server kills, %d client cancellations) in %v; %d answered, %d attempts recorded; wrap peak RSS %.1f MiB",
		total, session, killed, cancelled, time.Since(start).Round(time.Millisecond), answered, recorded, float64(peakRSS)/(1<<20))
	if peakRSS > maxWrapRSS {
		t.Errorf("wrap peak RSS %d bytes, want <= %d", peakRSS, maxWrapRSS)
	}
	if killed == 0 {
		t.Error("no session lost its server: the soak did not exercise kills")
	}
}

type soakSession struct {
	tracectl, server, key, bundle string
	first, calls, inflight        int
	kill                          bool
	killAfter                     int
	seed                          uint64
}

type soakStats struct {
	answered, attempts, cancelled int64
	killed                        bool
	rss                           int64
}

func runSoakSession(t *testing.T, s soakSession) soakStats {
	t.Helper()
	ctx := context.Background()
	cmd := exec.Command(s.tracectl, "wrap", "--bundle", s.bundle, "--key", s.key, "--durability", "batch", "--grace", "2s",
		"--", s.server, "-echo-only")
	cmd.Stderr = &lineTail{}
	client := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through wrap: %v (stderr: %s)", err, cmd.Stderr)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var st soakStats
	answeredArgs := make([]bool, s.calls) // call i got its echo back
	var issued atomic.Int64
	var wg sync.WaitGroup
	var serverGone atomic.Bool
	for w := 0; w < s.inflight; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s.seed, uint64(w)))
			for {
				i := int(issued.Add(1)) - 1
				if i >= s.calls || serverGone.Load() {
					return
				}
				if s.kill && i == s.killAfter {
					if killServer(t, cmd.Process.Pid) {
						serverGone.Store(true)
						st.killed = true
					}
				}
				cctx, cancel := context.WithCancel(ctx)
				if rng.IntN(100) == 0 {
					// A client that gives up within 0-2 ms: before the
					// request is sent, or while it is in flight (the SDK
					// then sends notifications/cancelled).
					cancel()
					cctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
					atomic.AddInt64(&st.cancelled, 1)
				}
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"n": s.first + i}})
				cancel()
				if err == nil && !res.IsError && len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok && strings.Contains(tc.Text, `"n":`+strconv.Itoa(s.first+i)) {
						answeredArgs[i] = true // each worker owns distinct i
					}
				}
				if errors.Is(err, mcp.ErrConnectionClosed) {
					serverGone.Store(true)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	cs.Close() // closes wrap's stdin: it seals and exits
	if cmd.ProcessState == nil {
		_ = cmd.Wait()
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		st.rss = ru.Maxrss * 1024
	}
	for _, a := range answeredArgs {
		if a {
			st.answered++
		}
	}
	st.attempts = checkSoakBundle(t, s, answeredArgs)
	return st
}

// killServer SIGKILLs the MCP server, wrap's only child (any of wrap's
// threads may have started it, so every task's children are read).
func killServer(t *testing.T, wrapPid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", wrapPid))
	if err != nil || len(tasks) == 0 {
		t.Logf("cannot find the server process of wrap %d", wrapPid)
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				return true
			}
		}
	}
	return false
}

// checkSoakBundle verifies the sealed bundle and matches its attempts to
// the calls: every answered call has exactly one attempt with a response,
// no call has two attempts, attempt ids are unique.
func checkSoakBundle(t *testing.T, s soakSession, answered []bool) int64 {
	t.Helper()
	pub, err := sign.LoadPublicKeyFile(s.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Options{TrustedKey: pub, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := v.Bundle(context.Background(), os.DirFS(s.bundle))
	if rep == nil || rep.Verdict != verify.Verified {
		t.Fatalf("bundle %s: verdict %v, want verified: %+v", s.bundle, verdictOf(rep), findingsOf(rep))
	}
	// Map arguments digests to call numbers.
	byDigest := make(map[string]int, s.calls)
	for i := 0; i < s.calls; i++ {
		d, err := canon.Digest([]byte(`{"n":`+strconv.Itoa(s.first+i)+`}`), canon.PolicyMCPDecl)
		if err != nil {
			t.Fatal(err)
		}
		byDigest[d] = i
	}
	f, err := os.Open(filepath.Join(s.bundle, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := transcript.NewReader(bufio.NewReader(f))
	payloads, err := transcript.OpenPayloads(os.DirFS(s.bundle))
	if err != nil {
		t.Fatal(err)
	}
	defer payloads.Close()
	attemptOf := map[string]int{} // attempt id -> call
	calls := map[int]string{}     // call -> attempt id
	responded := map[string]bool{}
	var attempts int64
	for {
		_, ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("read transcript: %v", err)
		}
		switch e := ev.(type) {
		case *transcript.Attempt:
			attempts++
			if _, dup := attemptOf[e.AttemptID]; dup {
				t.Fatalf("attempt id %s repeats", e.AttemptID)
			}
			// Arguments digests are salted (transcript v3): the call is
			// found by the plain digest of the retained request's arguments.
			req, err := payloads.Read(e.Request.Digest, 1<<20)
			if err != nil {
				t.Fatalf("attempt %s: request bytes: %v", e.AttemptID, err)
			}
			facts, err := transcript.DeriveRequest(req)
			if err != nil {
				t.Fatalf("attempt %s: %v", e.AttemptID, err)
			}
			i, ok := byDigest[facts.ArgsDigest]
			if !ok {
				t.Fatalf("attempt %s has arguments no call sent", e.AttemptID)
			}
			if prev, dup := calls[i]; dup {
				t.Fatalf("call %d recorded twice: %s and %s", s.first+i, prev, e.AttemptID)
			}
			attemptOf[e.AttemptID], calls[i] = i, e.AttemptID
		case *transcript.Observation:
			if e.Kind == transcript.ObsResponse || e.Kind == transcript.ObsLateResponse {
				responded[e.AttemptID] = true
			}
		}
	}
	for i, a := range answered {
		if !a {
			continue
		}
		id, ok := calls[i]
		if !ok {
			t.Fatalf("call %d was answered but no attempt records it", s.first+i)
		}
		if !responded[id] {
			t.Fatalf("call %d was answered but attempt %s has no response", s.first+i, id)
		}
	}
	return attempts
}

func verdictOf(r *verify.Report) any {
	if r == nil {
		return nil
	}
	return r.Verdict
}

func findingsOf(r *verify.Report) any {
	if r == nil {
		return nil
	}
	var bad []verify.Finding
	for _, f := range r.Findings {
		if f.Status != verify.StatusPass && f.Status != verify.StatusInfo {
			bad = append(bad, f)
		}
	}
	return bad
}

// lineTail keeps the last bytes a process wrote to stderr, for messages.
type lineTail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *lineTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > 8192 {
		l.buf = l.buf[len(l.buf)-8192:]
	}
	return len(p), nil
}

func (l *lineTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
