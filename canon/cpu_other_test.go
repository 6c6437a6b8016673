//go:build !unix

package canon

import "time"

// processCPU is not measured here; BenchmarkAnchors then omits its CPU ratio.
func processCPU() time.Duration { return 0 }
