package main

import (
	"fmt"

	"github.com/tracectl/tracectl/transcript"
)

// checkRecordModes validates the --durability and --retain of wrap and
// proxy.
func checkRecordModes(durability, retain string) error {
	switch durability {
	case transcript.DurabilityStrict, transcript.DurabilityBatch, transcript.DurabilityNone:
	default:
		return usageErr(fmt.Errorf("--durability %q: want strict, batch or none", durability), "")
	}
	switch retain {
	case transcript.RetainFull, transcript.RetainDigest:
	default:
		return usageErr(fmt.Errorf("--retain %q: want full or digest", retain), "")
	}
	return nil
}
