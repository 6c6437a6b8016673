package verify_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// checkpointed records n answered calls with a checkpoint after every
// `every` attempts, then one call in flight (n+1 not a multiple of every), and closes the recorder
// without sealing (what a killed producer leaves, less a torn line). It
// returns the checkpoints written, in order.
func checkpointed(t *testing.T, dir string, n, every int) []*producer.Checkpoint {
	t.Helper()
	r := openRecorder(t, dir, transcript.DurabilityBatch)
	recordSnapshot(t, r, 3, 3)
	done := make(chan *producer.Checkpoint, n)
	if err := r.StartCheckpoints(recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}, producer.CheckpointPolicy{
		EveryAttempts: int64(every),
		Done: func(cp *producer.Checkpoint, err error) {
			if err != nil {
				t.Errorf("checkpoint: %v", err)
			}
			done <- cp
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var cps []*producer.Checkpoint
	for i := 1; i <= n; i++ {
		h, err := r.Attempt(ctx, producer.Call{Line: call(i, "tool_1", `{"i":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if i%every == 0 {
			// The trigger fires on the attempt; wait for its checkpoint
			// before the response, so the prefix it covers is known.
			cp := <-done
			if cp == nil {
				t.Fatal("a checkpoint trigger wrote nothing")
			}
			cps = append(cps, cp)
		}
		if err := h.Response(answer(i, "ok")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Attempt(ctx, producer.Call{Line: call(n+1, "tool_1", `{"i":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return cps
}

// TestCheckpointUnsealed: a bundle whose producer stopped before sealing
// is verified by its last checkpoint: the prefix it covers is signed, the
// rest is reported unsigned, and nothing fails.
func TestCheckpointUnsealed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	cps := checkpointed(t, dir, 6, 3)
	if len(cps) != 2 || cps[0].Attempts != 3 || cps[1].Attempts != 6 || cps[0].Lines >= cps[1].Lines {
		t.Fatalf("checkpoints %+v", cps)
	}
	rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Incomplete || !slices.Equal(codes, []verify.Code{verify.CodeTailUnsigned}) {
		t.Fatalf("verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
	}
	last := cps[len(cps)-1]
	bound := rep.Find(verify.CodeCheckpointBound)
	if len(bound) != 1 || bound[0].Subject != last.File || !strings.Contains(bound[0].Detail, last.Root) {
		t.Fatalf("checkpoint_bound %+v, want %s over %s\n%s", bound, last.File, last.Root, dump(rep))
	}
	tail := rep.Find(verify.CodeTailUnsigned)[0]
	if want := "(1 attempt) are after the last checkpoint"; !strings.Contains(tail.Detail, want) {
		t.Errorf("tail_unsigned %q, want it to say %q", tail.Detail, want)
	}
	if rep.TrustBasis != verify.TrustKey || !rep.Has(verify.CodeSignatureValid) || !rep.Has(verify.CodeTrustedKeyMatch) {
		t.Errorf("the checkpoint's record was not checked as the bundle's: trust %s\n%s", rep.TrustBasis, dump(rep))
	}
	// A crash mid-write leaves a torn final line: expected after the last
	// checkpoint, reported with the unsigned tail, not as malformed.
	f, err := os.OpenFile(filepath.Join(dir, transcript.TranscriptFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"at_ms":17829`)
	f.Close()
	rep, codes = verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Incomplete || !slices.Equal(codes, []verify.Code{verify.CodeTailUnsigned}) {
		t.Fatalf("torn tail: verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
	}
	if tail := rep.Find(verify.CodeTailUnsigned)[0]; !strings.Contains(tail.Detail, "a torn final line of 14 bytes") {
		t.Errorf("tail_unsigned %q does not name the torn line", tail.Detail)
	}

	// A bundle with neither record.json nor checkpoints still has nothing
	// to verify against.
	if err := os.RemoveAll(filepath.Join(dir, producer.CheckpointDir)); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifier(t, trusted(t)).Bundle(context.Background(), os.DirFS(dir)); rep != nil || err == nil {
		t.Errorf("no record, no checkpoint: report %v, error %v", rep, err)
	}
}

// TestCheckpointForged: a checkpoint that does not match the prefix it
// names fails, whether its name was changed, another key signed it, or
// its record was edited.
func TestCheckpointForged(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string, cps []*producer.Checkpoint){
		"renamed": func(t *testing.T, dir string, cps []*producer.Checkpoint) {
			last := cps[len(cps)-1]
			if err := os.Rename(filepath.Join(dir, last.File), filepath.Join(dir, producer.CheckpointPath(last.Lines+1))); err != nil {
				t.Fatal(err)
			}
		},
		"other key": func(t *testing.T, dir string, cps []*producer.Checkpoint) {
			rec, err := recordSigner{key: verifytest.Key(t, 2), at: verifytest.Issued}.SignTranscript(context.Background(), cps[0].Root, cps[0].Attempts)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, cps[0].File), rec, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"wrong root": func(t *testing.T, dir string, cps []*producer.Checkpoint) {
			// Validly signed by the trusted key, over the root of another prefix.
			rec, err := recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}.SignTranscript(context.Background(), cps[1].Root, cps[0].Attempts)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, cps[0].File), rec, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"wrong count": func(t *testing.T, dir string, cps []*producer.Checkpoint) {
			rec, err := recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued}.SignTranscript(context.Background(), cps[0].Root, cps[0].Attempts+1)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, cps[0].File), rec, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"edited": func(t *testing.T, dir string, cps []*producer.Checkpoint) {
			p := filepath.Join(dir, cps[0].File)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"call_count":3`, `"call_count":2`, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"stray name": func(t *testing.T, dir string, cps []*producer.Checkpoint) {
			if err := os.WriteFile(filepath.Join(dir, producer.CheckpointDir, "007.json"), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, forge := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run.trace")
			cps := checkpointed(t, dir, 6, 3)
			forge(t, dir, cps)
			rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
			if rep.Verdict != verify.Failed || !slices.Contains(codes, verify.CodeCheckpointInvalid) {
				t.Fatalf("verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
			}
			for _, f := range rep.Find(verify.CodeCheckpointInvalid) {
				if !strings.HasPrefix(f.Subject, producer.CheckpointDir+"/") && !strings.HasPrefix(f.Subject, `"`+producer.CheckpointDir+"/") {
					t.Errorf("checkpoint_invalid names %q, not a checkpoint", f.Subject)
				}
			}
		})
	}
}

// TestCheckpointRecovered: seal --recover keeps the checkpoints; the final
// record covers every line and each checkpoint still verifies against the
// prefix it names.
func TestCheckpointRecovered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run.trace")
	cps := checkpointed(t, dir, 6, 3)
	// A checkpoint a crash left half-written is removed, never judged.
	leftover := filepath.Join(dir, producer.CheckpointDir, ".tmp-99.json")
	if err := os.WriteFile(leftover, []byte(`{"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := producer.Recover(dir, producer.Options{Clock: clock(verifytest.Issued.Add(-time.Minute)), Entropy: &counterEntropy{},
		Producer: transcript.Producer{Name: "verify-test"}, Server: transcript.Server{Transport: transcript.TransportInProcess}})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := r.Seal(context.Background(), recordSigner{key: verifytest.Key(t, 1), at: verifytest.Issued})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the half-written checkpoint is still there: %v", err)
	}
	for _, cp := range cps {
		if _, err := os.Stat(filepath.Join(dir, cp.File)); err != nil {
			t.Errorf("recovery lost %s: %v", cp.File, err)
		}
	}
	rep, codes := verdictCodes(t, os.DirFS(dir), trusted(t))
	if rep.Verdict != verify.Verified || len(codes) != 0 || rep.Root != sealed.Root {
		t.Fatalf("verdict %s, problems %v, root %s (sealed %s)\n%s", rep.Verdict, codes, rep.Root, sealed.Root, dump(rep))
	}
	bound := rep.Find(verify.CodeCheckpointBound)
	if len(bound) != 1 || !strings.HasPrefix(bound[0].Detail, "2 checkpoints") {
		t.Errorf("checkpoint_bound %+v", bound)
	}
	// A checkpoint signed by a key other than the record's fails even in
	// a sealed bundle.
	rec, err := recordSigner{key: verifytest.Key(t, 2), at: verifytest.Issued}.SignTranscript(context.Background(), cps[0].Root, cps[0].Attempts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, cps[0].File), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, codes := verdictCodes(t, os.DirFS(dir), verify.Options{AllowEmbeddedKey: true, At: verifytest.At}); rep.Verdict != verify.Failed || !slices.Contains(codes, verify.CodeCheckpointInvalid) {
		t.Fatalf("another signer: verdict %s, problems %v\n%s", rep.Verdict, codes, dump(rep))
	}
}
