//go:build race

package engine_test

// raceEnabled reports whether the race detector is on: sync.Pool drops
// items at random under it, so allocation counts are meaningless.
const raceEnabled = true
