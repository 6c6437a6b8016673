package transcript

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/mcpwire"
)

// The spec and the constants stay in sync: every code, type, kind and
// reason in Go is documented in spec/transcript.md, and every line error
// code the spec lists exists in Go.
func TestSpecInSync(t *testing.T) {
	data, err := os.ReadFile("../spec/transcript.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(data)
	section := func(title string) string {
		i := strings.Index(spec, "\n## "+title+"\n")
		if i < 0 {
			t.Fatalf("spec has no section %q", title)
		}
		rest := spec[i+len(title)+5:]
		if j := strings.Index(rest, "\n## "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	firstCol := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	var specCodes []string
	for _, m := range firstCol.FindAllStringSubmatch(section("Line errors"), -1) {
		specCodes = append(specCodes, m[1])
	}
	codes := []string{CodeTooLong, CodeTornLine, CodeNotCanonical, codeUnknownType, CodeInvalidMember, CodeUnsupportedFormat,
		CodeSeqGap, CodeHeaderMissing, CodeHeaderRepeated, CodeAfterSeal, codeScopeMismatch}
	slices.Sort(codes)
	slices.Sort(specCodes)
	if !slices.Equal(codes, specCodes) {
		t.Errorf("line error codes: Go %v, spec %v", codes, specCodes)
	}
	var kinds []string
	for _, m := range firstCol.FindAllStringSubmatch(section("Outcomes"), -1) {
		kinds = append(kinds, m[1])
	}
	for _, k := range []string{ObsResponse, ObsTransportFailure, ObsTimeout, ObsCancelSent, ObsLateResponse} {
		if !slices.Contains(kinds, k) {
			t.Errorf("observation kind %s not in the Outcomes table", k)
		}
	}
	for _, typ := range []string{typeHeader, typeProtocol, typeSnapshot, typeNotification, typeAttempt, typeObservation, typeResolution, typeRecovery, typeSeal, typeFrame, typeSession} {
		if !regexp.MustCompile(`(?m)^### ` + typ + `\b`).MatchString(spec) {
			t.Errorf("event type %s has no section", typ)
		}
	}
	for _, v := range []string{
		Format, formatV1, Profile, MerkleAlg, proofFormat,
		SessionClientGone, FrameForwarded, FrameRefused, FrameWithheld, FrameRequest, frameNotification, FrameResponse, FrameUnread,
		DurabilityStrict, DurabilityBatch, DurabilityNone, RetainFull, RetainDigest,
		ReasonProducerCrashed, ReasonSealedInFlight, reasonServerExited, OutcomeUnknown,
		BasisCallerDeclared, BasisInferred, BasisContinuation, BasisProducer,
		CorrNotString, CorrTooLong, CorrBadCharset, CorrBadShape,
		NoneNoSnapshot, noneInvalidated, toolAbsent, toolNotString, toolTooLong,
		IDString, IDNumber, IDNull, IDOther, mcpwire.TermLF, mcpwire.TermCRLF, mcpwire.TermNone,
		string(mcpwire.EraModern), string(mcpwire.EraLegacy), string(mcpwire.EraUnknown), ProtoPresent, ProtoAbsent, ProtoMalformed, ProtoNegotiated,
		SourceInitialize, SourceDiscover, SourceRequestMeta, ServerToClient, ClientToServer,
		TransportStdio, TransportInProcess, TransportHTTP,
		mcpwire.MetaCorrelationID, mcpwire.MetaRetryOf, mcpwire.MetaProtocolVersion,
	} {
		if !strings.Contains(spec, "`"+v+"`") && !strings.Contains(spec, `"`+v+`"`) {
			t.Errorf("%q is not documented in spec/transcript.md", v)
		}
	}
}
