package verify_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tracectl/tracectl/verify"
	"github.com/tracectl/tracectl/verify/verifytest"
)

// local, not committed
func BenchmarkZZLocal(b *testing.B) {
	const out = "/tmp/vf-bundle"
	if _, err := os.Stat(out); err != nil {
		dir := benchBundle(b, 100000, 10000)
		if o, err := exec.Command("cp", "-r", dir, out).CombinedOutput(); err != nil {
			b.Fatal(err, string(o))
		}
	}
	v := verifier(b, verify.Options{TrustedKey: verifytest.Key(b, 1).Public(), At: verifytest.At})
	floor := sha256Floor(b, out)
	var rep *verify.Report
	start := time.Now()
	for b.Loop() {
		var err error
		rep, err = v.Bundle(context.Background(), verify.DirFS(out))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start))/float64(b.N)/float64(floor), "x-sha256sum")
	if p := os.Getenv("VF_REPORT"); p != "" {
		j, _ := json.MarshalIndent(rep, "", " ")
		os.WriteFile(p, j, 0o600)
	}
}
