//go:build race

package proxy

// raceEnabled: the race detector allows 8128 live goroutines per process.
const raceEnabled = true
