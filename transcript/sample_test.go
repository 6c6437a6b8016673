package transcript

import (
	"bytes"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

const (
	testScope = "0b6c1c0e-5d3e-4d57-9a3a-4c5b7e0f1a2b"
	dig1      = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	dig2      = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func sampleHeader() *Header {
	return &Header{
		Type: typeHeader, Seq: 0, Format: Format, Profile: Profile,
		Canonicalization: Canonicalization{Lines: canon.PolicyV02ID, Declarations: canon.PolicyMCPDeclID},
		Merkle:           MerkleAlg, ExecutionScope: testScope,
		Producer:    Producer{Name: "tracectl", Version: "v0.0.0-test"},
		Server:      Server{Transport: TransportStdio, Executable: "/usr/bin/srv", ExecutableSHA256: dig1, Argc: 2},
		Retention:   RetainFull,
		Durability:  DurabilityStrict,
		Limits:      HeaderLimits{MaxFrameBytes: 1 << 24, MaxSnapshotPages: 100, MaxPageBytes: 1 << 22, MaxSnapshotBytes: 1 << 26},
		StartedAtMs: 1700000000000,
	}
}

func sampleAttempt(seq int64, id string) *Attempt {
	return &Attempt{
		Type: typeAttempt, Seq: seq, AtMs: 1700000000001, ExecutionScope: testScope, AttemptID: id,
		Tool: "echo", ArgsDigest: dig1,
		RPCID:        JSONRPCID{Present: true, Kind: IDNumber, Text: "7"},
		Protocol:     AttemptProto{Era: mcpwire.EraModern, State: ProtoPresent, Value: "2026-07-28"},
		ServerDigest: dig2,
		Request:      Payload{Digest: dig1, Length: 120, Retained: true},
		Terminator:   mcpwire.TermLF,
		Snapshot:     SnapshotRef{SnapshotID: "s1", ManifestDigest: dig2, Complete: true},
	}
}

func sampleResponse(seq int64, id string) *Observation {
	return &Observation{
		Type: typeObservation, Seq: seq, AtMs: 1700000000002, AttemptID: id, Kind: ObsResponse,
		ResultType: "complete", Response: &Payload{Digest: dig2, Length: 80, Retained: true},
		Terminator: mcpwire.TermLF, Basis: BasisProducer,
	}
}

func sampleSeal(seq, attempts int64) *Seal {
	return &Seal{Type: typeSeal, Seq: seq, AtMs: 1700000000009, Attempts: attempts, Responses: attempts}
}

func mustLine(t testing.TB, v any) []byte {
	t.Helper()
	b, err := canon.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return b
}

// sampleTranscript returns the lines of a valid sealed transcript with n
// attempts, each answered.
func sampleTranscript(t testing.TB, n int) [][]byte {
	lines := [][]byte{mustLine(t, sampleHeader())}
	seq := int64(1)
	for i := 0; i < n; i++ {
		id := "a" + itoa(int64(i+1))
		lines = append(lines, mustLine(t, sampleAttempt(seq, id)))
		lines = append(lines, mustLine(t, sampleResponse(seq+1, id)))
		seq += 2
	}
	lines = append(lines, mustLine(t, sampleSeal(seq, int64(n))))
	return lines
}

func joinLines(lines [][]byte) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
