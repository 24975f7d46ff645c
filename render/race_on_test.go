//go:build race

package render

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts are not comparable.
const raceEnabled = true
