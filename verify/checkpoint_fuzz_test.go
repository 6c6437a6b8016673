package verify_test

import (
	"bytes"
	"context"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// FuzzVerifyCheckpoint puts one fuzzed file into checkpoints/ of a bundle
// without record.json (the signed record of the standard bundle, under the
// name of the prefix it covers, is the seed). It never panics, the report
// obeys the verdict rule, such a bundle is never verified, and a checkpoint
// is bound only with the original record's content under its own name.
func FuzzVerifyCheckpoint(f *testing.F) {
	base := verifytest.Standard(f).FS()
	orig := base[transcript.RecordFile].Data
	delete(base, transcript.RecordFile)
	origCanon, err := canon.Canonicalize(orig, canon.PolicyV02)
	if err != nil {
		f.Fatal(err)
	}
	lines := int64(bytes.Count(base[transcript.TranscriptFile].Data, []byte("\n")))
	good := strconv.FormatInt(lines, 10) + ".json"
	f.Add(good, orig)
	f.Add(strconv.FormatInt(lines-1, 10)+".json", orig)
	f.Add("0"+good, orig)
	f.Add(".tmp-"+good, orig)
	f.Add("99999999999999999999.json", orig)
	f.Add(good, bytes.Replace(orig, []byte(`"call_count":3`), []byte(`"call_count":2`), 1))
	f.Add(good, []byte(`{}`))
	f.Add("x", []byte{})
	v := verifier(f, verify.Options{TrustedKey: verifytest.Key(f, 1).Public(), At: verifytest.At})
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if !fs.ValidPath(name) || strings.Contains(name, "/") || name == "." {
			return // one entry of checkpoints/
		}
		fsys := copyFS(base)
		fsys["checkpoints/"+name] = &fstest.MapFile{Data: data}
		rep, err := v.Bundle(context.Background(), fsys)
		if rep == nil && strings.HasPrefix(name, ".tmp-") && err != nil {
			return // only a half-written checkpoint: nothing to verify against
		}
		consistent(t, rep, err)
		if rep.Verdict == verify.Verified {
			t.Fatalf("a bundle without record.json verified")
		}
		if rep.Has(verify.CodeCheckpointBound) {
			c, cerr := canon.Canonicalize(data, canon.PolicyV02)
			if name != good || cerr != nil || !bytes.Equal(c, origCanon) {
				t.Fatalf("bound a checkpoint %q with other content:\n%s", name, data)
			}
		}
	})
}
