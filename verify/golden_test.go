package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/verify"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestReportGolden pins the JSON report of the standard bundle: the media
// type, every member name, the findings and their order are a contract
// (spec/verification.md, "Report").
func TestReportGolden(t *testing.T) {
	rep, err := verifier(t, trusted(t)).Bundle(context.Background(), verifytest.Standard(t).FS())
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "standard.report.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the report differs from %s (go test ./verify -run Golden -update after a deliberate change):\n%s", path, got)
	}
	var back verify.Report
	if err := json.Unmarshal(want, &back); err != nil || back.MediaType != verify.MediaType || back.Verdict != verify.Verified {
		t.Errorf("golden report does not read back: %v %+v", err, back)
	}
}
