//go:build race

package sign

// raceEnabled: the race detector makes scrypt (encrypted keys) about ten
// times slower, so the encrypted round trip covers one algorithm under it.
const raceEnabled = true
