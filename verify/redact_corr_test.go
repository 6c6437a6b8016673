package verify_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// resignedWith records one call whose request _meta carries the agent
// host's tool-use id toolu_A (and, when secret, a credential the default
// rules redact), then rewrites the attempt line's tool_use_id to toolu_B
// and re-signs the record over the new lines with the producer's key.
func resignedWith(t *testing.T, secret bool) fs.FS {
	dir := filepath.Join(t.TempDir(), "run.trace")
	r := openRecorder(t, dir, transcript.DurabilityStrict)
	ctx := context.Background()
	recordSnapshot(t, r, 3, 3)
	meta := `{"claudecode/toolUseId":"toolu_A"}`
	if secret {
		meta = `{"claudecode/toolUseId":"toolu_A","x-auth":"` + secretSamples[0] + `"}`
	}
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool_1","arguments":{"q":"w"},"_meta":` + meta + `}}` + "\n")
	h, err := r.Attempt(ctx, producer.Call{Line: req})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Response([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seal(ctx, recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}); err != nil {
		t.Fatal(err)
	}
	b := verifytest.New(t)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == transcript.TranscriptFile || rel == transcript.RecordFile {
			return nil
		}
		data, err := os.ReadFile(p)
		b.Files[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data, Mode: 0o600}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, transcript.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if bytes.Contains(l, []byte(`"type":"attempt"`)) && bytes.Contains(l, []byte(`"toolu_A"`)) {
			l = bytes.Replace(l, []byte(`"toolu_A"`), []byte(`"toolu_B"`), 1)
			n++
		}
		b.Lines = append(b.Lines, l)
	}
	if n != 1 {
		t.Fatalf("%d attempt lines with toolu_A", n)
	}
	return b.FS()
}

// A redaction anywhere under the request's _meta makes verify drop every
// correlation diff of the attempt (claimSources maps all of
// "correlation" to /params/_meta), not only the one the redaction hides:
// with an unrelated credential redacted at /params/_meta/x-auth, an
// attempt line whose tool_use_id says toolu_B verifies although its
// retained request bytes show, unredacted, claudecode/toolUseId toolu_A.
// Without the redaction the same lie fails (the control).
func TestRedactionCoversOnlyItsClaim(t *testing.T) {
	rep, codes := verdictCodes(t, resignedWith(t, false), trusted(t))
	if rep.Verdict != verify.Failed {
		t.Fatalf("control: a rewritten tool_use_id with no redaction: verdict %s %v\n%s", rep.Verdict, codes, dump(rep))
	}
	rep, codes = verdictCodes(t, resignedWith(t, true), trusted(t))
	if rep.Verdict == verify.Verified {
		var d []string
		for _, f := range rep.Findings {
			if strings.Contains(f.Detail, "claim") || f.Code == verify.CodePayloadRedacted {
				d = append(d, string(f.Code)+": "+f.Detail)
			}
		}
		t.Fatalf("verified (problems %v): the attempt line claims tool_use_id toolu_B, the retained request shows claudecode/toolUseId toolu_A unredacted; only /params/_meta/x-auth is redacted. %q", codes, d)
	}
}
