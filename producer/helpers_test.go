package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

// testClock advances one millisecond per reading from a fixed start.
type testClock struct{ ms atomic.Int64 }

func (c *testClock) now() time.Time {
	return time.UnixMilli(1_780_000_000_000 + c.ms.Add(1))
}

// zeros is deterministic entropy.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func testOptions(t testing.TB) Options {
	t.Helper()
	c := &testClock{}
	return Options{
		Clock:    c.now,
		Entropy:  zeros{},
		Producer: transcript.Producer{Name: "tracectl-test", Version: "v0"},
		Server:   transcript.Server{Transport: transcript.TransportInProcess},
	}
}

func openTest(t testing.TB, mutate func(*Options)) (*Recorder, string) {
	t.Helper()
	o := testOptions(t)
	if mutate != nil {
		mutate(&o)
	}
	dir := filepath.Join(t.TempDir(), "run.trace")
	r, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r, dir
}

// call builds a tools/call request line (LF-terminated).
func call(id, tool, args string, meta string) []byte {
	params := `"name":` + quote(tool)
	if args != "" {
		params += `,"arguments":` + args
	}
	if meta != "" {
		params += `,"_meta":` + meta
	}
	idm := ""
	if id != "" {
		idm = `"id":` + id + `,`
	}
	return []byte(`{"jsonrpc":"2.0",` + idm + `"method":"tools/call","params":{` + params + `}}` + "\n")
}

func quote(s string) string { b, _ := canon.Marshal(s); return string(b) }

func result(id string, extra string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]` + extra + `}}` + "\n")
}

// testSigner returns a fake record naming the root, so tests can check
// what Seal signs.
type testSigner struct {
	root  string
	count int64
	err   error
}

func (s *testSigner) SignTranscript(_ context.Context, root string, n int64) ([]byte, error) {
	s.root, s.count = root, n
	if s.err != nil {
		return nil, s.err
	}
	return []byte(fmt.Sprintf(`{"call_count":%d,"tool_transcript":{"hash":%q}}`, n, root)), nil
}

// bundle is a bundle read back and checked the way a verifier would at
// the transcript level: every line valid, ids unique, observations and
// resolutions naming recorded attempts, the seal's counts right.
type bundle struct {
	lines    [][]byte
	events   []any
	attempts map[string]*transcript.Attempt
	obs      map[string][]*transcript.Observation
	res      map[string]*transcript.Resolution
	root     string
}

func readBundle(t testing.TB, dir string) *bundle {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	return checkTranscript(t, data)
}

func checkTranscript(t testing.TB, data []byte) *bundle {
	t.Helper()
	b := &bundle{attempts: map[string]*transcript.Attempt{}, obs: map[string][]*transcript.Observation{}, res: map[string]*transcript.Resolution{}}
	r := transcript.NewReader(bytes.NewReader(data))
	var c transcript.Committer
	for {
		raw, ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("transcript invalid: %v", err)
		}
		c.Add(raw)
		b.lines = append(b.lines, raw)
		b.events = append(b.events, ev)
		switch e := ev.(type) {
		case *transcript.Attempt:
			if b.attempts[e.AttemptID] != nil {
				t.Fatalf("attempt id %s reused", e.AttemptID)
			}
			if e.RetryOf != "" && b.attempts[e.RetryOf] == nil {
				t.Fatalf("attempt %s retries unknown %s", e.AttemptID, e.RetryOf)
			}
			b.attempts[e.AttemptID] = e
		case *transcript.Observation:
			if b.attempts[e.AttemptID] == nil {
				t.Fatalf("observation of unknown attempt %s", e.AttemptID)
			}
			b.obs[e.AttemptID] = append(b.obs[e.AttemptID], e)
		case *transcript.Resolution:
			if b.attempts[e.AttemptID] == nil || b.res[e.AttemptID] != nil {
				t.Fatalf("resolution of unknown or resolved attempt %s", e.AttemptID)
			}
			b.res[e.AttemptID] = e
		case *transcript.Seal:
			var want transcript.Seal
			for id := range b.attempts {
				want.Attempts++
				switch b.status(id) {
				case transcript.ObsResponse:
					want.Responses++
				case transcript.ObsTransportFailure:
					want.TransportFailures++
				default:
					want.Unknown++
				}
			}
			if e.Attempts != want.Attempts || e.Responses != want.Responses || e.TransportFailures != want.TransportFailures || e.Unknown != want.Unknown {
				t.Fatalf("seal counts %+v, recomputed %+v", *e, want)
			}
		}
	}
	b.root = c.Root()
	return b
}

// status is an attempt's bucket: response, transport_failure or unknown.
func (b *bundle) status(id string) string {
	s := "unknown"
	for _, o := range b.obs[id] {
		switch o.Kind {
		case transcript.ObsResponse, transcript.ObsLateResponse:
			return transcript.ObsResponse
		case transcript.ObsTransportFailure:
			s = transcript.ObsTransportFailure
		}
	}
	return s
}

func (b *bundle) seal() *transcript.Seal {
	if len(b.events) == 0 {
		return nil
	}
	s, _ := b.events[len(b.events)-1].(*transcript.Seal)
	return s
}

func (b *bundle) recoveries() []*transcript.Recovery {
	var out []*transcript.Recovery
	for _, ev := range b.events {
		if r, ok := ev.(*transcript.Recovery); ok {
			out = append(out, r)
		}
	}
	return out
}

func mustAttempt(t testing.TB, r *Recorder, line []byte) *Handle {
	t.Helper()
	h, err := r.Attempt(context.Background(), Call{Line: line})
	if err != nil {
		t.Fatalf("Attempt: %v", err)
	}
	return h
}

func mustSeal(t testing.TB, r *Recorder) *Sealed {
	t.Helper()
	s, err := r.Seal(context.Background(), &testSigner{})
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return s
}

func isErr(err, target error) bool { return errors.Is(err, target) }

func contains(b [][]byte, s string) bool {
	for _, l := range b {
		if strings.Contains(string(l), s) {
			return true
		}
	}
	return false
}

// readPayload returns a retained payload's bytes from a bundle, checked
// against its digest.
func readPayload(dir, digest string) ([]byte, error) {
	p, err := transcript.OpenPayloads(os.DirFS(dir))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Read(digest, 1<<30)
}
