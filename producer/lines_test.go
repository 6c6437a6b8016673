package producer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracectl/tracectl/transcript"
)

// Options.Lines is sent each line as written, the header first, in file
// order, byte for byte; a full channel drops lines and never blocks the
// recorder.
func TestLinesTap(t *testing.T) {
	ch := make(chan []byte, 64)
	r, dir := openTest(t, func(o *Options) { o.Lines = ch })
	for _, id := range []string{"1", "2"} {
		h := mustAttempt(t, r, call(id, "echo", `{"x":1}`, ""))
		if err := h.Response(result(id, "")); err != nil {
			t.Fatal(err)
		}
	}
	mustSeal(t, r)
	close(ch)
	var got [][]byte
	for l := range ch {
		got = append(got, l)
	}
	file, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Split(bytes.TrimSuffix(file, []byte("\n")), []byte("\n"))
	if len(got) != len(want) {
		t.Fatalf("tapped %d lines, the file has %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("line %d tapped as\n%s\nwritten as\n%s", i, got[i], want[i])
		}
	}

	full := make(chan []byte, 1)
	r, _ = openTest(t, func(o *Options) { o.Lines = full })
	h := mustAttempt(t, r, call("1", "echo", `{}`, "")) // returns although nobody reads the tap
	if err := h.Response(result("1", "")); err != nil {
		t.Fatal(err)
	}
	mustSeal(t, r)
	if l := <-full; !bytes.Contains(l, []byte(`"type":"header"`)) {
		t.Fatalf("the one line a full tap kept is %s, want the header", l)
	}
}

// An attempt that carries the agent host's tool-use id of an earlier one
// is that tool use re-issued: linked as its retry (caller_tool_use_id).
// Different ids, or none, link nothing by that basis.
func TestRetryByToolUseID(t *testing.T) {
	r, dir := openTest(t, nil)
	meta := func(id string) string { return `{"claudecode/toolUseId":"` + id + `"}` }
	mustAttempt(t, r, call("1", "echo", `{"n":1}`, meta("toolu_01")))
	mustAttempt(t, r, call("2", "other", `{"n":2}`, meta("toolu_02")))
	mustAttempt(t, r, call("3", "echo", `{"n":3}`, meta("toolu_01")))
	mustSeal(t, r)
	b := readBundle(t, dir)
	var links []string
	for _, id := range []string{"a1", "a2", "a3"} { // b.attempts is a map: read it in attempt order
		a := b.attempts[id]
		if a == nil {
			t.Fatalf("no attempt %s in %d attempts", id, len(b.attempts))
		}
		links = append(links, a.AttemptID+"<-"+a.RetryOf+":"+a.RetryBasis)
	}
	want := []string{"a1<-:", "a2<-:", "a3<-a1:caller_tool_use_id"}
	if len(links) != len(want) {
		t.Fatalf("links %v, want %v", links, want)
	}
	for i := range want {
		if links[i] != want[i] {
			t.Fatalf("links %v, want %v", links, want)
		}
	}
}
