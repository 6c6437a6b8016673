package verify_test

// Security review of pack_unreferenced (verify/pack.go packFindings).

import (
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/verify"
)

// TestPackUnreferencedOverLimit: an honest bundle read under a
// transcript line limit (limit_exceeded: the rest was not read) must not
// be told its producer-written payloads were appended by "something": the
// entries the unread lines reference are unreferenced only because the
// verifier stopped. On main pack_unreferenced says "a producer writes
// none: something appended them".
func TestPackUnreferencedOverLimit(t *testing.T) {
	fsys, _ := packed(t, verifytest.Standard(t).FS())
	o := trusted(t)
	o.Limits.MaxTranscriptLines = 3
	rep, codes := verdictCodes(t, fsys, o)
	t.Logf("verdict %s codes %v", rep.Verdict, codes)
	for _, f := range rep.Find(verify.CodePackUnreferenced) {
		t.Errorf("honest bundle under a line limit: %s %s", f.Status, f.Detail)
	}
}
