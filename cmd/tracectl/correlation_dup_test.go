package main

import (
	"crypto/rand"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// --correlation-meta given twice with one key is refused at startup: it
// once passed the flag check (shape and the known key only), but a header naming a key
// twice is invalid (transcript validToolUseMeta), so producer.Open refuses
// every bundle: `tracectl proxy` starts, then answers every request 503
// (audit unavailable, the bundle cannot be opened). The flag check should
// refuse it at startup, as it does the other invalid keys.
func TestCorrelationMetaDuplicateRefused(t *testing.T) {
	p := policyOptions{correlationMeta: []string{"acme.dev/toolUseId", "acme.dev/toolUseId"}}
	if err := p.load(); err != nil {
		if code := exitCode(err, io.Discard); code != exitUsage {
			t.Fatalf("refused with exit %d, want a usage error (2): %v", code, err)
		}
		return // refused at startup, before anything is created
	}
	_, err := producer.Open(filepath.Join(t.TempDir(), "x.trace"), producer.Options{Clock: time.Now, Entropy: rand.Reader,
		Producer: transcript.Producer{Name: "r", Version: "0"}, Server: transcript.Server{Transport: transcript.TransportInProcess},
		ToolUseMeta: p.correlationMeta})
	if err != nil {
		t.Fatalf("the flags pass, every bundle then fails to open: %v", err)
	}
}
