//go:build !race

package sign

const raceEnabled = false
