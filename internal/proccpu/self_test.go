package proccpu

import (
	"runtime"
	"testing"
	"time"
)

// TestSelfCountsWork: a busy loop on this goroutine shows in the CPU time
// as at least 20 ms within 5 s of wall time (a loaded host may deschedule
// it for much of that), neither part goes back, and Total is their sum.
func TestSelfCountsWork(t *testing.T) {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "windows":
	default:
		t.Skipf("no CPU times on %s", runtime.GOOS)
	}
	before, ok := Self()
	if !ok {
		t.Fatal("Self: not ok")
	}
	var x uint64
	var after Times
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		for i := range 1_000_000 {
			x += uint64(i) ^ x>>3
		}
		if after, _ = Self(); after.Total()-before.Total() >= 20*time.Millisecond {
			break
		}
	}
	if got := after.Total() - before.Total(); got < 20*time.Millisecond {
		t.Fatalf("CPU time grew by %v over 5 s of a busy loop (%d)", got, x)
	}
	if after.User < before.User || after.System < before.System {
		t.Fatalf("CPU time went back: %+v after %+v", after, before)
	}
	if after.Total() != after.User+after.System {
		t.Fatal("Total is not User + System")
	}
}
