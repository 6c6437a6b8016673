//go:build race

package verify_test

// raceEnabled: the race detector multiplies the cost of building and
// verifying the 200,000-attempt memory test transcript; it runs without it.
const raceEnabled = true
