package mcptest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/mcptest"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }

// lineTimeout bounds every wait for a line; generous because -race slows the
// children's builds, not their answers.
const lineTimeout = 10 * time.Second

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// roundTrip sends one request line and returns the next line and its decoding.
func roundTrip(t *testing.T, c *mcptest.RawClient, req string) ([]byte, response) {
	t.Helper()
	if err := c.Send(req); err != nil {
		t.Fatalf("send %s: %v", req, err)
	}
	return recv(t, c)
}

func recv(t *testing.T, c *mcptest.RawClient) ([]byte, response) {
	t.Helper()
	line, err := c.Recv(lineTimeout)
	if err != nil {
		t.Fatalf("recv: %v (stderr: %s)", err, c.Stderr())
	}
	var r response
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("decode %q: %v", line, err)
	}
	return line, r
}

// members decodes a JSON object into its members, keeping their raw text.
func members(t *testing.T, obj json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatalf("decode object %q: %v", obj, err)
	}
	return m
}

func TestBuildOncePerName(t *testing.T) {
	t.Parallel()
	a := mcptest.Build(t, "rawserver")
	b := mcptest.Build(t, "rawserver")
	if a != b {
		t.Errorf("Build twice: got %q and %q, want the same path", a, b)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("built binary: %v", err)
	}
}

func TestRawClientEOFAndExitStatus(t *testing.T) {
	t.Parallel()
	// A real process that prints a partial last line and fails: sh is enough
	// to check the client's own plumbing.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	c := mcptest.NewRawClient(t, exec.Command(sh, "-c", `read x; printf '%s\n' "got $x"; printf 'partial'; echo oops >&2; exit 3`))
	if err := c.Send("hello"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"got hello\n", "partial"} {
		got, err := c.Recv(lineTimeout)
		if err != nil || string(got) != want {
			t.Fatalf("Recv = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := c.Recv(lineTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after the last line: got %v, want io.EOF", err)
	}
	var exit *exec.ExitError
	if err := c.Wait(lineTimeout); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Wait = %v, want exit status 3", err)
	}
	if got := c.Stderr(); got != "oops\n" {
		t.Errorf("Stderr = %q, want %q", got, "oops\n")
	}
}

func TestRawClientTimeout(t *testing.T) {
	t.Parallel()
	c := mcptest.StartRaw(t, mcptest.Build(t, "rawserver"))
	start := time.Now()
	if _, err := c.Recv(50 * time.Millisecond); !errors.Is(err, mcptest.ErrTimeout) {
		t.Fatalf("Recv from a silent server: got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Recv took %v", d)
	}
	if err := c.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(lineTimeout); err != nil {
		t.Fatalf("rawserver after stdin closed: %v", err)
	}
	if err := c.Send("x"); err == nil {
		t.Error("Send after CloseStdin succeeded")
	}
}

func TestRawClientLinesAreExact(t *testing.T) {
	t.Parallel()
	// Lines come back with their terminator and nothing re-encoded.
	c := mcptest.StartRaw(t, mcptest.Build(t, "rawserver"), "-script", "echo-ids")
	line, _ := roundTrip(t, c, `{"jsonrpc":"2.0","id":"\u00e9","method":"x/y"}`)
	if want := []byte(`{"jsonrpc":"2.0","id":"\u00e9","result":{}}` + "\n"); !bytes.Equal(line, want) {
		t.Errorf("got %q, want %q", line, want)
	}
}
