//go:build race

package canon

// raceEnabled scales down the long-running tests under the race detector,
// which slows this single-goroutine code tenfold without finding anything
// the normal run does not. The normal run (go test ./...) does all of it.
const raceEnabled = true
