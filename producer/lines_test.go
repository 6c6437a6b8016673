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
