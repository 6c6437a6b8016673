package verify

// StreamStats reports, for each transcript read until the returned
// function is called, how many pack entries the line reader prefetched
// and how many of them its walk found (without the index).
func StreamStats(f func(prefetched, walked int64)) (restore func()) {
	streamStatsHook = func(s streamStats) { f(s.prefetched, s.walked) }
	return func() { streamStatsHook = nil }
}

// Bounds the package's external tests reach for; not API.
const (
	MaxFindingsPerCode = maxFindingsPerCode
	ProgressEvery      = progressEvery
)
