//go:build unix

package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestCommandRequestASCII: hostile arguments (a bidi override that shows
// a path reversed, a C1 CSI that some terminals take for an escape
// sequence, DEL, a character outside the BMP) reach the approver escaped:
// its stdin is printable ASCII, so an approver that shows the request to
// a human on a terminal shows what the arguments are, and it decodes to
// the same values.
func TestCommandRequestASCII(t *testing.T) {
	got := filepath.Join(t.TempDir(), "req.json")
	args := "{\"path\":\"/tmp/\u202eexe.txt\",\"x\":\"\u009b31m\u007f\",\"e\":\"\U0001F600é\"}"
	g := &Gate{Asker: &Command{Argv: []string{"/bin/sh", "-c", `cat > "$1"; echo '{"approve":false}'`, "approver", got}},
		Arguments: func([]byte) (json.RawMessage, []string, string) { return json.RawMessage(args), nil, "" }}
	if ev := g.Ask(context.Background(), nil, "a1", "wr\u202ete", "r", digest, nil); ev.Outcome != Refused {
		t.Fatalf("%+v", ev)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range b {
		if c >= 0x7f || c < 0x20 && !(c == '\n' && i == len(b)-1) {
			t.Fatalf("byte %d of the request is %#x: %q", i, c, b)
		}
	}
	var req Request
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	var want, have any
	_ = json.Unmarshal([]byte(args), &want)
	_ = json.Unmarshal(req.Arguments, &have)
	wb, _ := json.Marshal(want)
	hb, _ := json.Marshal(have)
	if !bytes.Equal(wb, hb) || req.Tool != "wr\u202ete" {
		t.Fatalf("the request decodes to %s, tool %q; want %s", hb, req.Tool, wb)
	}
}
