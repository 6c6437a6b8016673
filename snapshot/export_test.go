package snapshot

// The protocol revisions the capture speaks, for the external tests.
const (
	ModernVersion = modernVersion
	LegacyVersion = legacyVersion
)
