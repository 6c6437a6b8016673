package mcpwire_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
)

func readAll(t testing.TB, in []byte) ([]mcpwire.Event, error) {
	t.Helper()
	r := mcpwire.NewEventReader(bytes.NewReader(in))
	var evs []mcpwire.Event
	for range 10000 {
		ev, err := r.Next()
		if len(ev.Raw) > 0 {
			evs = append(evs, ev)
		}
		if err != nil {
			return evs, err
		}
	}
	t.Fatal("more than 10000 events")
	return nil, nil
}

func TestEventReaderRules(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"result":{}}`
	for _, tc := range []struct {
		name, in string
		rule     mcpwire.Rule // "" : delivered
		data     string
	}{
		{"plain", "data: " + msg + "\n\n", "", msg},
		{"crlf", "data: " + msg + "\r\n\r\n", "", msg},
		{"named message", "event: message\nid: 7\nretry: 10\n: hi\ndata:" + msg + "\n\n", "", msg},
		{"bom", "\xef\xbb\xbfdata: " + msg + "\n\n", mcpwire.Rule("sse_bom"), msg},
		{"lone cr", "data: " + msg + "\n\rdata: x\n\n", mcpwire.Rule("sse_bare_cr"), msg},
		{"cr before crlf", "data: " + msg + "\r\r\n\n", mcpwire.Rule("sse_bare_cr"), msg + "\r"},
		{"other event", "event: other\ndata: " + msg + "\n\n", mcpwire.Rule("sse_event_name"), msg},
		{"padded event", "event:  message\ndata: " + msg + "\n\n", mcpwire.Rule("sse_event_name"), msg},
		{"empty event", "event:\ndata: " + msg + "\n\n", mcpwire.Rule("sse_event_name"), msg},
		{"two event lines", "event: message\nevent: message\ndata: " + msg + "\n\n", mcpwire.Rule("sse_event_name"), msg},
		{"no colon", "data\ndata: " + msg + "\n\n", mcpwire.Rule("sse_field"), msg},
		{"other field", "Data: x\ndata: " + msg + "\n\n", mcpwire.Rule("sse_field"), msg},
		{"two data lines", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1}\n\n", mcpwire.Rule("sse_data_lines"), `{"jsonrpc":"2.0",`},
		{"no data", ": keepalive\n\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := readAll(t, []byte(tc.in))
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err %v, want io.EOF", err)
			}
			if len(evs) != 1 {
				t.Fatalf("%d events, want 1", len(evs))
			}
			ev := evs[0]
			var got mcpwire.Rule
			if ev.Refusal != nil {
				got = ev.Refusal.Rule
			}
			if got != tc.rule {
				t.Errorf("rule %q, want %q", got, tc.rule)
			}
			if string(ev.Data) != tc.data {
				t.Errorf("data %q, want %q", ev.Data, tc.data)
			}
			if string(ev.Raw) != tc.in && !bytes.HasSuffix([]byte(tc.in), ev.Raw) {
				t.Errorf("raw %q is not the event's bytes %q", ev.Raw, tc.in)
			}
		})
	}
}

func TestEventReaderUnfinished(t *testing.T) {
	evs, err := readAll(t, []byte("data: {}\n\ndata: {\"cut\":1}"))
	if !errors.Is(err, io.EOF) || len(evs) != 2 {
		t.Fatalf("%d events, err %v", len(evs), err)
	}
	if evs[0].Refusal != nil || evs[1].Refusal == nil || evs[1].Refusal.Rule != mcpwire.RuleSSEUnfinished || evs[1].Data != nil {
		t.Fatalf("got %+v, %+v; want the cut event refused sse_unfinished without data", evs[0], evs[1])
	}
}

// FuzzEventReader: the reader never panics, its events are the stream's
// bytes in order (blank lines between events aside), an event's data is
// inside its bytes, and a delivered event has no CR but in CRLF, no BOM
// and at most one data line.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
	f.Add([]byte("id: 1\ndata:\n\n: comment\n\ndata: a\ndata: b\r\n\r\n"))
	f.Add([]byte("data: cut"))
	f.Add([]byte("\xef\xbb\xbfdata: a\n\rdata: b\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, err := readAll(t, in)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("unexpected error %v", err)
		}
		rest := in
		for _, ev := range evs {
			i := bytes.Index(rest, ev.Raw)
			if i < 0 || len(bytes.Trim(rest[:i], "\r\n")) != 0 {
				t.Fatalf("event %q is not the next bytes of %q", ev.Raw, rest)
			}
			rest = rest[i+len(ev.Raw):]
			if ev.Data != nil && !bytes.Contains(ev.Raw, ev.Data) {
				t.Fatalf("data %q not in event %q", ev.Data, ev.Raw)
			}
			if ev.Refusal == nil {
				if bytes.Count(ev.Raw, []byte("\r")) != bytes.Count(ev.Raw, []byte("\r\n")) || bytes.HasPrefix(ev.Raw, []byte("\xef\xbb\xbf")) ||
					bytes.Count(ev.Raw, []byte("\ndata:"))+b2i(bytes.HasPrefix(ev.Raw, []byte("data:"))) > 1 {
					t.Fatalf("delivered event %q breaks a rule", ev.Raw)
				}
			}
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
